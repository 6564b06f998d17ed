// The statistics panel: the whole store scanned by the engine's profile (Store.profile, in the
// worker, on the threaded build where the page allows), with progress and a Cancel button, and
// the result cached in IndexedDB under the store's identity so reopening shows it at once.
// Shown: per channel count, min, max, mean, std, NaN and ±Inf counts and a histogram; label
// counts; the ragged length histogram; duplicate groups and NaN records as links to the records;
// stored and decoded bytes per codec.
//
// Identity: the store's content digest when its checksums cover every record (any change of
// content changes it), else where it was opened from plus its header and length, so an
// appended or rewritten store is scanned afresh.
import { el, fmtBytes, fmtInt, fmtNum, fmtStat } from './util.js';
import { drawHistogram } from './render.js';

/** @typedef {import('../src/browser.js').Store} Store */
/** @typedef {import('./open.js').Stream} Stream */

const DB = 'loaderx-viewer';
const TABLE = 'profiles';
/** Bump when the cached summary's shape changes. */
const VERSION = 1;

/** The viewer's IndexedDB, or null where there is none (private windows may refuse it). */
function openDb() {
  return new Promise((resolve) => {
    try {
      const req = indexedDB.open(DB, 1);
      req.onupgradeneeded = () => { req.result.createObjectStore(TABLE); };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => resolve(null);
    } catch {
      resolve(null);
    }
  });
}

/** @param {string} key @returns {Promise<any>} */
async function cached(key) {
  const db = await openDb();
  if (!db) return null;
  return new Promise((resolve) => {
    const req = db.transaction(TABLE).objectStore(TABLE).get(key);
    req.onsuccess = () => { db.close(); resolve(req.result?.version === VERSION ? req.result.profile : null); };
    req.onerror = () => { db.close(); resolve(null); };
  });
}

/** @param {string} key @param {any} profile */
async function remember(key, profile) {
  const db = await openDb();
  if (!db) return;
  await new Promise((resolve) => {
    const tx = db.transaction(TABLE, 'readwrite');
    tx.objectStore(TABLE).put({ version: VERSION, profile, at: Date.now() }, key);
    tx.oncomplete = tx.onerror = tx.onabort = () => { db.close(); resolve(null); };
  });
}

/**
 * The key a store's profile is cached under (see the module docs).
 * @param {Stream} entry
 */
export async function identityOf(entry) {
  const digest = await entry.store.digest().catch(() => null);
  if (digest) return `${digest}|bins=20`;
  return `${entry.url ?? entry.label}|${JSON.stringify(entry.store.header)}|${entry.store.length}|bins=20`;
}

/**
 * A histogram of the profile (edges and counts) in the shape drawHistogram takes.
 * @param {{edges: number[], counts: number[]}} h
 * @param {boolean} integer
 */
function asDrawn(h, integer) {
  const bins = h.counts.length;
  const lo = h.edges[0];
  const hi = h.edges[bins];
  return { series: [{ counts: Float64Array.from(h.counts) }], lo, hi, width: (hi - lo) / bins, integer, bins };
}

