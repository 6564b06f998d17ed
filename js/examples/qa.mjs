#!/usr/bin/env node
// Quality check of a loaderx store (or a manifest of stores, local or over HTTP) from Node:
// schema, storage, a record-length histogram, a full verify, and whole-store statistics (per
// channel moments, NaN/Inf counts and histograms, label counts, ragged lengths, exact duplicate
// groups, bytes per codec: Store.profile, the engine's rules compiled to wasm). For a store of
// encoded images (its schema's `media`, or --images) also the formats, the picture sizes and
// every record that does not decode. Thresholds make it a CI gate.
//
//   loaderx-qa STORE [--format text|json|markdown] [--json] [--bins N] [--no-profile]
//                    [--fail-on nan|inf|duplicates|misfit]... [--max-length N] [--labels LO..HI]
//                    [--images] [--max-pixels N]
//
// Exit code 0: healthy, every threshold met; 1: damaged records or undecodable images (or the
// statistics could not be computed); 2: the store cannot be opened, or bad usage; 3: the store
// reads, but a threshold failed (each failed check is printed, and listed under `checks`).
import { Store, imageProblem, imageHeader } from '../src/node.js';
import { redactUrl } from '../src/redact.js';

const USAGE = `usage: loaderx-qa STORE [--format text|json|markdown] [--json] [--bins N] [--no-profile]
                  [--fail-on nan|inf|duplicates|misfit]... [--max-length N] [--labels LO..HI]
                  [--images] [--max-pixels N]
  STORE is a store directory, a manifest, or an http(s) URL of either
  exit: 0 healthy, 1 damaged records, 2 cannot open / bad usage, 3 a threshold failed`;

const FAIL_ON = ['nan', 'inf', 'duplicates', 'misfit'];

/** @param {string[]} argv */
function parseArgs(argv) {
  /** @type {{format: string, bins: number, store: string | null, images: boolean, maxPixels: number | undefined, profile: boolean, failOn: string[], maxLength: number | undefined, labels: [number, number] | undefined}} */
  const opts = { format: 'text', bins: 10, store: null, images: false, maxPixels: undefined, profile: true, failOn: [], maxLength: undefined, labels: undefined };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    if (a === '--json') opts.format = 'json';
    else if (a === '--format') opts.format = String(argv[++k]);
    else if (a === '--bins') opts.bins = Number(argv[++k]);
    else if (a === '--images') opts.images = true;
    else if (a === '--max-pixels') opts.maxPixels = Number(argv[++k]);
    else if (a === '--no-profile') opts.profile = false;
    else if (a === '--fail-on') opts.failOn.push(String(argv[++k]));
    else if (a === '--max-length') opts.maxLength = Number(argv[++k]);
    else if (a === '--labels') {
      const m = /^(-?\d+)\.\.(-?\d+)$/.exec(String(argv[++k]));
      if (!m || Number(m[1]) > Number(m[2])) throw new Error('--labels takes LO..HI, integers with LO <= HI (for example 0..9)');
      opts.labels = [Number(m[1]), Number(m[2])];
    } else if (a === '-h' || a === '--help') return null;
    else if (!opts.store && !a.startsWith('-')) opts.store = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!opts.store || !Number.isInteger(opts.bins) || opts.bins < 1 || opts.bins > 4096) throw new Error('a STORE and --bins between 1 and 4096 are needed');
  if (!['text', 'json', 'markdown'].includes(opts.format)) throw new Error(`--format must be text, json or markdown, not ${opts.format}`);
  if (opts.maxPixels !== undefined && !(opts.maxPixels > 0)) throw new Error('--max-pixels must be a positive number');
  if (opts.maxLength !== undefined && !(Number.isInteger(opts.maxLength) && opts.maxLength >= 0)) throw new Error('--max-length must be a non-negative integer');
  for (const f of opts.failOn) if (!FAIL_ON.includes(f)) throw new Error(`--fail-on takes ${FAIL_ON.join(', ')}, not ${f}`);
  const gates = opts.failOn.length || opts.maxLength !== undefined || opts.labels !== undefined;
  if (gates && !opts.profile) throw new Error('thresholds need the statistics: drop --no-profile');
  return { ...opts, store: opts.store };
}

/**
 * The thresholds, checked against the profile: `[{check, ok, detail}]`.
 * @param {any} profile
 * @param {ReturnType<typeof parseArgs> & {}} opts
 * @param {any} schema
 */
