#!/usr/bin/env node
// make_fixtures.js — reference GPT-2 BPE token ids for gptc's tokenizer tests, made with tokenizers
// nobody in this project wrote:
//   * tiktoken (OpenAI's Rust implementation compiled to WASM), encoding "gpt2" — THE reference;
//   * gpt-3-encoder (a pure-JavaScript port of OpenAI's original encoder.py) — a cross-check only.
//
// Inputs: every file in tests/fixtures/tokenizer/corpus/ except the benchmark file, and the short
// hand-written edge cases below.
// Outputs (in tests/fixtures/tokenizer/):
//   cases.json        [{name, text, ids, ids_special, gpt3_encoder_agrees}, ...], one case a line
//                       ids          tiktoken, no special token allowed: "<|endoftext|>" is plain text
//                       ids_special  tiktoken with "<|endoftext|>" allowed (-> id 50256)
//   bench_expected.json  byte and token counts (and the sum of the ids) of the benchmark inputs
//   DISAGREEMENTS.md  the cases where gpt-3-encoder differs from tiktoken, with a diagnosis
//
// It checks, and exits 1 otherwise, that tiktoken's ids decode back to the exact bytes of the text
// (both encodings), that encode(text, [], []) equals encode_ordinary(text), and that a
// White_Space-correct JavaScript copy of the GPT-2 pre-tokenizer regex followed by tiktoken on each
// piece reproduces tiktoken's ids (so the diagnosis below explains splits correctly).
//
// Usage (from anywhere): node tools/tokenizer-ref/make_fixtures.js
'use strict';

const fs = require('fs');
const path = require('path');
const { get_encoding } = require('tiktoken');
const gpt3 = require('gpt-3-encoder');

const ROOT = path.resolve(__dirname, '../..');
const FIX = path.join(ROOT, 'tests/fixtures/tokenizer');
const CORPUS = path.join(FIX, 'corpus');
const BENCH_FILE = 'mixed_unicode_bench.txt';
const BENCH_INPUTS = ['data/tinyshakespeare.txt', 'tests/fixtures/tokenizer/corpus/' + BENCH_FILE];
const EOT = '<|endoftext|>';