export class Statistics {
  /**
   * @param {HTMLElement} root
   * @param {{onError: (e: any, context: string) => void, onOpenRecord: (index: number) => void, onShowList?: (what: string, indices: number[]) => void}} hooks
   */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.token = 0;
    /** @type {AbortController | null} */
    this.running = null;
    /** The shown profile (tests read it). @type {any} */
    this.profile = null;
  }

  /**
   * Shows the panel for `entry`: the cached profile at once, else a button that computes it.
   * @param {Stream} entry
   */
  /** Stops a scan running and forgets the shown store (another one is opening). */
  stop() {
    this.token++;
    this.running?.abort();
    this.running = null;
  }

  async show(entry) {
    const token = ++this.token;
    this.running?.abort();
    this.running = null;
    this.profile = null;
    const body = el('div', { class: 'stats-body', dataset: { k: 'stats-state', v: 'idle' } });
    const run = el('button', { class: 'btn small', type: 'button' }, 'Compute statistics');
    run.onclick = () => this.#compute(token, entry, body, run);
    this.root.replaceChildren(el('h3', {}, 'Statistics'), el('div', { class: 'stats-actions' }, run), body);
    body.append(el('span', { class: 'dim' }, 'reads every record (numeric stores twice, for the histograms) in this browser; the result is kept for the next visit'));
    const key = await identityOf(entry);
    if (token !== this.token) return;
    const hit = await cached(key);
    if (token !== this.token || !hit) return;
    this.#render(body, hit, 'cached');
    run.textContent = 'Recompute';
  }

  /**
   * @param {number} token
   * @param {Stream} entry
   * @param {HTMLElement} body
   * @param {HTMLButtonElement} run
   */
  async #compute(token, entry, body, run) {
    const controller = new AbortController();
    this.running = controller;
    run.disabled = true;
    const bar = el('progress', { max: '1', value: '0' });
    const what = el('span', { class: 'dim' }, 'reading records…');
    const cancel = el('button', { class: 'btn small', type: 'button', dataset: { k: 'stats-cancel' } }, 'Cancel');
    cancel.onclick = () => controller.abort(new Error('cancelled'));
    body.dataset.v = 'running';
    body.replaceChildren(bar, ' ', what, ' ', cancel);
    const started = performance.now();
    try {
      const profile = await entry.store.profile({
        signal: controller.signal,
        onProgress: (done, total, pass) => {
          bar.max = total || 1;
          bar.value = done;
          what.textContent = `${pass === 1 ? 'statistics' : 'histograms'}: ${fmtInt(done)} of ${fmtInt(total)} records`;
        },
      });
      if (token !== this.token) return;
      this.#render(body, profile, `computed in ${((performance.now() - started) / 1000).toFixed(2)} s`);
      run.textContent = 'Recompute';
      remember(await identityOf(entry), profile).catch(() => {});
    } catch (e) {
      if (token !== this.token) return;
      if (controller.signal.aborted) {
        body.dataset.v = 'cancelled';
        body.replaceChildren(el('span', { class: 'dim' }, 'cancelled'));
      } else {
        body.dataset.v = 'failed';
        body.replaceChildren(el('span', { class: 'bad-text' }, 'the statistics could not be computed'));
        this.hooks.onError(e, 'Computing the statistics');
      }
    } finally {
      if (this.running === controller) this.running = null;
      run.disabled = false;
    }
  }

  /**
   * @param {HTMLElement} body
   * @param {any} p the profile
   * @param {string} how 'cached' or how long it took
   */
  #render(body, p, how) {
    this.profile = p;
    body.dataset.v = how === 'cached' ? 'cached' : 'done';
    const links = (/** @type {number[]} */ list, /** @type {number} */ cap = 12) => list.slice(0, cap).flatMap((i, k) => {
      const a = el('a', { href: '#', onclick: (/** @type {Event} */ ev) => { ev.preventDefault(); this.hooks.onOpenRecord(i); } }, `#${i}`);
      return k ? [', ', a] : [a];
    });
    /** @type {HTMLElement[]} */
    const parts = [el('div', { class: 'dim', dataset: { k: 'stats-how', v: how } }, `${fmtInt(p.records)} records · ${how}`)];
    /** @type {[HTMLCanvasElement, any, string][]} */
    const draws = [];
    if (p.channels.length) {
      const rows = p.channels.map((/** @type {any} */ c, /** @type {number} */ k) => el('tr', { dataset: { k: `stats-channel-${k}`, v: JSON.stringify([c.count, c.min, c.max, c.mean, c.std, c.nan, c.posInf, c.negInf]) } },
        el('td', {}, p.channels.length > 1 ? String(k) : 'all'), el('td', {}, fmtInt(c.count)), el('td', {}, c.min === null ? '–' : fmtNum(c.min)),
        el('td', {}, c.max === null ? '–' : fmtNum(c.max)), el('td', {}, c.mean === null ? '–' : fmtStat(c.mean)), el('td', {}, c.std === null ? '–' : fmtStat(c.std)),
        el('td', { class: c.nan ? 'bad-text' : '' }, fmtInt(c.nan)), el('td', { class: c.posInf + c.negInf ? 'bad-text' : '' }, fmtInt(c.posInf + c.negInf))));
      parts.push(el('table', { class: 'stats-table' },
        el('tr', {}, ['channel', 'values', 'min', 'max', 'mean', 'std', 'NaN', '±Inf'].map((h) => el('th', {}, h))), rows));
      const hists = el('div', { class: 'stats-hists' });
      p.channels.forEach((/** @type {any} */ c, /** @type {number} */ k) => {
        if (!c.histogram) return;
        const canvas = el('canvas', { class: 'hist', dataset: { k: `stats-hist-${k}`, v: JSON.stringify(c.histogram.counts) } });
        hists.append(el('figure', {}, el('figcaption', { class: 'dim' }, p.channels.length > 1 ? `channel ${k}` : 'values'), canvas));
        draws.push([canvas, asDrawn(c.histogram, false), 'values']);
      });
      parts.push(hists);
    }
    if (p.valueCounts) {
      const peak = Math.max(1, ...p.valueCounts.map((/** @type {[number, number]} */ v) => v[1]));
      parts.push(el('div', { class: 'stats-labels', dataset: { k: 'stats-labels', v: JSON.stringify(p.valueCounts) } }, el('h4', {}, `Values (${p.valueCounts.length} distinct)`),
        p.valueCounts.slice(0, 64).map(([v, n]) => el('div', { class: 'stats-label' }, el('span', { class: 'stats-label-v' }, String(v)),
          el('span', { class: 'stats-bar', style: { width: `${(100 * n) / peak}%` } }), el('span', { class: 'dim' }, fmtInt(n))))));
    } else if (p.distinctOver) {
      parts.push(el('div', { class: 'dim' }, 'more than 1024 distinct values: not counted'));
    }
    if (p.lengths) {
      const canvas = el('canvas', { class: 'hist', dataset: { k: 'stats-lengths', v: JSON.stringify(p.lengths) } });
      parts.push(el('h4', {}, `Lengths (rows): min ${fmtInt(p.lengths.min)}, max ${fmtInt(p.lengths.max)}, mean ${fmtStat(p.lengths.mean)}`), canvas);
      draws.push([canvas, asDrawn(p.lengths.histogram, true), 'records']);
    }
    const d = p.duplicates;
    /** A button that shows `indices` in the grid. @param {string} label @param {string} what @param {number[]} indices @param {string} k */
    const showAll = (label, what, indices, k) => (this.hooks.onShowList
      ? el('button', { class: 'btn small', type: 'button', dataset: { k }, onclick: () => this.hooks.onShowList?.(what, indices) }, label)
      : null);
    const dupIndices = d.listed.flat().sort((/** @type {number} */ a, /** @type {number} */ b) => a - b);
    parts.push(el('div', { class: 'stats-line', dataset: { k: 'stats-duplicates', v: JSON.stringify(d) } }, el('h4', {}, 'Duplicates'),
      d.groups ? showAll('Show in the grid', `the ${fmtInt(d.groups)} groups of equal records${d.groups > d.listed.length ? ` (the first ${d.listed.length})` : ''}`, dupIndices, 'stats-show-duplicates') : null, ' ',
      d.groups ? [`${fmtInt(d.groups)} group${d.groups === 1 ? '' : 's'} of equal records (${fmtInt(d.extraRecords)} repeats): `,
        d.listed.slice(0, 8).flatMap((/** @type {number[]} */ g, /** @type {number} */ k) => [k ? ' · ' : '', '[', ...links(g, 6), g.length > 6 ? ', …' : '', ']'])]
        : 'none: every record differs'));
    parts.push(el('div', { class: 'stats-line', dataset: { k: 'stats-nan', v: JSON.stringify(p.nanRecords) } }, el('h4', {}, 'Records with NaN'),
      p.nanRecords.count ? showAll('Show in the grid', `records with NaN${p.nanRecords.count > p.nanRecords.indices.length ? ` (the first ${p.nanRecords.indices.length})` : ''}`, p.nanRecords.indices, 'stats-show-nan') : null, ' ',
      p.nanRecords.count ? [`${fmtInt(p.nanRecords.count)}: `, ...links(p.nanRecords.indices), p.nanRecords.count > 12 ? ', …' : ''] : 'none'));
    parts.push(el('table', { class: 'stats-table', dataset: { k: 'stats-codecs', v: JSON.stringify(p.codecs) } },
      el('tr', {}, ['codec', 'records', 'stored', 'decoded'].map((h) => el('th', {}, h))),
      p.codecs.map((/** @type {any} */ c) => el('tr', {}, el('td', {}, c.codec), el('td', {}, fmtInt(c.records)), el('td', {}, fmtBytes(c.storedBytes)), el('td', {}, fmtBytes(c.decodedBytes))))));
    body.replaceChildren(...parts);
    for (const [canvas, hist, unit] of draws) drawHistogram(canvas, hist, { unit });
  }
}
