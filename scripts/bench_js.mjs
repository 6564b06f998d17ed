#!/usr/bin/env node
// Gather throughput of the wasm reader in Node and in headless Chromium (threaded and plain
// builds), beside native Rust on one thread, on the same store in one run.
//
// The store: 12 KiB records of mildly compressible bytes, zstd. Each round gathers the same
// batches of 256 sorted random indices. Node reads through files (NodeSource) and from memory;
// Chromium reads from memory in a worker (threaded pool on a cross-origin-isolated page, or the
// plain build). Prints MiB/s (median of rounds) and the ratios the targets are stated in.
//
//   node scripts/bench_js.mjs [--quick] [--workdir artifacts/bench-js]
import { execFileSync } from 'node:child_process';
import { mkdirSync, existsSync, writeFileSync, readFileSync, openSync, readSync, closeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const work = path.resolve(args.includes('--workdir') ? args[args.indexOf('--workdir') + 1] : path.join(repo, 'artifacts/bench-js'));
const N = quick ? 2000 : 4000;
const REC = 12 * 1024;
const BATCH = 256;
const NBATCHES = quick ? 8 : 20;
const ROUNDS = quick ? 3 : 7;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (bytes, s) => bytes / s / (1 << 20);

mkdirSync(work, { recursive: true });
const store = path.join(work, `zstd_${N}x12k`);
const exe = (name) => execFileSync('cargo', ['run', '-q', '--release', '-j2', '-p', 'loaderx-native', '--example', 'bench_store', '--', ...name], { cwd: repo, encoding: 'utf8' });
if (!existsSync(path.join(store, 'meta.zr'))) exe(['make', store, String(N), String(REC)]);

// Seeded batches (xorshift), the same for every contender.
let s = 0x2545f4914f6cdd1dn;
const rand = () => { s ^= (s << 13n) & 0xffffffffffffffffn; s ^= s >> 7n; s ^= (s << 17n) & 0xffffffffffffffffn; return Number(s % BigInt(N)); };
const batches = Array.from({ length: NBATCHES }, () => {
  const set = new Set();
  while (set.size < BATCH) set.add(rand());
  return [...set].sort((a, b) => a - b);
});
const batchFile = path.join(work, 'batches.json');
writeFileSync(batchFile, JSON.stringify(batches));
const bytesPerRound = NBATCHES * BATCH * REC;

// Trimmed copies of the files (meta.zr and 0.zr are sparse at full size) for in-memory sources.
function trimmed() {
  const head = Buffer.alloc(16);
  const fd = openSync(path.join(store, 'meta.zr'), 'r');
  readSync(fd, head, 0, 16, 0);
  closeSync(fd);
  const length = head.readUInt32LE(12), tail = head.readUInt32LE(8);
  const part = (name, n) => {
    const buf = Buffer.alloc(n);
    const f = openSync(path.join(store, name), 'r');
    readSync(f, buf, 0, n, 0);
    closeSync(f);
    return new Uint8Array(buf.buffer, buf.byteOffset, n);
  };
  const files = { 'meta.zr': part('meta.zr', 16 + 16 * length), '0.zr': part('0.zr', tail) };
  if (existsSync(path.join(store, 'schema.msgpack'))) files['schema.msgpack'] = new Uint8Array(readFileSync(path.join(store, 'schema.msgpack')));
  return files;
}

/** MiB/s of gathering every batch, `depth` batches in flight (1: one call after another). */
async function timeStore(st, depth = 1) {
  const rates = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const t = performance.now();
    let moved = 0;
    const inFlight = [];
    for (const b of batches) {
      inFlight.push(st.gatherBytes(b));
      if (inFlight.length >= depth) for (const r of await inFlight.shift()) moved += r.byteLength;
    }
    for (const p of inFlight) for (const r of await p) moved += r.byteLength;
    if (moved !== bytesPerRound) throw new Error(`moved ${moved} bytes, expected ${bytesPerRound}`);
    if (round > 0) rates.push(mib(moved, (performance.now() - t) / 1000));
  }
  return median(rates);
}

