#!/usr/bin/env node
// The wasm decode call alone (copy in, zstd decode, copy out), with each zstd decoder the wasm
// build can carry, side by side in one Node process, beside native Rust on one thread.
//
// Variants (each built into target/bench-codec/<name>, plain wasm, release), all C libzstd (the
// shipped decoder) with zstd-sys's build options varied:
//   c              zstd-sys defaults (what scripts/build_wasm.sh ships)
//   c-simd128      CFLAGS -msimd128
//   c-huf-x1       CFLAGS -DHUF_FORCE_DECOMPRESS_X1 (single-symbol Huffman decoder only)
// zstd has no switch for 64-bit bit containers on wasm32 (bitstream.h: BitContainerType is
// size_t). The pure-Rust ruzstd was measured here too (commit c5c1d7e has the variant): 139
// against libzstd's 377 MiB/s, so the build keeps libzstd.
// The store: 12 KiB records of mildly compressible bytes, zstd level 3 (bench_store make, as in
// scripts/bench_js.mjs). Each round decodes the same batches of 256 sorted random indices
// (planned and read into memory beforehand) with every variant in turn, so the variants share
// the machine's state; prints the median MiB/s of the rounds and the ratio to native Rust
// gathering the same batches on one thread (bench_store gather, decode included).
//
//   node scripts/bench_wasm_codec.mjs [--quick] [--rounds N] [--no-build] [--only a,b]
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { benchStore, repo, setup, trimmed } from './bench_store_js.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const quick = args.includes('--quick');
const N = quick ? 2000 : 4000;
const BATCH = 256;
const NBATCHES = quick ? 8 : 20;
const ROUNDS = Number(opt('--rounds', quick ? 5 : 11));
const work = path.join(repo, 'artifacts/bench-wasm-codec');

const VARIANTS = {
  c: { env: {} },
  'c-simd128': { env: { CFLAGS_wasm32_unknown_unknown: '-msimd128' } },
  'c-huf-x1': { env: { CFLAGS_wasm32_unknown_unknown: '-DHUF_FORCE_DECOMPRESS_X1' } },
};
const only = opt('--only', null)?.split(',') ?? Object.keys(VARIANTS);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const run = (cmd, argv, env = {}) => execFileSync('nice', ['-n', '10', cmd, ...argv], { cwd: repo, encoding: 'utf8', env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });

// Build every variant (incremental), each with its own target dir so flags never mix.
for (const name of only) {
  const v = VARIANTS[name];
  if (!v) throw new Error(`unknown variant ${name}`);
  const target = path.join(repo, 'target/bench-codec', name);
  const pkg = path.join(target, 'pkg');
  if (!args.includes('--no-build') || !existsSync(pkg)) {
    run('cargo', ['build', '-q', '-j1', '--release', '-p', 'loaderx-wasm', '--target', 'wasm32-unknown-unknown', '--target-dir', target], v.env);
    run('wasm-bindgen', ['--target', 'web', '--out-dir', pkg, path.join(target, 'wasm32-unknown-unknown/release/loaderx_wasm.wasm')]);
  }
}

// The store and the batches (the same xorshift batches as bench_js.mjs).
const { store, batches, batchFile, bytesPerRound } = setup(work, { n: N, count: NBATCHES, batch: BATCH, jobs: 1, nice: true });
const example = (argv) => benchStore(argv, { jobs: 1, nice: true });
const { 'meta.zr': meta, '0.zr': chunk, 'schema.msgpack': schema = null } = trimmed(store);
const length = (meta.byteLength - 16) / 16;

/** A variant's reader with every batch planned and its bytes read; `decodeAll()` decodes them. */
async function prepare(name) {
  const pkg = path.join(repo, 'target/bench-codec', name, 'pkg');
  const wasm = await import(path.join(pkg, 'loaderx_wasm.js'));
  wasm.initSync({ module: readFileSync(path.join(pkg, 'loaderx_wasm_bg.wasm')) });
  const reader = new wasm.Reader(meta.subarray(0, 16), meta.byteLength);
  if (schema) reader.setSchema(schema);
  reader.setChunkLens(Float64Array.from([chunk.byteLength]));
  const tr = reader.tableRangesSpan(0, length);
  for (let k = 0; k < tr.length; k += 2) reader.addTable(tr[k], meta.subarray(tr[k], tr[k + 1]));
  const jobs = batches.map((b) => {
    const plan = reader.plan(Float64Array.from(b), 0, false, false);
    const r = plan.ranges();
    const parts = [];
    for (let k = 0; k < r.length; k += 3) parts.push(chunk.subarray(r[k + 1], r[k + 2]));
    const data = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
    let at = 0;
    for (const p of parts) { data.set(p, at); at += p.byteLength; }
    return { plan, data, got: Float64Array.from(parts, (p) => p.byteLength) };
  });
  const decodeAll = () => {
    let moved = 0;
    for (const j of jobs) moved += reader.decode(j.plan, j.data, j.got).byteLength;
    if (moved !== bytesPerRound) throw new Error(`${name}: decoded ${moved} bytes, expected ${bytesPerRound}`);
  };
  // The variants must agree byte for byte.
  const digest = jobs.map((j) => reader.decode(j.plan, j.data, j.got));
  return { name, decodeAll, digest };
}

console.log(`== wasm decode call: ${NBATCHES} batches of ${BATCH} random 12 KiB zstd records (level 3), store of ${N}, ${ROUNDS} rounds after a warm-up ==`);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}`);
const native = JSON.parse(example(['gather', store, batchFile, String(ROUNDS)])).mib_s;

const contenders = [];
for (const name of only) contenders.push(await prepare(name));
for (const c of contenders.slice(1)) {
  c.digest.forEach((out, k) => {
    if (Buffer.compare(out, contenders[0].digest[k]) !== 0) throw new Error(`${c.name} and ${contenders[0].name} differ on batch ${k}`);
  });
}
const rates = Object.fromEntries(only.map((n) => [n, []]));
for (let round = 0; round <= ROUNDS; round++) {
  // Interleaved, in an order that rotates each round.
  for (let k = 0; k < contenders.length; k++) {
    const c = contenders[(k + round) % contenders.length];
    const t = performance.now();
    c.decodeAll();
    if (round > 0) rates[c.name].push(bytesPerRound / ((performance.now() - t) / 1000) / (1 << 20));
  }
}
console.log(`${'native Rust, 1 thread (gather, mmap)'.padEnd(40)} ${native.toFixed(0).padStart(6)} MiB/s  1.00x native`);
const result = { native_1thread: native, rounds: ROUNDS };
for (const name of only) {
  const m = median(rates[name]);
  result[name] = { mib_s: m, min: Math.min(...rates[name]), max: Math.max(...rates[name]) };
  console.log(`${`wasm decode, ${name}`.padEnd(40)} ${m.toFixed(0).padStart(6)} MiB/s  ${(m / native).toFixed(2)}x native  (rounds ${Math.min(...rates[name]).toFixed(0)}–${Math.max(...rates[name]).toFixed(0)})`);
}
writeFileSync(path.join(work, 'result.json'), JSON.stringify(result, null, 2));
