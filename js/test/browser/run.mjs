#!/usr/bin/env node
// The stores in tests/fixtures/v3 (and, with LOADERX_EXPORT_STORES=<dir>, the stores the Python
// tests exported there) must read in headless Chromium exactly as they read in Node.
//
//   node js/test/browser/run.mjs            (from the repo root; or `npm run test:browser` in js/)
//
// Node describes each store with js/src/node.js (describe.mjs: per-record sha256 of gatherBytes,
// per-record sha256 of the typed values from gather, shapes, array type, schema, header, lengths,
// get, stats, verify). Chromium describes it with js/src/browser.js through:
//   plain     a page that is not cross-origin isolated, Store.open(src): the plain build here
//   threaded  a cross-origin-isolated page, Store.open(src, {worker: true, threads: true}); the
//             page must be isolated and every store must report threaded === true
// each over HTTP (Range requests) and from in-memory File objects; for the fixtures also the plain
// build on the isolated page's thread ({threads: false}, over HTTP) and, for six of them, in a
// worker ({worker: true, threads: false}). Every description must equal Node's. Then, with both builds: a store with a
// bad meta.zr magic rejects with LOADERX_NOT_A_STORE, one with a truncated chunk opens and its
// reads reject with LOADERX_CORRUPT (verify lists them), and a good store still reads right after;
// a server without Range support gives LOADERX_NO_RANGE.
//
// Env: LOADERX_EXPORT_STORES=<dir> adds the exported stores; LOADERX_BROWSER_THREADED_MAX=<n>
// reads at most n of them (evenly spread) with the threaded build (default 16; 0 = all), since
// each threaded open starts a worker and a thread pool; LOADERX_BROWSER_LOG=1 echoes the pages.
// Exit code 0 when everything matched, 1 otherwise.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store } from '../../src/node.js';
import { serve } from '../../scripts/serve.mjs';
import { launch, openPage } from './chromium.mjs';
import { describeStore, firstDifference, stable } from './describe.mjs';

if (process.env.NODE_TEST_CONTEXT) {
  // `node --test test/` runs every .mjs under js/test/; this suite has its own entry point.
  console.log('# the browser suite runs with `npm run test:browser` (node test/browser/run.mjs), not under node --test');
  process.exit(0);
}

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const FIXTURES = resolve(process.env.LOADERX_FIXTURES || join(REPO, 'tests/fixtures/v3'));
const EXPORT = process.env.LOADERX_EXPORT_STORES ? resolve(process.env.LOADERX_EXPORT_STORES) : null;
const THREADED_MAX = Number(process.env.LOADERX_BROWSER_THREADED_MAX ?? 16);
/** Stores larger than this are read over HTTP only (the Files source holds every byte in memory). */
const FILES_MAX_BYTES = 64 << 20;
const WATCHDOG_MS = 170_000;

const t0 = Date.now();
const watchdog = setTimeout(() => {
  console.error(`browser test: no result after ${WATCHDOG_MS / 1000} s, giving up`);
  process.exit(1);
}, WATCHDOG_MS);
watchdog.unref();

// ------------------------------------------------------------------ the stores

function filesIn(dir, skip = []) {
  const names = readdirSync(dir).filter((f) => !skip.includes(f) && statSync(join(dir, f)).isFile()).sort();
  const total = names.reduce((n, f) => n + statSync(join(dir, f)).size, 0);
  return total > FILES_MAX_BYTES ? null : names;
}

const stores = [];
const manifest = JSON.parse(readFileSync(join(FIXTURES, 'manifest.json'), 'utf8'));
for (const e of manifest.stores) {
  const dir = join(FIXTURES, e.store);
  stores.push({ id: `fixtures/${e.name}`, group: 'fixtures', dir, path: `/fixtures/${e.store}/`, files: filesIn(dir) });
}
if (EXPORT) {
  if (!existsSync(EXPORT)) throw new Error(`LOADERX_EXPORT_STORES=${EXPORT} does not exist`);
  for (const t of readdirSync(EXPORT).sort()) {
    if (!statSync(join(EXPORT, t)).isDirectory()) continue;
    for (const n of readdirSync(join(EXPORT, t)).sort((a, b) => Number(a) - Number(b))) {
      const dir = join(EXPORT, t, n);
      if (!existsSync(join(dir, 'expected.json'))) continue;
      stores.push({ id: `export/${t}/${n}`, group: 'export', dir, path: `/export/${t}/${n}/`, files: filesIn(dir, ['expected.json']) });
    }
  }
}
const fixtures = stores.filter((s) => s.group === 'fixtures');
const exported = stores.filter((s) => s.group === 'export');
const every = (list, max) => (max <= 0 || list.length <= max ? list : Array.from({ length: max }, (_, k) => list[Math.floor((k * list.length) / max)]));
const threadedStores = [...fixtures, ...every(exported, THREADED_MAX)];
/** The plain build in a worker costs a worker start per store: a spread of fixtures is enough. */
const workerFixtures = every(fixtures, 6);