// ---------------------------------------------------------------------------------------------
// Hand-written edge cases. Names are stable identifiers for the C tests; keep them unique.
// No NUL (U+0000): cJSON, which gptc's tests use, stores strings NUL-terminated and would cut it.
// No lone surrogates: they cannot be encoded as UTF-8.
const EDGE = [
    ['empty', ''],
    ['space', ' '],
    ['two_spaces', '  '],
    ['three_spaces', '   '],
    ['newline', '\n'],
    ['three_newlines', '\n\n\n'],
    ['space_newline', ' \n'],
    ['newline_space', '\n '],
    ['spaces_newline_spaces', '   \n   '],
    ['tab', '\t'],
    ['tab_tab_newline', '\t\t\n'],
    ['cr', '\r'],
    ['crlf', '\r\n'],
    ['crlf_x2', '\r\n\r\n'],
    ['a_space_space_b', 'a  b'],
    ['a_3spaces_b', 'a   b'],
    ['a_tab_b', 'a\tb'],
    ['a_space_tab_b', 'a \tb'],
    ['a_tab_space_b', 'a\t b'],
    ['trailing_spaces', 'hello   '],
    ['leading_spaces', '   hello'],
    ['spaces_before_punct', 'x  !!'],
    ['space_bang', ' !'],
    ['newline_bang', '\n!'],
    ['hello_world', 'hello world'],
    ['Hello_world_punct', 'Hello, world!'],
    ['dont', "don't"],
    ['DONT', "DON'T"],
    ['its_mixed_case', "It'S"],
    ['contractions_all', "'s 't 're 've 'm 'll 'd"],
    ['contractions_glued', "we'd've y'all'll"],
    ['contractions_upper', "'S 'T 'RE 'VE 'M 'LL 'D"],
    ['apostrophe_alone', "'"],
    ['apostrophes_3s', "'''s"],
    ['apostrophe_space_s', "' s"],
    ['curly_dont', 'don\u2019t'],
    ['curly_s', '\u2019s'],
    ['digits_7', '1234567'],
    ['digits_100', '1'.repeat(100)],
    ['decimal', '3.14159'],
    ['thousands', '1,000,000.50'],
    ['date', '2024-01-31'],
    ['phone', '+1 (555) 123-4567'],
    ['arabic_indic_digits', '\u0663\u0664\u0665'],
    ['superscript_digits', 'x\u00b2 + y\u00b3'],
    ['roman_numeral', '\u216b'],
    ['fraction', '\u00bd'],
    ['letters_200', 'a'.repeat(200)],
    ['newlines_50', '\n'.repeat(50)],
    ['spaces_100', ' '.repeat(100)],
    ['equals_80', '='.repeat(80)],
    ['bangs', '!!!!!!!!!!!!'],
    ['eot_alone', EOT],
    ['eot_between_words', 'hello<|endoftext|>world'],
    ['eot_twice', EOT + EOT],
    ['eot_spaced', ' <|endoftext|> '],
    ['eot_partial', '<|endoftext'],
    ['eot_nested', '<|<|endoftext|>|>'],
    ['naive_nfc', 'na\u00efve'],
    ['e_acute_nfd', 'e\u0301'],
    ['cafe_nfd', 'cafe\u0301'],
    ['mark_alone', '\u0301'],
    ['space_mark', ' \u0301'],
    ['nbsp', '\u00a0'],
    ['a_nbsp_b', 'a\u00a0b'],
    ['a_space_nbsp_b', 'a \u00a0b'],
    ['ideographic_space', '\u3000'],
    ['nel', '\u0085'],
    ['a_nel_b', 'a\u0085b'],
    ['a_space_nel_b', 'a \u0085b'],
    ['nel_newline', 'x\u0085\n'],
    ['bom', '\ufeff'],
    ['bom_hello', '\ufeffhello'],
    ['a_space_bom_b', 'a \ufeffb'],
    ['zwsp', 'a\u200bb'],
    ['mongolian_vs', 'a\u180eb'],
    ['a_space_mongolian_vs_b', 'a \u180eb'],
    ['space_mongolian_vs_bang', 'x \u180e!'],
    ['line_separator', 'x\u2028y'],
    ['paragraph_separator', 'x \u2029 y'],
    ['en_quad_run', '\u2000\u2001\u2002'],
    ['vt_ff', 'a\u000b\u000cb'],
    ['info_separators', 'a\u001c\u001d\u001e\u001fb'],
    ['control_chars', '\u0001\u0002\u007f'],
    ['c1_control', '\u0080\u0099\u009f'],
    ['thumbs_up', '\u{1f44d}'],
    ['thumbs_up_skin', '\u{1f44d}\u{1f3fd}'],
    ['family_zwj', '\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}'],
    ['flag_fr', '\u{1f1eb}\u{1f1f7}'],
    ['rainbow_flag', '\u{1f3f3}\ufe0f\u200d\u{1f308}'],
    ['emoji_glued', 'ok\u{1f44c}ok'],
    ['korean', '\ud55c\uad6d\uc5b4'],
    ['japanese', '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8'],
    ['chinese', '\u4e2d\u6587'],
    ['hebrew', '\u05e2\u05d1\u05e8\u05d9\u05ea'],
    ['arabic', '\u0627\u0644\u0639\u0631\u0628\u064a\u0629'],
    ['math_fraktur', '\u{1d518}\u{1d52b}\u{1d526}\u{1d520}\u{1d52c}\u{1d521}\u{1d522}'],
    ['cjk_ext_b', '\u{20000}\u{20bb7}'],
    ['private_use', '\ue000\u{f0000}'],
    ['max_codepoint', '\u{10ffff}'],
    ['noncharacter', '\ufffe\uffff'],
    ['replacement_char', '\ufffd'],
];

// ---------------------------------------------------------------------------------------------
// GPT-2's pre-tokenizer, as tiktoken's gpt2 encoding runs it (Rust fancy-regex, where \s is the
// Unicode White_Space property), and as gpt-3-encoder runs it (JavaScript, where \s also has
// U+FEFF but lacks U+0085).
const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PAT_TIKTOKEN_IN_JS = new RegExp(
    `'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`, 'gu');
const PAT_GPT3_ENCODER = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const split = (re, text) => Array.from(text.matchAll(re), (m) => m[0]);

const JS_S = /^\s$/u;
const UNICODE_WS = new RegExp(`^[${WS}]$`, 'u');

const cp = (c) => 'U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
const show = (s) => JSON.stringify(s).replace(/[^\x20-\x7e]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
const eq = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

function fail(msg) {
    console.error('make_fixtures: ' + msg);
    process.exitCode = 1;
}

// ---------------------------------------------------------------------------------------------
function loadCases() {
    const cases = [];
    const files = fs.readdirSync(CORPUS).filter((n) => n !== BENCH_FILE).sort();
    for (const f of files) {
        const buf = fs.readFileSync(path.join(CORPUS, f));
        const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf);
        cases.push({ name: 'corpus/' + f, text });
    }
    const seen = new Set(cases.map((c) => c.name));
    for (const [n, text] of EDGE) {
        const name = 'edge/' + n;
        if (seen.has(name)) throw new Error('duplicate case name ' + name);
        seen.add(name);
        cases.push({ name, text });
    }
    return cases;
}

