#!/usr/bin/env node
// Gather throughput of the wasm reader in Node and in headless Chromium (threaded and plain
// builds), beside native Rust on one thread, on the same store in one run.
//
// The store: 12 KiB records of mildly compressible bytes, zstd. Each round gathers the same
// batches of 256 sorted random indices. Node reads through files (NodeSource) and from memory;
// Chromium reads from memory in a worker (threaded pool on a cross-origin-isolated page, or the
// plain build), one call at a time and with two calls in flight (as `store.batches()` keeps
// them). Prints MiB/s (median of rounds, with the slowest and fastest round) and the ratios the
// targets are stated in.
//
//   node scripts/bench_js.mjs [--quick] [--workdir artifacts/bench-js]
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { benchStore, repo, setup, trimmed } from './bench_store_js.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const work = path.resolve(args.includes('--workdir') ? args[args.indexOf('--workdir') + 1] : path.join(repo, 'artifacts/bench-js'));
const N = quick ? 2000 : 4000;
const BATCH = 256;
const NBATCHES = quick ? 8 : 20;
const ROUNDS = quick ? 3 : 7;

/** `{rate, lo, hi}`: the median, slowest and fastest of per-round rates. */
const summary = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { rate: sorted[Math.floor(sorted.length / 2)], lo: sorted[0], hi: sorted[sorted.length - 1] };
};
const mib = (bytes, s) => bytes / s / (1 << 20);

const { store, batches, batchFile, bytesPerRound } = setup(work, { n: N, count: NBATCHES, batch: BATCH, jobs: 2 });
const exe = (argv) => benchStore(argv);

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
  return summary(rates);
}

const results = {};
console.log(`== wasm gather: ${BATCH} random 12 KiB zstd records per batch, ${NBATCHES} batches, store of ${N} ==`);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}`);

{
  const rate = JSON.parse(exe(['gather', store, batchFile, String(ROUNDS)])).mib_s;
  results.native_1thread = { rate, lo: rate, hi: rate };
}

const { Store, MemorySource } = await import('../js/src/node.js');
const files = trimmed(store);
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
  const runIn = (threads, worker, depth) => page.evaluate(async ({ names, batches, rounds, bytesPerRound, threads, worker, depth }) => {
    const { Store } = await import('/js/src/browser.js');
    const mem = {};
    for (const n of names) mem[n] = new Uint8Array(await (await fetch(`/bench-store/trimmed/${n}`)).arrayBuffer());
    const st = await Store.open(mem, { worker, threads });
    const rates = [];
    for (let round = 0; round <= rounds; round++) {
      const t = performance.now();
      let moved = 0;
      const inFlight = [];
      for (const b of batches) {
        inFlight.push(st.gatherBytes(b));
        if (inFlight.length >= depth) for (const r of await inFlight.shift()) moved += r.byteLength;
      }
      for (const p of inFlight) for (const r of await p) moved += r.byteLength;
      if (moved !== bytesPerRound) throw new Error(`moved ${moved}`);
      if (round > 0) rates.push(moved / ((performance.now() - t) / 1000) / 1048576);
    }
    const threaded = st.threaded ?? false;
    await st.close();
    return { rates, threaded, cores: navigator.hardwareConcurrency };
  }, { names: Object.keys(files), batches, rounds: ROUNDS, bytesPerRound, threads, worker, depth });
  for (const depth of [1, 2]) {
    const suffix = depth === 1 ? '' : '_pipelined';
    const plain = await runIn(false, true, depth);
    const threaded = await runIn(true, true, depth);
    if (!threaded.threaded) throw new Error('the threaded build did not start its pool');
    results[`chromium_worker_plain${suffix}`] = summary(plain.rates);
    results[`chromium_worker_threaded${suffix}`] = summary(threaded.rates);
    results.chromium_cores = threaded.cores;
  }
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
  ['Chromium worker, plain wasm, 2 in flight', results.chromium_worker_plain_pipelined],
  [`Chromium worker, threaded wasm, 2 in flight`, results.chromium_worker_threaded_pipelined],
];
const native = results.native_1thread.rate;
for (const [name, v] of rows) {
  const spread = `(rounds ${v.lo.toFixed(0)}-${v.hi.toFixed(0)})`;
  console.log(`${name.padEnd(48)} ${v.rate.toFixed(0).padStart(6)} MiB/s ${spread.padEnd(18)} ${(v.rate / native).toFixed(2)}x native`);
}
results.node_vs_native = results.node_files.rate / native;
results.chromium_plain_vs_node = results.chromium_worker_plain.rate / results.node_files.rate;
results.threaded_vs_plain = results.chromium_worker_threaded.rate / results.chromium_worker_plain.rate;
results.threaded_vs_plain_pipelined = results.chromium_worker_threaded_pipelined.rate / results.chromium_worker_plain_pipelined.rate;
console.log(`targets: Node files >= 0.5x native 1-thread: ${results.node_vs_native.toFixed(2)}x; `
  + `Chromium plain worker >= Node files: ${results.chromium_plain_vs_node.toFixed(2)}x; `
  + `threaded >= 1.5x plain: ${results.threaded_vs_plain.toFixed(2)}x (2 in flight: ${results.threaded_vs_plain_pipelined.toFixed(2)}x)`);
writeFileSync(path.join(work, 'result.json'), JSON.stringify(results, null, 2));
