#!/usr/bin/env node
// make_corpus.js — writes the byte-tricky files of tests/fixtures/tokenizer/corpus/ whose exact
// bytes (tabs, CR, trailing spaces, invisible Unicode spaces, combining marks) are easier to state
// as escapes than to type, and the mixed-Unicode benchmark file built from the whole corpus.
// The other corpus files (prose, code, scripts, emoji, ...) are written by hand and only read here.
//
// Deterministic: same inputs, same bytes. Usage (from anywhere):
//   node tools/tokenizer-ref/make_corpus.js
'use strict';

const fs = require('fs');
const path = require('path');

const CORPUS = path.resolve(__dirname, '../../tests/fixtures/tokenizer/corpus');
const BENCH_FILE = 'mixed_unicode_bench.txt';
const BENCH_TARGET_BYTES = 160 * 1000;

// mulberry32: tiny seeded PRNG so the generated files never change between runs.
function rng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function write(name, text) {
    fs.writeFileSync(path.join(CORPUS, name), text, 'utf8');
    console.log(`wrote ${name}: ${Buffer.byteLength(text, 'utf8')} bytes`);
}

// ---------------------------------------------------------------------------------------------
function whitespace() {
    const L = [];
    L.push('Runs of spaces between words, 1 to 16 wide:');
    for (let n = 1; n <= 16; n++) L.push(`a${' '.repeat(n)}b${' '.repeat(n)}${n}${' '.repeat(n)}!`);
    L.push('');
    L.push('Trailing spaces on the next lines (1, 2, 3, 8):');
    L.push('one ');
    L.push('two  ');
    L.push('three   ');
    L.push('eight        ');
    L.push('Lines made only of spaces follow:');
    L.push(' ');
    L.push('  ');
    L.push('     ');
    L.push('Blank lines follow (3):');
    L.push('', '', '');
    L.push('Space before newline then indented text:');
    L.push('    four-space indent');
    L.push('        eight-space indent');
    L.push('   three-space indent, then a space before the newline ');
    L.push(' \n \n \n(three " \\n" pairs above)');
    L.push('Space before punctuation:  ,  .   ;    !   ?  (  )  "  \'');
    L.push('Space before digits:  1   22    333     4444');
    L.push("Space before contractions:  's   't  're 've  'm 'll   'd");
    L.push('Many newlines in a row:\n\n\n\n\n\nafter six newlines');
    L.push('Newline then spaces then newline:\n   \n    \nend of that');
    L.push('Vertical tab \u000b and form feed \u000c are whitespace; so is a lone CR \r in the middle.');
    L.push('Information separators \u001c\u001d\u001e\u001f are NOT Unicode White_Space (Python str.isspace says they are).');
    L.push('Sixty-four spaces:' + ' '.repeat(64) + 'then a word.');
    L.push(' '.repeat(200));
    L.push('The file ends with spaces, newlines and spaces again.');
    return L.join('\n') + '   \n\n\n   ';
}

function tabs() {
    const L = [];
    L.push('\tone tab indent');
    L.push('\t\ttwo tab indent');
    L.push('\t\t\t\tfour tab indent');
    L.push('a\tb\tc\td');
    L.push('name\tage\tcity');
    L.push('Alice\t30\tParis');
    L.push('Bob\t\t\tLondon');
    L.push('space then tab: a \tb; tab then space: a\t b; both: a \t \t b');
    L.push('trailing tab\t');
    L.push('trailing tabs\t\t\t');
    L.push('\t');
    L.push('\t \t \t');
    L.push('tab before punctuation:\t!\t?\t.\t,\t;');
    L.push('tab before digits:\t1\t22\t333');
    L.push("tab before contraction:\t's\t'll");
    L.push('\t\n\t\n\t(tab-newline pairs above)');
    L.push('if (x) {\n\tif (y) {\n\t\treturn 1;\t/* comment */\n\t}\n}');
    return L.join('\n') + '\n';
}

function crlf() {
    const lines = [
        'This file uses Windows line endings (CR LF).',
        'Each line ends with \\r\\n, including the last one.',
        '',
        'A blank line is above; a line with trailing spaces is below.',
        'trailing spaces   ',
        '\tan indented line',
        '    a space-indented line',
        "It's got contractions and numbers 1, 22, 333.",
        '',
        '',
        'Two blank lines above. A lone CR\ris inside this line, and a lone LF',
        'ended the previous line, and LF CR \n\rcomes next.',
        'Ünïcödé with CRLF: café, 東京, 🙂',
        'Last line.',
    ];
    return lines.join('\r\n') + '\r\n';
}

const SPACES = [
    // [codepoint, name, is Unicode White_Space]
    [0x00a0, 'NO-BREAK SPACE', true],
    [0x1680, 'OGHAM SPACE MARK', true],
    [0x2000, 'EN QUAD', true],
    [0x2001, 'EM QUAD', true],
    [0x2002, 'EN SPACE', true],
    [0x2003, 'EM SPACE', true],
    [0x2004, 'THREE-PER-EM SPACE', true],
    [0x2005, 'FOUR-PER-EM SPACE', true],
    [0x2006, 'SIX-PER-EM SPACE', true],
    [0x2007, 'FIGURE SPACE', true],
    [0x2008, 'PUNCTUATION SPACE', true],
    [0x2009, 'THIN SPACE', true],
    [0x200a, 'HAIR SPACE', true],
    [0x2028, 'LINE SEPARATOR', true],
    [0x2029, 'PARAGRAPH SEPARATOR', true],
    [0x202f, 'NARROW NO-BREAK SPACE', true],
    [0x205f, 'MEDIUM MATHEMATICAL SPACE', true],
    [0x3000, 'IDEOGRAPHIC SPACE', true],
    [0x0085, 'NEXT LINE (NEL)', true],
    [0x180e, 'MONGOLIAN VOWEL SEPARATOR (not White_Space)', false],
    [0x200b, 'ZERO WIDTH SPACE (not White_Space)', false],
    [0xfeff, 'ZERO WIDTH NO-BREAK SPACE / BOM (not White_Space)', false],
];

