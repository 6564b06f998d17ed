#!/usr/bin/env node
// Whole-store statistics speed, side by side in one run (docs/benchmarks.md "Statistics"):
// Store.profile in Node, in Chromium on the plain build and on the threaded build (the viewer's
// statistics panel, the store served over HTTP on 127.0.0.1), against a NumPy pass computing the
// same numbers (per channel finite count, min, max, mean, std in float64, NaN/Inf counts, a
// 20-bin histogram) over the array in memory, and over the store read by loaderx's Python.
//
//   node scripts/bench_profile.mjs [--mb 1024] [--rounds 2]
//
// The store (float32 records of 64 x 3 values, raw codec) is written once into
// artifacts/bench/profile_<mb>mb/ by the Python package. MB/s counts decoded bytes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PY = process.env.LOADERX_PYTHON || join(REPO, '.venv/bin/python');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const k = args.indexOf(name); return k >= 0 ? Number(args[k + 1]) : dflt; };
const MB = opt('--mb', 1024);
const ROUNDS = opt('--rounds', 2);
const DIR = join(REPO, 'artifacts/bench', `profile_${MB}mb`);
const STORE = join(DIR, 'store');

const { Store } = await import(join(REPO, 'js/src/node.js'));
const { startViewer } = await import(join(REPO, 'js/bin/loaderx-view.mjs'));
const { launch } = await import(join(REPO, 'js/test/browser/chromium.mjs'));

function python(code, ...argv) {
  const r = spawnSync(PY, ['-c', code, ...argv], { encoding: 'utf8', timeout: 1_800_000, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${PY} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

if (!existsSync(join(STORE, 'meta.zr'))) {
  mkdirSync(DIR, { recursive: true });
  console.log(`writing a ${MB} MB float32 store into ${STORE} ...`);
  python(`
import sys, json, numpy as np
from loaderx.converter import from_numpy
out, mb = sys.argv[1], int(sys.argv[2])
rows = mb * 2**20 // (64 * 3 * 4)
rng = np.random.default_rng(1)
step = 200_000
for start in range(0, rows, step):
    n = min(step, rows - start)
    a = (100 + 15 * rng.standard_normal((n, 64, 3))).astype(np.float32)
    from_numpy(out, a, codec="raw", progress=False)
print(json.dumps(rows))
`, STORE, String(MB));
}

const NUMPY = `
import sys, json, time, numpy as np
from loaderx.dataset import DenseDataset
t0 = time.perf_counter()
ds = DenseDataset(sys.argv[1])
a = ds[np.arange(len(ds))]
t1 = time.perf_counter()
out = []
for c in range(a.shape[-1]):
    v = a[..., c].ravel()
    nan = int(np.isnan(v).sum()); inf = int(np.isinf(v).sum())
    f = v[np.isfinite(v)].astype(np.float64)
    lo, hi = float(f.min()), float(f.max())
    out.append([f.size, lo, hi, float(f.mean()), float(f.std()), nan, inf, np.histogram(f, bins=20, range=(lo, hi))[0].tolist()])
t2 = time.perf_counter()
print(json.dumps({"read": t1 - t0, "compute": t2 - t1, "bytes": int(a.nbytes), "means": [o[3] for o in out]}))
`;

const rows = [];
const viewer = await startViewer({ port: 0, mounts: { '/bench/': STORE } });
const plain = await startViewer({ port: 0, mounts: { '/bench/': STORE }, isolate: false });
const browser = await launch();

async function chromium(server) {
  const page = await browser.ctx.newPage();
  try {
    // A fresh page per round; the cache is cleared so every round scans.
    await page.goto(`${server.url}viewer/?store=/bench/`);
    await page.evaluate(() => new Promise((r) => { const q = indexedDB.deleteDatabase('loaderx-viewer'); q.onsuccess = q.onerror = q.onblocked = () => r(null); }));
    await page.waitForSelector('[data-k="stats-state"]');
    await page.click('text=Compute statistics');
    await page.waitForFunction(() => /** @type {HTMLElement} */ (document.querySelector('[data-k="stats-state"]')).dataset.v === 'done', null, { timeout: 1_800_000 });
    const how = await page.$eval('[data-k="stats-how"]', (e) => e.dataset.v);
    const threaded = await page.$eval('[data-k="decoding"]', (e) => e.dataset.v);
    return { seconds: Number(/computed in ([\d.]+) s/.exec(how ?? '')?.[1]), threaded };
  } finally {
    await page.close();
  }
}

try {
  for (let round = 1; round <= ROUNDS; round++) {
    const store = await Store.open(STORE);
    const bytes = store.length * 64 * 3 * 4;
    const t0 = performance.now();
    const p = await store.profile();
    const node = (performance.now() - t0) / 1000;
    await store.close();
    const np = python(NUMPY, STORE);
    const threaded = await chromium(viewer);
    const flat = await chromium(plain);
    const mbs = (s) => (bytes / 2 ** 20 / s).toFixed(0);
    rows.push({ round, node: mbs(node), threaded: mbs(threaded.seconds), plain: mbs(flat.seconds), numpy: mbs(np.compute), numpyRead: mbs(np.read + np.compute), build: `${threaded.threaded}/${flat.threaded}` });
    const agree = p.channels.every((c, k) => Math.abs(c.mean - np.means[k]) <= 1e-9 * Math.abs(np.means[k]));
    console.log(`round ${round}: ${(bytes / 2 ** 20).toFixed(0)} MiB; Node ${node.toFixed(2)} s, Chromium threaded ${threaded.seconds} s, plain ${flat.seconds} s, NumPy compute ${np.compute.toFixed(2)} s (+ read ${np.read.toFixed(2)} s); means agree with NumPy: ${agree}`);
  }
} finally {
  await browser.close();
  await viewer.close();
  await plain.close();
}
console.log('\nMB/s (decoded bytes)  | Node | Chromium threaded | Chromium plain | NumPy (in memory) | NumPy (loaderx read + compute)');
for (const r of rows) console.log(`round ${r.round} | ${r.node} | ${r.threaded} | ${r.plain} | ${r.numpy} | ${r.numpyRead}   (builds: ${r.build})`);