function checks(profile, opts, schema) {
  const out = [];
  const sum = (/** @type {string} */ key) => profile.channels.reduce((a, c) => a + c[key], 0);
  const first = (/** @type {number[]} */ list) => (list.length ? ` (records ${list.slice(0, 10).join(', ')}${list.length > 10 ? ', ...' : ''})` : '');
  for (const f of opts.failOn) {
    if (f === 'nan') {
      const n = sum('nan');
      out.push({ check: 'nan', ok: n === 0, detail: `${n} NaN value(s) in ${profile.nanRecords.count} record(s)${first(profile.nanRecords.indices)}` });
    } else if (f === 'inf') {
      const n = sum('posInf') + sum('negInf');
      out.push({ check: 'inf', ok: n === 0, detail: `${n} infinite value(s)` });
    } else if (f === 'duplicates') {
      const d = profile.duplicates;
      const shown = d.listed.slice(0, 5).map((/** @type {number[]} */ g) => `[${g.slice(0, 5).join(', ')}${g.length > 5 ? ', ...' : ''}]`).join(' ');
      out.push({ check: 'duplicates', ok: d.groups === 0, detail: `${d.groups} group(s) of equal records, ${d.extraRecords} repeat(s)${d.groups ? `: ${shown}` : ''}` });
    } else {
      out.push({ check: 'misfit', ok: profile.misfit.count === 0, detail: `${profile.misfit.count} record(s) not a whole number of rows${first(profile.misfit.indices)}` });
    }
  }
  if (opts.maxLength !== undefined) {
    const l = profile.lengths;
    if (!l) out.push({ check: 'max-length', ok: false, detail: `the store is ${schema?.kind ?? 'not typed'}: --max-length applies to ragged stores` });
    else out.push({ check: 'max-length', ok: l.max <= opts.maxLength, detail: `longest record ${l.max} rows, limit ${opts.maxLength}` });
  }
  if (opts.labels !== undefined) {
    const [lo, hi] = opts.labels;
    const c = profile.channels[0];
    if (profile.valueCounts === null && !profile.distinctOver) {
      out.push({ check: 'labels', ok: false, detail: 'the store does not hold integer labels (dense, one integer per record)' });
    } else {
      const outside = (profile.valueCounts ?? []).filter(([v]) => v < lo || v > hi);
      const ok = c.count === 0 || (c.min >= lo && c.max <= hi);
      const detail = ok
        ? `all ${c.count} labels in ${lo}..${hi}`
        : `labels span ${c.min}..${c.max}, outside ${lo}..${hi}${outside.length ? `: ${outside.slice(0, 10).map(([v, n]) => `${v} (${n}x)`).join(', ')}` : ''}`;
      out.push({ check: 'labels', ok, detail });
    }
  }
  return out;
}

/** A number for a report: integers as they are, others with 6 significant digits. */
const num = (/** @type {number | null} */ x) => (x === null ? '-' : Number.isInteger(x) ? String(x) : x.toPrecision(6));

/**
 * The profile as report lines (text) or a Markdown section.
 * @param {any} p
 * @param {boolean} markdown
 */