function unicodeSpaces() {
    const L = [];
    for (const [cp, name] of SPACES) {
        const x = String.fromCodePoint(cp);
        const hex = 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
        L.push(`${hex} ${name}: a${x}b | a ${x}b | a${x} b | a${x}${x}${x}b | ${x}1 | ${x}! | ${x}'s | end${x}`);
        L.push(`${x}line starts with it, ends with two${x}${x}`);
    }
    const all = SPACES.map(([cp]) => String.fromCodePoint(cp)).join('');
    L.push(`All together: [${all}]`);
    L.push(`All, between words: w${SPACES.map(([cp]) => String.fromCodePoint(cp)).join('w')}w`);
    L.push('French typography: « Bonjour\u202f! » dit-il\u00a0; 10\u202f000\u00a0€.');
    L.push('Japanese:\u3000全角スペース\u3000です。');
    return L.join('\n') + '\n';
}

function bomStart() {
    return '\ufeffThis file starts with a byte order mark (U+FEFF), as Windows Notepad writes.\n' +
        'Readers must keep it: it is text to the tokenizer, not whitespace.\n';
}

function combiningMarks() {
    const r = rng(0x5eed);
    const zalgo = (s, n) => Array.from(s).map((c) => {
        if (c === ' ') return c;
        let out = c;
        const k = 1 + Math.floor(r() * n);
        for (let i = 0; i < k; i++) {
            // any mark of the Combining Diacritical Marks block (U+0300-U+036F, all Mn)
            out += String.fromCodePoint(0x300 + Math.floor(r() * 0x70));
        }
        return out;
    }).join('');
    const L = [];
    L.push('Precomposed vs decomposed: caf\u00e9 / cafe\u0301, na\u00efve / nai\u0308ve, \u00c5ngstr\u00f6m / A\u030angstro\u0308m');
    L.push('Decomposed capitals: E\u0301COLE, \u00c9COLE; decomposed after a space: x \u0301 y; mark at start: \u0301abc');
    L.push('Vietnamese NFD: Vie\u0302\u0323t Nam, Ngu\u031bo\u031b\u0300i, tie\u0302\u0301ng Vie\u0302\u0323t, \u0111u\u031bo\u031b\u0300ng');
    L.push('Vietnamese NFC: Vi\u1ec7t Nam, Ng\u01b0\u1eddi, ti\u1ebfng Vi\u1ec7t, \u0111\u01b0\u1eddng');
    L.push('Stacked marks on one letter: a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309\u030a\u030b\u030c q\u0323\u0324\u0325\u0326\u0327\u0328');
    L.push('Combining enclosing: 1\u20e3 A\u20dd B\u20de x\u0336y\u0336z\u0336 (strikethrough)');
    L.push('Zalgo (light): ' + zalgo('he comes', 3));
    L.push('Zalgo (heavy): ' + zalgo('Z A L G O', 12));
    L.push('Zalgo (extreme): ' + zalgo('xy', 40));
    L.push('Hangul conjoining jamo (NFD): \u1112\u1161\u11ab\u1100\u1173\u11af vs NFC: \ud55c\uae00');
    L.push('Devanagari (virama, matras): \u0928\u092e\u0938\u094d\u0924\u0947 \u0939\u093f\u0928\u094d\u0926\u0940 \u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f');
    L.push('Thai (above/below vowels, tone marks): \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 \u0e01\u0e48\u0e32 \u0e19\u0e49\u0e33');
    L.push('Variation selectors: \u845b\udb40\udd00 \u845b\udb40\udd01 \u2764\ufe0e \u2764\ufe0f');
    L.push('Lonely marks: \u0301\u0302\u0303 and \u0308!');
    return L.join('\n') + '\n';
}

// The benchmark file: lines drawn at random (seeded) from every other corpus file, so it mixes
// every script and every whitespace oddity in roughly the corpus's proportions.
function mixedBench() {
    const names = fs.readdirSync(CORPUS).filter((n) => n !== BENCH_FILE).sort();
    const pools = names.map((n) => fs.readFileSync(path.join(CORPUS, n), 'utf8').split('\n'));
    const r = rng(20240131);
    const parts = [];
    let bytes = 0;
    while (bytes < BENCH_TARGET_BYTES) {
        const pool = pools[Math.floor(r() * pools.length)];
        const start = Math.floor(r() * pool.length);
        const n = 1 + Math.floor(r() * 6);
        const chunk = pool.slice(start, start + n).join('\n') + (r() < 0.25 ? '\n\n' : '\n');
        parts.push(chunk);
        bytes += Buffer.byteLength(chunk, 'utf8');
    }
    return parts.join('');
}

function main() {
    fs.mkdirSync(CORPUS, { recursive: true });
    write('whitespace.txt', whitespace());
    write('tabs.txt', tabs());
    write('crlf.txt', crlf());
    write('unicode_spaces.txt', unicodeSpaces());
    write('bom_start.txt', bomStart());
    write('combining_marks.txt', combiningMarks());
    write(BENCH_FILE, mixedBench()); // last: it reads all the others
}

main();
