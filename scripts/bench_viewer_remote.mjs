#!/usr/bin/env node
// The viewer over a slow link (docs/benchmarks.md "Viewer over HTTP"): a 10 GiB store (874,000
// records of 64x64x3 uint8, raw) served on 127.0.0.1 behind scripts/http_proxy.py adding 20 ms to
// every request, opened in headless Chromium by its URL. Measured in the page, from submitting
// the URL to the first page of tiles drawn: cold (the first store of the page, opened 1 s after
// the page loaded: the page starts its worker and wasm build at load) and warm (the store opened
// again in the same page). Target: at most 300 ms.
//
//   node scripts/bench_viewer_remote.mjs [--gib 10] [--delay-ms 20] [--rounds 3]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PY = process.env.LOADERX_PYTHON || join(REPO, '.venv/bin/python');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const k = args.indexOf(name); return k >= 0 ? Number(args[k + 1]) : dflt; };
const GIB = opt('--gib', 10);
const DELAY = opt('--delay-ms', 20);
const ROUNDS = opt('--rounds', 3);
const STORE = join(REPO, 'artifacts/bench', `remote_${GIB}gib`, 'store');

const { startViewer } = await import(join(REPO, 'js/bin/loaderx-view.mjs'));
const { launch } = await import(join(REPO, 'js/test/browser/chromium.mjs'));

if (!existsSync(join(STORE, 'meta.zr'))) {
  mkdirSync(dirname(STORE), { recursive: true });
  console.log(`writing a ${GIB} GiB store into ${STORE} ...`);
  const r = spawnSync(PY, ['-c', `
import sys, numpy as np
from loaderx.converter import from_numpy
out, gib = sys.argv[1], float(sys.argv[2])
n = int(gib * 2**30 // (64 * 64 * 3))
rng = np.random.default_rng(0)
block = rng.integers(0, 256, (20_000, 64, 64, 3), dtype=np.uint8)
for start in range(0, n, 20_000):
    k = min(20_000, n - start)
    from_numpy(out, block[:k], codec="raw", progress=False)
print(n)
`, STORE, String(GIB)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 3_600_000 });
  if (r.status !== 0) throw new Error('writing the store failed');
}

const viewer = await startViewer({ port: 0, mounts: { '/big/': STORE } });
const proxy = spawn(PY, [join(REPO, 'scripts/http_proxy.py'), viewer.url.replace(/\/$/, ''), String(DELAY / 1000)], { stdio: ['pipe', 'pipe', 'inherit'] });
const proxyUrl = await new Promise((res) => createInterface({ input: proxy.stdout }).once('line', (l) => res(l.trim())));
const browser = await launch();
const rows = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const page = await browser.ctx.newPage();
    await page.goto(`${proxyUrl}/viewer/`);
    await page.waitForSelector('#url-input');
    // A person takes a moment to paste a URL; the page starts its worker meanwhile.
    await page.waitForTimeout(1000);
    const open = async () => page.evaluate(async (url) => {
      const grid = /** @type {HTMLElement} */ (document.querySelector('#grid'));
      delete grid.dataset.key;
      const input = /** @type {HTMLInputElement} */ (document.querySelector('#url-input'));
      input.value = url;
      const t0 = performance.now();
      /** @type {HTMLFormElement} */ (document.querySelector('#url-form')).requestSubmit();
      await new Promise((resolve) => {
        const check = () => (grid.dataset.key && !grid.hasAttribute('aria-busy') && grid.querySelector('.tile canvas') ? resolve(null) : requestAnimationFrame(check));
        check();
      });
      return { ms: performance.now() - t0, tiles: grid.querySelectorAll('.tile').length, records: document.querySelector('[data-k="records"]')?.getAttribute('data-v') };
    }, `${proxyUrl}/big/`);
    const cold = await open();
    const warm = await open();
    rows.push({ round, cold: cold.ms, warm: warm.ms, tiles: cold.tiles, records: cold.records });
    console.log(`round ${round}: ${cold.records} records; first page ${cold.ms.toFixed(0)} ms cold, ${warm.ms.toFixed(0)} ms warm (${cold.tiles} tiles)`);
    await page.close();
  }
} finally {
  await browser.close();
  proxy.stdin.end();
  await viewer.close();
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`\n${GIB} GiB store, ${DELAY} ms added per request: first page median ${med(rows.map((r) => r.cold)).toFixed(0)} ms cold, ${med(rows.map((r) => r.warm)).toFixed(0)} ms warm (target 300 ms)`);
