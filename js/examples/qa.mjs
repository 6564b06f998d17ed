#!/usr/bin/env node
// Quality check of a loaderx store from Node: schema, stats, a record-length histogram, and a
// full verify; for a store of encoded images (its schema's `media`, or --images) also the formats,
// the picture sizes and every record that does not decode, by the engine's decoders compiled to
// wasm. Exit code 0: healthy; 1: bad records or undecodable images; 2: the store cannot be
// opened or bad usage.
//
//   node examples/qa.mjs STORE [--json] [--bins N] [--images] [--max-pixels N]
//   (also: npx loaderx-qa STORE)
import { Store, imageProblem, imageHeader } from '../src/node.js';
import { redactUrl } from '../src/redact.js';

const USAGE = 'usage: loaderx-qa STORE [--json] [--bins N] [--images] [--max-pixels N]\n  STORE is a store directory or an http(s) URL';

/** @param {string[]} argv */
function parseArgs(argv) {
  /** @type {{json: boolean, bins: number, store: string | null, images: boolean, maxPixels: number | undefined}} */
  const opts = { json: false, bins: 10, store: null, images: false, maxPixels: undefined };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    if (a === '--json') opts.json = true;
    else if (a === '--bins') opts.bins = Number(argv[++k]);
    else if (a === '--images') opts.images = true;
    else if (a === '--max-pixels') opts.maxPixels = Number(argv[++k]);
    else if (a === '-h' || a === '--help') return null;
    else if (!opts.store && !a.startsWith('-')) opts.store = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!opts.store || !Number.isInteger(opts.bins) || opts.bins < 1) throw new Error('a STORE and a positive --bins are needed');
  if (opts.maxPixels !== undefined && !(opts.maxPixels > 0)) throw new Error('--max-pixels must be a positive number');
  return { ...opts, store: opts.store };
}

/**
 * Linear histogram of `values` in `bins` bins over [min, max].
 * @param {number[]} values
 * @param {number} bins
 */
function histogram(values, bins) {
  if (!values.length) return { min: null, max: null, mean: null, bins: [] };
  let min = Infinity, max = -Infinity, sum = 0;
  for (const v of values) { min = Math.min(min, v); max = Math.max(max, v); sum += v; }
  const width = Math.max(1, Math.ceil((max - min + 1) / bins));
  const counts = new Array(Math.ceil((max - min + 1) / width)).fill(0);
  for (const v of values) counts[Math.floor((v - min) / width)]++;
  return { min, max, mean: sum / values.length, bins: counts.map((count, k) => ({ from: min + k * width, to: Math.min(max, min + (k + 1) * width - 1), count })) };
}

/**
 * Every record's length, in order. A part of the table that cannot be read ends the list there
 * (verify reports those records); the histogram covers what was read.
 * @param {import('../src/node.js').Store} store
 */
async function allLengths(store) {
  /** @type {number[]} */
  const out = [];
  try {
    for await (const lens of store.batches({ batchSize: 65536, read: 'lengths' })) out.push(...lens);
  } catch {
    // A corrupt table part shows up in verify.
  }
  return out;
}

/**
 * The image report of a store of encoded images: how many of each format, the range and a
 * histogram of picture sizes (width x height, display orientation), and every record that does
 * not decode, with why. Records the store cannot read are verify's to report.
 * @param {import('../src/node.js').Store} store
 * @param {{bins: number, maxPixels: number | undefined}} opts
 */
async function imageReport(store, opts) {
  /** @type {Record<string, number>} */
  const formats = {};
  /** @type {{index: number, message: string}[]} */
  const undecodable = [];
  const widths = [], heights = [];
  let at = 0;
  try {
    for await (const records of store.batches({ batchSize: 256, read: 'bytes' })) {
      for (const bytes of records) {
        const index = at++;
        const problem = imageProblem(bytes, { maxPixels: opts.maxPixels });
        if (problem !== undefined) { undecodable.push({ index, message: problem }); continue; }
        const h = imageHeader(bytes);
        formats[h.media] = (formats[h.media] ?? 0) + 1;
        widths.push(h.width);
        heights.push(h.height);
      }
    }
  } catch {
    // A record the store cannot read ends the scan; verify lists it.
  }
  return { scanned: at, formats, width: histogram(widths, opts.bins), height: histogram(heights, opts.bins), undecodable };
}

