#!/usr/bin/env node
// Gather throughput of the wasm reader in Node and in headless Chromium (threaded and plain
// builds), beside native Rust on one thread, on the same store in one run.
//
// The store: 12 KiB records of mildly compressible bytes, zstd. Each round gathers the same
// batches of 256 sorted random indices. Node reads through files (NodeSource) and from memory;
// Chromium reads from memory in a worker (threaded pool on a cross-origin-isolated page, or the
// plain build), one call at a time and with two calls in flight (as `store.batches()` keeps
// them). Node from files runs twice, with its calls shared with a worker thread (the default) and
// without (`workerMin: Infinity`), their rounds taking turns so both see the same machine. Prints
// MiB/s (median of rounds, with the slowest and fastest round), the ratios the targets are stated
// in, and how much CPU other processes took during the Node rows (Linux). `--node` skips Chromium.
//
//   node scripts/bench_js.mjs [--quick] [--node] [--workdir artifacts/bench-js]
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { gatherRound } from './bench_round.mjs';
import { benchStore, repo, setup, trimmed } from './bench_store_js.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const nodeOnly = args.includes('--node');
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

/** Seconds to gather every batch once, `depth` batches in flight (1: one call after another). */
async function timeRound(st, depth) {
  const { moved, seconds } = await gatherRound(st, batches, depth);
  if (moved !== bytesPerRound) throw new Error(`moved ${moved} bytes, expected ${bytesPerRound}`);
  return seconds;
}

/** MiB/s of each store in `stores`, their rounds taking turns (the first round of each is a
 *  warm-up), `depth` batches in flight. */
async function timeStores(stores, depth = 1) {
  const rates = stores.map(() => []);
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [k, st] of stores.entries()) {
      const s = await timeRound(st, depth);
      if (round > 0) rates[k].push(mib(bytesPerRound, s));
    }
  }
  return rates.map(summary);
}

const results = {};
console.log(`== wasm gather: ${BATCH} random 12 KiB zstd records per batch, ${NBATCHES} batches, store of ${N} ==`);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}`);

{
  const rate = JSON.parse(exe(['gather', store, batchFile, String(ROUNDS)])).mib_s;
  results.native_1thread = { rate, lo: rate, hi: rate };
}

const { Store, MemorySource, NodeSource } = await import('../js/src/node.js');
const files = trimmed(store);
const trimDir = path.join(work, 'trimmed');
mkdirSync(trimDir, { recursive: true });
for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(trimDir, name), bytes);
/** CPU ms the whole machine has spent busy (from /proc/stat; 0 where there is none). */
function machineBusy() {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const tick = 1000 / 100; // USER_HZ
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * tick;
  } catch {
    return 0;
  }
}
const busy0 = machineBusy();
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
{
  const shared = await Store.open(store);
  const aloneSource = new NodeSource(store);
  aloneSource.workerMin = Infinity;
  const alone = await Store.open(aloneSource);
  [results.node_files, results.node_files_no_worker] = await timeStores([shared, alone]);
  [results.node_files_pipelined, results.node_files_no_worker_pipelined] = await timeStores([shared, alone], 2);
  await shared.close();
  await alone.close();
  const mem = await Store.open(new MemorySource(files));
  [results.node_memory] = await timeStores([mem]);
  await mem.close();
}
{
  const cpu = process.cpuUsage(cpu0);
  const others = machineBusy() - busy0 - (cpu.user + cpu.system) / 1000;
  results.others_cores = Math.max(0, others / (performance.now() - wall0));
  console.log(`other processes meanwhile: ${results.others_cores.toFixed(2)} cores of ${os.cpus().length}`);
}
if (nodeOnly) {
  const native = results.native_1thread.rate;
  for (const [name, v] of [['native Rust, 1 thread (mmap)', results.native_1thread], ...nodeRows()]) {
    const spread = `(rounds ${v.lo.toFixed(0)}-${v.hi.toFixed(0)})`;
    console.log(`${name.padEnd(48)} ${v.rate.toFixed(0).padStart(6)} MiB/s ${spread.padEnd(18)} ${(v.rate / native).toFixed(2)}x native`);
  }
  console.log(`target: Node files >= 0.5x native 1-thread: ${(results.node_files.rate / native).toFixed(2)}x `
    + `(without the worker ${(results.node_files_no_worker.rate / native).toFixed(2)}x)`);
  writeFileSync(path.join(work, 'result-node.json'), JSON.stringify(results, null, 2));
  process.exit(0);
}

/** The Node rows of the table. */
function nodeRows() {
  return [
    ['Node, wasm, files', results.node_files],
    ['Node, wasm, files, no worker', results.node_files_no_worker],
    ['Node, wasm, files, 2 batches in flight', results.node_files_pipelined],
    ['Node, wasm, files, no worker, 2 in flight', results.node_files_no_worker_pipelined],
    ['Node, wasm, memory', results.node_memory],
  ];
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
    const { gatherRound } = await import('/scripts/bench_round.mjs');
    const mem = {};
    for (const n of names) mem[n] = new Uint8Array(await (await fetch(`/bench-store/trimmed/${n}`)).arrayBuffer());
    const st = await Store.open(mem, { worker, threads });
    const rates = [];
    for (let round = 0; round <= rounds; round++) {
      const { moved, seconds } = await gatherRound(st, batches, depth);
      if (moved !== bytesPerRound) throw new Error(`moved ${moved}`);
      if (round > 0) rates.push(moved / seconds / 1048576);
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
  ...nodeRows(),
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
