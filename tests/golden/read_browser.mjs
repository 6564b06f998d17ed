#!/usr/bin/env node
// Reads the golden set in headless Chromium and writes what each variant saw as JSON
// (`{"readers": [...]}`, one reader per variant) for compare.py:
//
//   node tests/golden/read_browser.mjs GOLDEN_DIR [OUT.json]      (default: stdout)
//
// Variants: {plain, threaded} build x {http (Range requests), files (in-memory File objects)}.
// plain: a page that is not cross-origin isolated, `Store.open(src)` (the wasm build on the
// page's thread). threaded: a cross-origin-isolated page, `Store.open(src, {worker: true,
// threads: true})`; the page must report crossOriginIsolated and every store `threaded === true`.
// The golden directory is mounted at /golden/ of a server rooted at the repository.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../../js/scripts/serve.mjs';
import { launch, openPage } from '../../js/test/browser/chromium.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const [dir, outPath] = process.argv.slice(2);
if (!dir) {
  console.error('usage: read_browser.mjs GOLDEN_DIR [OUT.json]');
  process.exit(2);
}
JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));

/** Stores read at once per page. */
const CONCURRENCY = { plain: 6, threaded: Number(process.env.LOADERX_BROWSER_CONCURRENCY || 6) };

const t0 = Date.now();
const servers = {
  plain: await serve({ root: ROOT, mounts: { '/golden/': resolve(dir) }, isolate: false }),
  threaded: await serve({ root: ROOT, mounts: { '/golden/': resolve(dir) }, isolate: true }),
};
const browser = await launch();
const readers = [];
let failed = false;
try {
  // Both pages at once: the threaded one mostly waits for workers and thread pools to start.
  const runs = await Promise.all(['plain', 'threaded'].map(async (build) => {
    const page = await openPage(browser.ctx, `${servers[build].url}js/test/browser/index.html`);
    const r = await page.evaluate(async (args) => {
      const m = await import('/tests/golden/browser_page.mjs');
      return m.run(args);
    }, { base: `${servers[build].url}golden/`, threaded: build === 'threaded', concurrency: CONCURRENCY[build] });
    return { build, page, r };
  }));
  for (const { build, page, r } of runs) {
    const isolated = r.env.crossOriginIsolated === true;
    if (isolated !== (build === 'threaded')) {
      console.error(`${build} page: crossOriginIsolated is ${r.env.crossOriginIsolated}`);
      failed = true;
    }
    for (const how of ['http', 'files']) {
      readers.push({
        reader: `browser-${build}-${how}`,
        note: `isolated=${r.env.crossOriginIsolated} cores=${r.env.hardwareConcurrency}`,
        stores: r[how],
        sampler: r.sampler,
      });
    }
    const errors = page.problems.filter((p) => !p.includes('Failed to load resource'));
    if (errors.length) {
      console.error(`${build} page reported:\n  ${errors.join('\n  ')}`);
      failed = true;
    }
    console.error(`browser ${build}: ${Object.keys(r.http).length} stores x 2 sources in ${r.ms} ms (${r.env.userAgent.match(/Chrome\/[\d.]+/)?.[0]})`);
    await page.close();
  }
} finally {
  await browser.close();
  await Promise.all(Object.values(servers).map((s) => s.close()));
}
const text = JSON.stringify({ readers });
if (outPath) writeFileSync(outPath, `${text}\n`);
else console.log(text);
console.error(`browser readers done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