// The broken copies.
const badDir = mkdtempSync(join(tmpdir(), 'loaderx-bad-'));
const GOOD = 'u8img_zstd';
const goodDir = join(FIXTURES, GOOD, 'store');
cpSync(goodDir, join(badDir, 'magic'), { recursive: true });
cpSync(goodDir, join(badDir, 'trunc'), { recursive: true });
{
  const meta = join(badDir, 'magic', 'meta.zr');
  const bytes = readFileSync(meta);
  bytes.set([0x4e, 0x4f, 0x50, 0x45], 0); // "NOPE" for "ZREC"
  writeFileSync(meta, bytes);
  const chunk = join(badDir, 'trunc', '0.zr');
  truncateSync(chunk, Math.floor(statSync(chunk).size / 2));
}
const truncFiles = readdirSync(join(badDir, 'trunc')).sort();

// ------------------------------------------------------------------ Node's view
// (computed while Chromium works; node:crypto hashes, the same SHA-256 as crypto.subtle)

const nodeHashes = async (list) => list.map((b) => createHash('sha256').update(b).digest('hex'));
const node = {};
let tNode = 0;
const nodeDone = (async () => {
  for (const s of stores) node[s.id] = await describeStore(() => Store.open(s.dir), { hashes: nodeHashes });
  tNode = Date.now();
})();
let nodeGood;
const nodeRecords = (list) => list.reduce((n, s) => n + (node[s.id]?.length ?? 0), 0);

// ------------------------------------------------------------------ Chromium's view

const mounts = { '/fixtures/': FIXTURES, '/bad/': badDir, ...(EXPORT ? { '/export/': EXPORT } : {}) };
const servers = {
  plain: await serve({ root: REPO, mounts, isolate: false }),
  plain2: await serve({ root: REPO, mounts, isolate: false }),
  isolated: await serve({ root: REPO, mounts, isolate: true }),
  noRange: await serve({ root: REPO, mounts, isolate: true, range: false }),
};
const browser = await launch();
const failures = [];
const summary = [];
const fail = (msg) => failures.push(msg);

async function inPage(server, fn, args) {
  const page = await openPage(browser.ctx, `${server.url}js/test/browser/index.html`);
  try {
    // The module's URL on the test server goes in as an argument (the function runs in the page).
    return await page.evaluate(async ([url, name, a]) => (await import(url))[name](a), ['/js/test/browser/page.mjs', fn, args]);
  } finally {
    const errors = page.problems.filter((p) => !p.includes('Failed to load resource'));
    if (errors.length) fail(`${fn} page: ${errors.join('; ')}`);
    await page.close();
  }
}

const forPage = (server, list) => list.map((s) => ({ id: s.id, url: `${server.url}${s.path.slice(1)}`, files: s.files }));

/** Compares a page's descriptions with Node's and records the outcome under `label`. */
function judge(label, run, sources, list) {
  let ok = 0;
  let records = 0;
  let compared = 0;
  for (const s of list) {
    for (const src of sources) {
      const got = run.results[s.id]?.[src];
      if ((src === 'files' || src === 'dir') && !s.files) continue;
      compared += 1;
      const d = firstDifference(got, node[s.id]);
      if (d) fail(`${label} ${src} ${s.id}: ${d}`);
      else { ok += 1; records += node[s.id].length ?? 0; }
    }
  }
  summary.push(`${ok === compared ? 'ok  ' : 'FAIL'} ${label.padEnd(34)} ${ok}/${compared} store reads match Node (${records} records) in ${(run.ms / 1000).toFixed(1)} s`);
}

