#!/usr/bin/env node
// bench_tiktoken.js FILE [REPEATS] — encoding speed of tiktoken's gpt2 encoding (Rust compiled to
// WASM, single-threaded) on FILE, for comparison with build/bench_tokenizer.
//
// Reads FILE as UTF-8, encodes it once to warm up, then REPEATS times (default 5), timing only the
// encode_ordinary call (no special tokens: "<|endoftext|>" is plain text). Prints exactly one line:
//   tiktoken: FILE: N bytes, M tokens, X MB/s (median of R runs, 1 thread)
// where N is FILE's size in bytes and MB = 1e6 bytes.
'use strict';

const fs = require('fs');
const { get_encoding } = require('tiktoken');

function usage(msg) {
    if (msg) console.error('bench_tiktoken: ' + msg);
    console.error('usage: node tools/tokenizer-ref/bench_tiktoken.js FILE [REPEATS]');
    process.exit(2);
}

const args = process.argv.slice(2);
if (args.length < 1 || args.length > 2) usage();
const file = args[0];
const repeats = args.length > 1 ? Number(args[1]) : 5;
if (!Number.isInteger(repeats) || repeats < 1) usage(`REPEATS must be a positive integer, got '${args[1]}'`);

let buf;
try {
    buf = fs.readFileSync(file);
} catch (e) {
    console.error(`bench_tiktoken: cannot read ${file}: ${e.message}`);
    process.exit(1);
}
const text = buf.toString('utf8');
const enc = get_encoding('gpt2');

let tokens = enc.encode_ordinary(text).length; // warm-up
const secs = [];
for (let i = 0; i < repeats; i++) {
    const t0 = process.hrtime.bigint();
    const ids = enc.encode_ordinary(text);
    const t1 = process.hrtime.bigint();
    secs.push(Number(t1 - t0) / 1e9);
    tokens = ids.length;
}
enc.free();

secs.sort((a, b) => a - b);
const mid = secs.length >> 1;
const median = secs.length % 2 ? secs[mid] : (secs[mid - 1] + secs[mid]) / 2;
const mbs = buf.length / 1e6 / median;
console.log(`tiktoken: ${file}: ${buf.length} bytes, ${tokens} tokens, ${mbs.toFixed(2)} MB/s (median of ${repeats} runs, 1 thread)`);