const results = {};
console.log(`== wasm gather: ${BATCH} random 12 KiB zstd records per batch, ${NBATCHES} batches, store of ${N} ==`);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}`);

results.native_1thread = JSON.parse(exe(['gather', store, batchFile, String(ROUNDS)])).mib_s;

const { Store, MemorySource } = await import('../js/src/node.js');
const files = trimmed();
const trimDir = path.join(work, 'trimmed');
mkdirSync(trimDir, { recursive: true });
for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(trimDir, name), bytes);
{
  const st = await Store.open(store);
  results.node_files = await timeStore(st);
  results.node_files_pipelined = await timeStore(st, 2);
  await st.close();
  const mem = await Store.open(new MemorySource(files));
  results.node_memory = await timeStore(mem);
  await mem.close();
}

// Chromium: the same batches from memory, hosted in a worker.
const { chromium } = await import(path.join(repo, 'js/node_modules/playwright-core/index.mjs'));
const { serve } = await import('../js/scripts/serve.mjs');
const server = await serve({ root: repo, mounts: { '/bench-store/': work } });
const profile = await import('node:fs').then((fs) => fs.mkdtempSync(path.join(os.tmpdir(), 'chr-')));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.error('page error:', e.message));
  await page.goto(`${server.url}js/scripts/blank.html`);
  const isolated = await page.evaluate(() => crossOriginIsolated);
  if (!isolated) throw new Error('the bench page is not cross-origin isolated');
  const runIn = (threads, worker) => page.evaluate(async ({ names, batches, rounds, bytesPerRound, threads, worker }) => {
    const { Store } = await import('/js/src/browser.js');
    const mem = {};
    for (const n of names) mem[n] = new Uint8Array(await (await fetch(`/bench-store/trimmed/${n}`)).arrayBuffer());
    const st = await Store.open(mem, { worker, threads });
    const rates = [];
    for (let round = 0; round <= rounds; round++) {
      const t = performance.now();
      let moved = 0;
      for (const b of batches) for (const r of await st.gatherBytes(b)) moved += r.byteLength;
      if (moved !== bytesPerRound) throw new Error(`moved ${moved}`);
      if (round > 0) rates.push(moved / ((performance.now() - t) / 1000) / 1048576);
    }
    const threaded = st.threaded ?? false;
    await st.close();
    rates.sort((a, b) => a - b);
    return { rate: rates[Math.floor(rates.length / 2)], threaded, cores: navigator.hardwareConcurrency };
  }, { names: Object.keys(files), batches, rounds: ROUNDS, bytesPerRound, threads, worker });
  const plain = await runIn(false, true);
  const threaded = await runIn(true, true);
  if (!threaded.threaded) throw new Error('the threaded build did not start its pool');
  results.chromium_worker_plain = plain.rate;
  results.chromium_worker_threaded = threaded.rate;
  results.chromium_cores = threaded.cores;
} finally {
  await ctx.close();
  await server.close();
}

const rows = [
  ['native Rust, 1 thread (mmap)', results.native_1thread],
  ['Node, wasm, files', results.node_files],
  ['Node, wasm, files, 2 batches in flight', results.node_files_pipelined],
  ['Node, wasm, memory', results.node_memory],
  ['Chromium worker, plain wasm', results.chromium_worker_plain],
  [`Chromium worker, threaded wasm (${results.chromium_cores} threads)`, results.chromium_worker_threaded],
];
for (const [name, v] of rows) console.log(`${name.padEnd(48)} ${v.toFixed(0).padStart(6)} MiB/s  ${(v / results.native_1thread).toFixed(2)}x native`);
results.node_vs_native = results.node_files / results.native_1thread;
results.threaded_vs_plain = results.chromium_worker_threaded / results.chromium_worker_plain;
console.log(`targets: Node >= 0.33x native 1-thread: ${results.node_vs_native.toFixed(2)}x; threaded browser >= 1.5x plain: ${results.threaded_vs_plain.toFixed(2)}x`);
writeFileSync(path.join(work, 'result.json'), JSON.stringify(results, null, 2));