function profileLines(p, markdown) {
  const lines = [];
  if (markdown) {
    if (p.channels.length) {
      lines.push('| channel | count | min | max | mean | std | NaN | +Inf | -Inf |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|');
      p.channels.forEach((c, k) => { lines.push(`| ${k} | ${c.count} | ${num(c.min)} | ${num(c.max)} | ${num(c.mean)} | ${num(c.std)} | ${c.nan} | ${c.posInf} | ${c.negInf} |`); });
      lines.push('');
    }
    if (p.valueCounts) lines.push(`**Labels**: ${p.valueCounts.map(([v, n]) => `${v}: ${n}`).join(', ')}`, '');
    if (p.lengths) lines.push(`**Lengths** (rows): min ${p.lengths.min}, max ${p.lengths.max}, mean ${num(p.lengths.mean)}`, '');
    lines.push(`**Duplicates**: ${p.duplicates.groups} group(s), ${p.duplicates.extraRecords} repeat(s). **NaN records**: ${p.nanRecords.count}.`, '');
    lines.push('| codec | records | stored | decoded |', '|---|---:|---:|---:|');
    for (const c of p.codecs) lines.push(`| ${c.codec} | ${c.records} | ${c.storedBytes} | ${c.decodedBytes} |`);
    return lines;
  }
  p.channels.forEach((c, k) => {
    const label = p.channels.length > 1 ? `channel ${k}` : 'values   ';
    lines.push(`${label} count ${c.count}  min ${num(c.min)}  max ${num(c.max)}  mean ${num(c.mean)}  std ${num(c.std)}  NaN ${c.nan}  +Inf ${c.posInf}  -Inf ${c.negInf}`);
  });
  if (p.valueCounts) lines.push(`labels    ${p.valueCounts.map(([v, n]) => `${v}: ${n}`).join(', ')}`);
  if (p.distinctOver) lines.push('labels    more than 1024 distinct values (not counted)');
  if (p.lengths) lines.push(`rows      min ${p.lengths.min}  max ${p.lengths.max}  mean ${num(p.lengths.mean)} per record`);
  lines.push(`dupes     ${p.duplicates.groups} group(s) of equal records, ${p.duplicates.extraRecords} repeat(s)`);
  for (const g of p.duplicates.listed.slice(0, 10)) lines.push(`  records ${g.slice(0, 10).join(', ')}${g.length > 10 ? ', ...' : ''}`);
  lines.push(`NaN       ${p.nanRecords.count} record(s)${p.nanRecords.count ? `: ${p.nanRecords.indices.slice(0, 10).join(', ')}${p.nanRecords.count > 10 ? ', ...' : ''}` : ''}`);
  lines.push(`codecs    ${p.codecs.map((c) => `${c.codec} ${c.records} records ${c.storedBytes}/${c.decodedBytes} bytes`).join('; ') || 'none'}`);
  return lines;
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
    const tty = process.stderr.isTTY && opts.format === 'text';
    const report = await store.verify({
      onProgress: (done, total) => { if (tty) process.stderr.write(`\rverify ${done}/${total}`); },
    });
    if (tty) process.stderr.write('\n');
    /** @type {any} */
    let profile = null;
    if (opts.profile) {
      const onProgress = (/** @type {number} */ done, /** @type {number} */ total, /** @type {number} */ pass) => {
        if (tty) process.stderr.write(`\rstatistics ${pass === 1 ? '' : '(histograms) '}${done}/${total}`);
      };
      profile = await store.profile({ bins: opts.bins, onProgress }).catch((e) => ({ error: `[${e.code ?? 'LOADERX_IO'}] ${redactUrl(e.message)}` }));
      if (tty) process.stderr.write('\n');
    }
    const asImages = opts.images || typeof store.schema?.media === 'string';
    const images = asImages ? await imageReport(store, opts) : null;
    // A URL's userinfo and query values (a presigned signature) are never printed.
    const shown = redactUrl(opts.store);
    const ok = report.ok && !images?.undecodable.length;
    const profiled = profile !== null && !('error' in profile);
    const gates = profiled ? checks(profile, opts, store.schema) : [];
    const result = { store: shown, ok, length: store.length, schema: store.schema, header: store.header, stats, lengthHistogram: hist, bad: report.bad, unlisted: report.unlisted, images, profile, checks: gates };
    if (opts.format === 'json') {
      console.log(JSON.stringify(result, null, 2));
    } else if (opts.format === 'markdown') {
      const s = store.schema;
      console.log(`## loaderx-qa: \`${shown}\`\n`);
      console.log(`- records: ${store.length}`);
      console.log(`- schema: ${s ? `${s.kind} \`${s.dtype}\` item_shape [${s.itemShape.join(', ')}] codec ${s.codec}` : 'none (plain byte records)'}`);
      console.log(`- verify: ${report.ok ? `ok, all ${store.length} records decode` : `**FAILED**, ${report.bad.length + report.unlisted} bad record(s)`}`);
      if (images) console.log(`- images: ${images.undecodable.length} undecodable`);
      console.log('');
      if (profiled) console.log(profileLines(profile, true).join('\n'));
      else if (profile) console.log(`statistics could not be computed: ${profile.error}`);
      if (gates.length) {
        console.log(['', '| check | result | detail |', '|---|---|---|'].join('\n'));
        for (const g of gates) console.log(`| ${g.check} | ${g.ok ? 'ok' : '**FAIL**'} | ${g.detail} |`);
      }
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
      if (profiled) for (const line of profileLines(profile, false)) console.log(line);
      else if (profile) console.log(`statistics could not be computed: ${profile.error}`);
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
      for (const g of gates) console.log(`${g.ok ? 'ok  ' : 'FAIL'}      ${g.check}: ${g.detail}`);
    }
    if (!ok || 'error' in stats || (profile && !profiled)) return 1;
    return gates.every((g) => g.ok) ? 0 : 3;
  } catch (e) {
    console.error(`loaderx-qa: [${e.code}] ${redactUrl(e.message)}`);
    return 1;
  } finally {
    await store.close();
  }
}

process.exitCode = await main();