/** `n` bytes in binary units (B, KiB, MiB, GiB, TiB), one decimal. */
function human(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let k = 0;
  let v = n;
  while (v >= 1024 && k < units.length - 1) { v /= 1024; k++; }
  return k === 0 ? `${n} B` : `${v.toFixed(1)} ${units[k]}`;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`loaderx-qa: ${e.message}\n${USAGE}`);
    return 2;
  }
  if (!opts) { console.log(USAGE); return 0; }
  let store;
  try {
    store = await Store.open(opts.store);
  } catch (e) {
    console.error(`loaderx-qa: cannot open ${redactUrl(opts.store)}: [${e.code}] ${redactUrl(e.message)}`);
    return 2;
  }
  try {
    /** @type {import('../src/node.js').Stats | {error: string}} */
    const stats = await store.stats().catch((e) => ({ error: `[${e.code}] ${e.message}` }));
    const hist = histogram(await allLengths(store), opts.bins);
    const tty = process.stderr.isTTY && !opts.json;
    const report = await store.verify({
      onProgress: (done, total) => { if (tty) process.stderr.write(`\rverify ${done}/${total}`); },
    });
    if (tty) process.stderr.write('\n');
    const asImages = opts.images || typeof store.schema?.media === 'string';
    const images = asImages ? await imageReport(store, opts) : null;
    // A URL's userinfo and query values (a presigned signature) are never printed.
    const shown = redactUrl(opts.store);
    const ok = report.ok && !images?.undecodable.length;
    const result = { store: shown, ok, length: store.length, schema: store.schema, header: store.header, stats, lengthHistogram: hist, bad: report.bad, unlisted: report.unlisted, images };
    if (opts.json) {
      console.log(JSON.stringify(result, null, 2));
    } else {
      const s = store.schema;
      console.log(`store     ${shown}`);
      console.log(`records   ${store.length}`);
      console.log(s ? `schema    ${s.kind} ${s.dtype} item_shape [${s.itemShape.join(', ')}] codec ${s.codec}` : 'schema    none (plain byte records)');
      if ('error' in stats) console.log(`stats     ${stats.error}`);
      else {
        const files = Object.keys(stats.fileBytes).length;
        console.log(`used      ${stats.usedBytes} bytes (${human(stats.usedBytes)}) in ${files} file${files === 1 ? '' : 's'}, ${stats.reclaimable} reclaimable, dictionary: ${stats.hasDict ? 'yes' : 'no'}`);
        console.log(`stored    ${stats.liveBytes} bytes live, ${stats.logicalBytes} decoded (ratio ${stats.compressionRatio.toFixed(2)}x)`);
        console.log(`apparent  ${stats.apparentBytes} bytes (${human(stats.apparentBytes)}; preallocated space not yet written counts here)`);
      }
      if (hist.bins.length) {
        console.log(`lengths   min ${hist.min}  max ${hist.max}  mean ${(hist.mean ?? 0).toFixed(1)} bytes`);
        const peak = Math.max(...hist.bins.map((b) => b.count));
        for (const b of hist.bins) console.log(`  ${String(b.from).padStart(9)}..${String(b.to).padEnd(9)} ${String(b.count).padStart(8)} ${'#'.repeat(Math.round((40 * b.count) / peak))}`);
      }
      if (report.ok) console.log(`verify    ok: all ${store.length} records decode`);
      else {
        console.log(`verify    FAILED: ${report.bad.length + report.unlisted} bad record(s)`);
        for (const b of report.bad.slice(0, 50)) console.log(`  record ${b.index}: [${b.code}] ${redactUrl(b.message)}`);
        const more = report.bad.length - Math.min(50, report.bad.length) + report.unlisted;
        if (more > 0) console.log(`  ... and ${more} more`);
      }
      if (images) {
        const kinds = Object.entries(images.formats).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
        console.log(`images    ${images.scanned - images.undecodable.length} decode (${kinds}), ${images.undecodable.length} undecodable`);
        if (images.width.bins.length) {
          console.log(`width     min ${images.width.min}  max ${images.width.max}  mean ${(images.width.mean ?? 0).toFixed(1)} px`);
          console.log(`height    min ${images.height.min}  max ${images.height.max}  mean ${(images.height.mean ?? 0).toFixed(1)} px`);
        }
        for (const u of images.undecodable.slice(0, 50)) console.log(`  undecodable image ${u.index}: ${u.message}`);
        if (images.undecodable.length > 50) console.log(`  ... and ${images.undecodable.length - 50} more`);
      }
    }
    return ok && !('error' in stats) ? 0 : 1;
  } catch (e) {
    console.error(`loaderx-qa: [${e.code}] ${redactUrl(e.message)}`);
    return 1;
  } finally {
    await store.close();
  }
}

process.exitCode = await main();