function diagnose(enc, text, ids, g3) {
    const lines = [];
    const pt = split(PAT_TIKTOKEN_IN_JS, text);
    const pg = split(PAT_GPT3_ENCODER, text);
    let i = 0;
    while (i < pt.length && i < pg.length && pt[i] === pg[i]) i++;
    if (i < pt.length || i < pg.length) {
        const ctxT = pt.slice(i, i + 3), ctxG = pg.slice(i, i + 3);
        lines.push(`pre-tokenizer split differs at piece ${i}: tiktoken ${ctxT.map(show).join(' ')} vs gpt-3-encoder ${ctxG.map(show).join(' ')}`);
        const culprits = new Set();
        for (const c of text) {
            if (JS_S.test(c) !== UNICODE_WS.test(c)) culprits.add(c);
        }
        if (culprits.size) {
            lines.push('characters where JavaScript \\s and Unicode White_Space disagree: ' +
                [...culprits].map((c) => `${cp(c)} (${JS_S.test(c) ? 'JS \\s: yes, White_Space: no' : 'JS \\s: no, White_Space: yes'})`).join(', '));
        }
        return lines;
    }
    // Same pieces: the difference is inside BPE on some piece.
    for (const piece of pt) {
        const a = Array.from(enc.encode_ordinary(piece));
        const b = gpt3.encode(piece);
        if (!eq(a, b)) {
            lines.push(`same pre-tokenizer pieces; BPE differs on piece ${show(piece)}: tiktoken [${a}] vs gpt-3-encoder [${b.map(String)}]`);
            break;
        }
    }
    return lines;
}

function main() {
    const enc = get_encoding('gpt2');
    const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    const cases = loadCases();
    const out = [];
    const disagreements = [];

    for (const c of cases) {
        const bytes = Buffer.from(c.text, 'utf8');
        const ids = Array.from(enc.encode(c.text, [], []));
        const ordinary = Array.from(enc.encode_ordinary(c.text));
        if (!eq(ids, ordinary)) fail(`${c.name}: encode(text, [], []) != encode_ordinary(text)`);
        const idsSpecial = Array.from(enc.encode(c.text, [EOT]));

        for (const [label, v] of [['ids', ids], ['ids_special', idsSpecial]]) {
            const back = Buffer.from(enc.decode(Uint32Array.from(v)));
            if (!back.equals(bytes)) fail(`${c.name}: decoding ${label} does not give back the text`);
        }
        if (decoder.decode(bytes) !== c.text) fail(`${c.name}: text is not valid UTF-8`);
        if (!c.text.includes(EOT) && !eq(ids, idsSpecial)) fail(`${c.name}: ids_special differ without ${EOT}`);
        if (c.text.includes(EOT) && !idsSpecial.includes(50256)) fail(`${c.name}: ${EOT} not encoded as 50256`);
        if (ids.includes(50256)) fail(`${c.name}: 50256 in ids with specials disallowed`);

        // Self-check of the JavaScript copy of tiktoken's pre-tokenizer used in the diagnosis.
        const viaPieces = split(PAT_TIKTOKEN_IN_JS, c.text).flatMap((p) => Array.from(enc.encode_ordinary(p)));
        if (!eq(viaPieces, ids)) fail(`${c.name}: White_Space-correct JS regex does not reproduce tiktoken's split`);

        let g3;
        try {
            g3 = gpt3.encode(c.text);
        } catch (e) {
            g3 = null;
        }
        const agrees = g3 !== null && eq(g3, ids);
        out.push({ name: c.name, text: c.text, ids, ids_special: idsSpecial, gpt3_encoder_agrees: agrees });
        if (!agrees) {
            let first = 0;
            if (g3) while (first < ids.length && first < g3.length && ids[first] === g3[first]) first++;
            disagreements.push({
                name: c.name,
                nTik: ids.length,
                nG3: g3 ? g3.length : null,
                first,
                tikAt: ids.slice(first, first + 4),
                g3At: g3 ? g3.slice(first, first + 4) : null,
                why: g3 ? diagnose(enc, c.text, ids, g3) : ['gpt-3-encoder threw'],
            });
        }
    }

    // cases.json: one case a line, so diffs stay readable.
    const json = '[\n' + out.map((o) => JSON.stringify(o)).join(',\n') + '\n]\n';
    fs.writeFileSync(path.join(FIX, 'cases.json'), json);

    // Expected totals for the benchmark inputs (too big for cases.json).
    const bench = BENCH_INPUTS.map((rel) => {
        const buf = fs.readFileSync(path.join(ROOT, rel));
        const ids = enc.encode_ordinary(buf.toString('utf8'));
        let sum = 0;
        for (const x of ids) sum += x;
        return { file: rel, bytes: buf.length, tokens: ids.length, ids_sum: sum };
    });
    fs.writeFileSync(path.join(FIX, 'bench_expected.json'),
        '[\n' + bench.map((b) => JSON.stringify(b)).join(',\n') + '\n]\n');

    fs.writeFileSync(path.join(FIX, 'DISAGREEMENTS.md'), disagreementsMd(out.length, disagreements));
    enc.free();

    const size = Buffer.byteLength(json);
    console.log(`make_fixtures: ${out.length} cases (${out.length - EDGE.length} corpus files, ${EDGE.length} edge strings), ` +
        `cases.json ${size} bytes, gpt-3-encoder disagrees on ${disagreements.length}`);
    for (const b of bench) console.log(`make_fixtures: ${b.file}: ${b.bytes} bytes, ${b.tokens} tokens`);
    if (size >= 2e6) fail('cases.json is over 2 MB');
}