function judgeErrors(label, e) {
  const want = (what, got, exp) => { if (stable(got) !== stable(exp)) fail(`${label}: ${what} gave ${stable(got)}, expected ${stable(exp)}`); };
  want('bad magic over HTTP', e.magicHttp, 'LOADERX_NOT_A_STORE');
  want('bad magic from Files', e.magicFiles, 'LOADERX_NOT_A_STORE');
  for (const k of ['truncHttp', 'truncFiles']) {
    want(`truncated chunk (${k})`, e[k], {
      open: 'resolved', gather: 'LOADERX_CORRUPT', gatherBytes: 'LOADERX_CORRUPT', firstRecord: 'resolved',
      verify: { ok: false, codes: ['LOADERX_CORRUPT'], bad: nodeTrunc.verify.bad.length },
    });
  }
  const d = firstDifference(e.afterwards, nodeGood);
  if (d) fail(`${label}: the good store after the errors: ${d}`);
  summary.push(`${failures.some((f) => f.startsWith(label)) ? 'FAIL' : 'ok  '} ${label.padEnd(34)} bad magic, truncated chunk, then a good store`);
}

// Node on the truncated store, for the number of bad records verify must list.
const nodeTrunc = await describeStore(() => Store.open(join(badDir, 'trunc')), { hashes: nodeHashes });

// Calls in flight together: batches that jump around the good store, and on the truncated one
// batches with and without its bad records, so failing calls sit between good ones.
// (Even batches stay in the first 80 records, which the truncated chunk still holds.)
const IN_FLIGHT = Array.from({ length: 9 }, (_, b) => Array.from({ length: 23 }, (_, k) => (b % 2 ? b * 53 + k * 17 : b * 7 + k * 3) % (b % 2 ? 200 : 80)));
/** Node's answer for each batch, one call at a time: sha256 hex per record, or the error code. */
async function nodeBatches(dir) {
  const store = await Store.open(dir);
  try {
    const out = [];
    for (const b of IN_FLIGHT) out.push(await store.gatherBytes(b).then(nodeHashes, (e) => e.code));
    return out;
  } finally {
    await store.close();
  }
}
const nodeInFlight = { good: await nodeBatches(goodDir), trunc: await nodeBatches(join(badDir, 'trunc')) };
if (!nodeInFlight.trunc.some((r) => typeof r === 'string') || !nodeInFlight.trunc.some((r) => typeof r !== 'string')) {
  fail('the in-flight batches on the truncated store should mix failing and good calls');
}

function judgeInFlight(label, got, threaded) {
  const before = failures.length;
  for (const which of ['good', 'trunc']) {
    const g = got[which];
    if (g.threaded !== threaded) fail(`${label} ${which}: threaded is ${g.threaded}, expected ${threaded}`);
    const d = firstDifference(g.out, nodeInFlight[which]);
    if (d) fail(`${label} ${which}: ${d}`);
    const bad = g.late.filter((x) => x !== 'resolved' && x !== 'LOADERX_CLOSED' && !nodeInFlight[which].includes(x));
    if (bad.length) fail(`${label} ${which}: calls in flight at close settled as ${stable(bad)}`);
  }
  summary.push(`${failures.length === before ? 'ok  ' : 'FAIL'} ${label.padEnd(34)} ${IN_FLIGHT.length} calls at once on a good and a truncated store, as one at a time in Node`);
}