function disagreementsMd(nCases, ds) {
    const L = [];
    L.push('# gpt-3-encoder vs tiktoken on the tokenizer fixtures');
    L.push('');
    L.push('Generated by `tools/tokenizer-ref/make_fixtures.js`; do not edit by hand.');
    L.push('');
    L.push('**tiktoken (encoding `gpt2`) is the reference.** gpt-3-encoder is a JavaScript port of OpenAI\'s');
    L.push('original `encoder.py`, used only as a cross-check; both use the same vocabulary (byte-identical to');
    L.push('`data/gpt2/encoder.json` and `data/gpt2/vocab.bpe`). Where they differ, gptc must match tiktoken.');
    L.push('');
    L.push(`${ds.length} of ${nCases} cases differ.`);
    L.push('');
    L.push('## Known cause: what `\\s` means');
    L.push('');
    L.push('Both use the GPT-2 pre-tokenizer regex');
    L.push('`\'s|\'t|\'re|\'ve|\'m|\'ll|\'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, but `\\s` is not');
    L.push('the same set of characters:');
    L.push('');
    L.push('- tiktoken (Rust `fancy-regex`): `\\s` is the Unicode `White_Space` property: U+0009–U+000D, U+0020,');
    L.push('  **U+0085**, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.');
    L.push('- JavaScript: `\\s` is WhiteSpace + LineTerminator: the same set **without U+0085 (NEL)** and');
    L.push('  **with U+FEFF (BOM / zero width no-break space)**.');
    L.push('');
    L.push('So around U+0085 and U+FEFF the two split the text into different pieces and the ids differ.');
    L.push('U+180E and U+200B are whitespace for neither (U+180E left `White_Space` in Unicode 6.3), and');
    L.push('U+001C–U+001F are whitespace for neither (only Python\'s `str.isspace` says they are).');
    L.push('');
    L.push('## Note for the C tokenizer (PCRE2)');
    L.push('');
    L.push('PCRE2\'s `\\s` is not `White_Space` either. With `PCRE2_UTF|PCRE2_UCP` (checked on PCRE2 10.42)');
    L.push('`\\s` is `\\h`, `\\v` or category Z: it does contain U+0085 and does not contain U+FEFF or U+200B,');
    L.push('but it **does contain U+180E** (PCRE2 still lists the Mongolian vowel separator in `\\h`), which');
    L.push('tiktoken does not treat as whitespace. Spell the class out instead of `\\s`:');
    L.push('`[\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]`.');
    L.push('The cases `edge/a_space_mongolian_vs_b`, `edge/space_mongolian_vs_bang` and');
    L.push('`corpus/unicode_spaces.txt` catch the difference (gpt-3-encoder agrees with tiktoken there).');
    L.push('');
    L.push('## Cases');
    L.push('');
    if (!ds.length) L.push('None.');
    for (const d of ds) {
        L.push(`### \`${d.name}\``);
        L.push('');
        L.push(`- tokens: tiktoken ${d.nTik}, gpt-3-encoder ${d.nG3 === null ? 'threw' : d.nG3}; first difference at token ${d.first}: ` +
            `tiktoken [${d.tikAt.join(', ')}] vs gpt-3-encoder [${d.g3At ? d.g3At.map(String).join(', ') : ''}]`);
        for (const w of d.why) L.push(`- ${w}`);
        L.push('');
    }
    return L.join('\n');
}

main();