let env = {};
try {
  const { plain, plain2, isolated, noRange } = servers;
  const errArgs = (server, opts) => ({
    magicUrl: `${server.url}bad/magic/`, truncUrl: `${server.url}bad/trunc/`, truncFiles,
    goodUrl: `${server.url}fixtures/${GOOD}/store/`, opts,
  });
  const threadedOpts = { worker: true, threads: true };
  const [pPlain, pThreaded, pExtra] = await Promise.all([
    // The plain build's share, over two pages on two origins (Chromium allows six connections
    // per origin; each read mostly waits on one request at a time).
    (async () => {
      const [a, b] = await Promise.all([plain, plain2].map((server, k) => inPage(server, 'describeAll', {
        stores: forPage(server, stores.filter((_, i) => i % 2 === k)), sources: ['http', 'files'], threaded: false, concurrency: 8,
      })));
      return {
        all: { env: a.env, results: { ...a.results, ...b.results }, ms: Math.max(a.ms, b.ms), envs: [a.env, b.env] },
        errors: await inPage(plain, 'errorPaths', errArgs(plain, undefined)),
      };
    })(),
    (async () => ({
      all: await inPage(isolated, 'describeAll', { stores: forPage(isolated, threadedStores), sources: ['http', 'files'], opts: threadedOpts, threaded: true, concurrency: 8 }),
      errors: await inPage(isolated, 'errorPaths', errArgs(isolated, threadedOpts)),
    }))(),
    (async () => ({
      worker: await inPage(isolated, 'describeAll', { stores: forPage(isolated, workerFixtures), sources: ['http', 'files'], opts: { worker: true, threads: false }, threaded: false }),
      main: await inPage(isolated, 'describeAll', { stores: forPage(isolated, fixtures), sources: ['http'], opts: { threads: false }, threaded: false }),
      dirMain: await inPage(isolated, 'describeAll', { stores: forPage(isolated, fixtures), sources: ['dir'], opts: { threads: false }, threaded: false }),
      dirThreaded: await inPage(isolated, 'describeAll', { stores: forPage(isolated, fixtures), sources: ['dir'], opts: threadedOpts, threaded: true }),
      noRangeMain: await inPage(noRange, 'noRange', { url: `${noRange.url}fixtures/${GOOD}/store/`, opts: { threads: false } }),
      noRangeThreaded: await inPage(noRange, 'noRange', { url: `${noRange.url}fixtures/${GOOD}/store/`, opts: threadedOpts }),
      inFlight: await Promise.all([{ worker: true, threads: false }, threadedOpts].map(async (opts) => ({
        good: await inPage(isolated, 'inFlight', { url: `${isolated.url}fixtures/${GOOD}/store/`, opts, batches: IN_FLIGHT }),
        trunc: await inPage(isolated, 'inFlight', { url: `${isolated.url}bad/trunc/`, opts, batches: IN_FLIGHT }),
      }))),
    }))(),
  ]);
  await nodeDone;
  nodeGood = node[`fixtures/${GOOD}`];
  env = pThreaded.all.env;
  if (pPlain.all.envs.some((e) => e.crossOriginIsolated !== false)) fail('a plain page is cross-origin isolated');
  if (pThreaded.all.env.crossOriginIsolated !== true) fail(`the threaded page is not cross-origin isolated (${pThreaded.all.env.crossOriginIsolated})`);
  judge('plain build, page thread', pPlain.all, ['http', 'files'], stores);
  judge('threaded build, worker', pThreaded.all, ['http', 'files'], threadedStores);
  judge('plain build in a worker (6 fixt.)', pExtra.worker, ['http', 'files'], workerFixtures);
  judge('plain build, isolated page (fixt.)', pExtra.main, ['http'], fixtures);
  judge('directory handle, plain (fixt.)', pExtra.dirMain, ['dir'], fixtures);
  judge('directory handle, threaded (fixt.)', pExtra.dirThreaded, ['dir'], fixtures);
  judgeInFlight('calls in flight, plain worker', pExtra.inFlight[0], false);
  judgeInFlight('calls in flight, threaded worker', pExtra.inFlight[1], true);
  judgeErrors('errors, plain build', pPlain.errors);
  judgeErrors('errors, threaded build', pThreaded.errors);
  for (const [label, got] of [['no Range, plain build', pExtra.noRangeMain], ['no Range, threaded build', pExtra.noRangeThreaded]]) {
    if (got !== 'LOADERX_NO_RANGE') fail(`${label}: gave ${got}, expected LOADERX_NO_RANGE`);
    summary.push(`${got === 'LOADERX_NO_RANGE' ? 'ok  ' : 'FAIL'} ${label.padEnd(34)} ${got}`);
  }
} catch (e) {
  fail(`the browser run failed: ${e.stack || e}`);
} finally {
  await browser.close();
  await Promise.all(Object.values(servers).map((s) => s.close()));
  rmSync(badDir, { recursive: true, force: true });
}

// ------------------------------------------------------------------ report

await nodeDone.catch((e) => fail(`Node's reading failed: ${e.stack || e}`));
const unreadable = stores.filter((s) => !node[s.id]?.ok).length;
console.log(`browser test (${env.chrome ?? 'chromium'}, ${env.hardwareConcurrency ?? '?'} cores): ` +
  `${fixtures.length} fixtures (${nodeRecords(fixtures)} records)` +
  (EXPORT ? `, ${exported.length} exported stores (${nodeRecords(exported)} records; ${threadedStores.length - fixtures.length} of them threaded)` : ', no LOADERX_EXPORT_STORES') +
  `; ${unreadable} stores with error results (compared as error codes); Node done after ${((tNode - t0) / 1000).toFixed(1)} s`);
for (const line of summary) console.log(`  ${line}`);
for (const f of failures.slice(0, 40)) console.log(`  x ${f}`);
if (failures.length > 40) console.log(`  ... ${failures.length - 40} more failures`);
console.log(`${failures.length ? 'FAILED' : 'passed'} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failures.length ? 1 : 0);
