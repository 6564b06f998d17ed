// The record grid: gathers one page of records from every stream (in the worker), then draws a
// tile per record: an image, or a value preview with min/max/mean (and the length of ragged
// records). Corrupt records get an error tile while the rest of the page still shows. The next
// page is fetched ahead while the user looks at this one.
import { el, fmtInt, fmtNum, fmtShape, product, yieldToBrowser } from './util.js';
import { drawImage, drawSparkline, encodedImage, imageMapping, imageSpec, previewText, statsOf } from './render.js';

/** @typedef {import('../src/browser.js').Store} Store */
/** @typedef {import('./render.js').Rec} Rec */
/** @typedef {import('./render.js').ImageSpec} ImageSpec */
/** @typedef {import('./render.js').Mapping} Mapping */
/** @typedef {import('./render.js').Stats} Stats */
/** @typedef {import('./open.js').Stream} Stream */
/**
 * One stream's records of a page: null (and the error at the same position) where unreadable.
 * @typedef {{records: (Rec | null)[], errors: any[]}} Gathered
 */
/**
 * What the grid drew: the page, how long it took, the images' normalization notes and the
 * records that could not be read.
 * @typedef {object} RenderInfo
 * @property {string} key
 * @property {number[]} indices
 * @property {number} ms  from the call to the tiles in the page
 * @property {number} fetchMs  reading and decoding (in the worker, or ahead of time)
 * @property {number} renderMs  drawing
 * @property {{stream: string, note: string}[]} notes
 * @property {{stream: number, index: number, error: any}[]} errors
 * @property {{images: boolean, stretched: boolean}} contrast  whether the page has images that
 *   auto-contrast changes, and whether it stretched them
 */

/** Pages kept (the current one and the ones fetched ahead). */
const CACHE_PAGES = 4;
/** Per-record reads at once when a page has to be read record by record. */
const FALLBACK_CONCURRENCY = 8;

/**
 * Splits what gather returned into one array per record (each with its own `shape`).
 * @param {Rec | Rec[]} batch
 * @param {number} n  records in it
 * @returns {Rec[]}
 */
export function splitBatch(batch, n) {
  if (Array.isArray(batch)) return batch;
  const tail = batch.shape.slice(1);
  const per = product(tail);
  const out = new Array(n);
  for (let k = 0; k < n; k++) out[k] = Object.assign(batch.subarray(k * per, (k + 1) * per), { shape: tail });
  return out;
}

/**
 * Records `indices` of one stream: `{records, errors}` where a record that cannot be read is
 * null and its error is in `errors` (by position). A failing batch is retried record by record,
 * so one corrupt record does not hide its page.
 * The retry stops once `stale()` (another store is opening: its reads were interrupted).
 * @param {Store} store
 * @param {number[]} indices
 * @param {() => boolean} [stale]
 * @returns {Promise<Gathered>}
 */
export async function gatherSafe(store, indices, stale = () => false) {
  try {
    return { records: splitBatch(await store.gather(indices), indices.length), errors: [] };
  } catch (e) {
    if (stale()) throw e;
    if (e.code === 'LOADERX_CLOSED' || indices.length <= 1) {
      if (e.code === 'LOADERX_CLOSED') throw e;
      return { records: [null], errors: [e] };
    }
    /** @type {(Rec | null)[]} */
    const records = new Array(indices.length).fill(null);
    const errors = new Array(indices.length).fill(null);
    let next = 0;
    const worker = async () => {
      while (next < indices.length && !stale()) {
        const k = next++;
        try {
          records[k] = await store.get(indices[k]);
        } catch (err) {
          if (err.code === 'LOADERX_CLOSED') throw err;
          errors[k] = err;
        }
      }
    };
    await Promise.all(Array.from({ length: FALLBACK_CONCURRENCY }, worker));
    return { records, errors };
  }
}

/**
 * The tile (`.tile[data-index]`) an event happened in, or null.
 * @param {Event} ev
 * @returns {HTMLElement | null}
 */
const tileOf = (ev) => (ev.target instanceof Element ? ev.target.closest('.tile[data-index]') : null);

export class Grid {
  /**
   * @param {HTMLElement} root the tile container
   * @param {{onOpen: (index: number) => void, onRendered: (info: RenderInfo) => void, onPick?: (index: number) => void}} hooks
   */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    /** @type {Stream[]} */
    this.streams = [];
    /** @type {Map<string, Promise<{per: Gathered[], fetchMs: number}>>} */
    this.cache = new Map();
    this.token = 0;
    /** Bumped by interrupt(): reads started before it give up on errors. */
    this.generation = 0;
    /** Object URLs of the encoded images on the page, revoked when the page is replaced. @type {string[]} */
    this.urls = [];
    /** Records picked by hand (Ctrl, Cmd or Shift click), marked on their tiles. @type {Set<number>} */
    this.picked = new Set();
    root.addEventListener('click', (ev) => {
      const tile = tileOf(ev);
      if (!tile) return;
      const index = Number(tile.dataset.index);
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey) {
        if (this.picked.has(index)) this.picked.delete(index);
        else this.picked.add(index);
        tile.classList.toggle('picked', this.picked.has(index));
        hooks.onPick?.(index);
      } else hooks.onOpen(index);
    });
    root.addEventListener('keydown', (ev) => {
      const tile = tileOf(ev);
      if (tile && (ev.key === 'Enter' || ev.key === ' ')) {
        ev.preventDefault();
        hooks.onOpen(Number(tile.dataset.index));
      }
    });
  }

  /**
   * `streams[0]` is the main store; each is `{id, store, interp, label, short}`.
   * @param {Stream[]} streams
   */
  setStreams(streams) {
    this.streams = streams;
    this.cache.clear();
  }

  /**
   * @param {string} key
   * @param {number[]} indices
   */
  #fetch(key, indices) {
    const full = `${this.streams.map((s) => s.id).join('+')}|${key}`;
    let p = this.cache.get(full);
    if (p) {
      this.cache.delete(full);
      this.cache.set(full, p);
      return p;
    }
    const t0 = performance.now();
    const generation = this.generation;
    const stale = () => this.generation !== generation;
    p = Promise.all(this.streams.map((s) => gatherSafe(s.store, indices, stale))).then((per) => ({ per, fetchMs: performance.now() - t0 }));
    p.catch(() => this.cache.delete(full));
    this.cache.set(full, p);
    while (this.cache.size > CACHE_PAGES) this.cache.delete(/** @type {string} */ (this.cache.keys().next().value)); // the oldest
    return p;
  }

  /**
   * Starts reading a page the user is likely to ask for next.
   * @param {string} key
   * @param {number[]} indices
   */
  /** Another store is opening: reads in flight give up (no record-by-record retry) and the
   *  pages read so far are dropped. */
  interrupt() {
    this.generation++;
    this.cache.clear();
  }

  prefetch(key, indices) {
    if (indices.length && this.streams.length) this.#fetch(key, indices).catch(() => {});
  }

  /**
   * Shows records `indices` (`key` names the page for the cache). Resolves when the tiles are in
   * the page, or to null when a newer call took over.
   * `contrast`: auto-contrast on (true), off (false) or by the values' range (null).
   * @param {{key: string, indices: number[], highlight?: number | null, show?: string, contrast?: boolean | null}} page
   * @returns {Promise<RenderInfo | null>}
   */
  async show({ key, indices, highlight = null, show = 'auto', contrast = null }) {
    const token = ++this.token;
    const t0 = performance.now();
    this.root.setAttribute('aria-busy', 'true');
    let got;
    try {
      got = await this.#fetch(key, indices);
    } catch (e) {
      if (token !== this.token) return null; // e.g. the store was replaced (and closed) meanwhile
      throw e;
    }
    if (token !== this.token) return null;
    const { per, fetchMs } = got;
    const fetched = performance.now();

    // What each stream looks like on this page: images (with one mapping for the page) or values.
    const looks = this.streams.map((s, k) => {
      const recs = per[k].records;
      const specOf = (/** @type {Rec | null} */ rec) => (rec && show !== 'values' ? imageSpec(s.interp.shapeOf(rec), s.interp, show === 'image') : null);
      const specs = recs.map(specOf);
      const images = specs.filter(Boolean).length;
      let mapping = null;
      if (images) {
        const vals = recs.filter((r, i) => r && specs[i]).map((r) => s.interp.numbers(/** @type {Rec} */ (r)));
        mapping = imageMapping(s.interp, statsOf(vals), 'this page', contrast);
      }
      return { specs, mapping, images };
    });

    const frag = document.createDocumentFragment();
    /** @type {[HTMLCanvasElement, ArrayLike<number>, Stats][]} */
    const sparks = [];
    let slice = performance.now();
    for (let k = 0; k < indices.length; k++) {
      const index = indices[k];
      const tile = el('div', { class: 'tile', role: 'button', tabindex: '0', dataset: { index: String(index) }, 'aria-label': `record ${index}` });
      if (index === highlight) tile.classList.add('hl');
      if (this.picked.has(index)) tile.classList.add('picked');
      const head = el('div', { class: 'tile-head' }, el('span', { class: 'tile-index' }, `#${fmtInt(index)}`));
      tile.append(head);
      this.streams.forEach((s, si) => {
        const rec = per[si].records[k];
        const err = per[si].errors[k];
        const body = this.#body(s, rec, err, looks[si].specs[k], looks[si].mapping, si > 0, sparks);
        if (si === 0 && rec && s.interp.schema?.kind !== 'dense') {
          head.append(el('span', { class: 'badge', title: 'rows in this record' }, `len ${fmtInt(rec.shape[0] ?? rec.length)}`));
        }
        if (err) tile.classList.add('bad');
        tile.append(body);
      });
      frag.append(tile);
      // Keep the page responsive while big records are summarized.
      if (performance.now() - slice > 12) {
        await yieldToBrowser();
        if (token !== this.token) return null;
        slice = performance.now();
      }
    }
    for (const url of this.shownUrls ?? []) URL.revokeObjectURL(url);
    this.shownUrls = this.urls;
    this.urls = [];
    this.root.replaceChildren(frag);
    // Sparklines need their laid-out size: read every size first, then draw.
    const sizes = sparks.map(([c]) => [c.clientWidth, c.clientHeight]);
    sparks.forEach(([c, values, st], i) => { drawSparkline(c, values, st, sizes[i]); });
    this.root.dataset.key = key;
    this.root.removeAttribute('aria-busy');
    if (highlight != null) this.root.querySelector('.tile.hl')?.scrollIntoView({ block: 'nearest' });
    const notes = looks.map((l, k) => (l.mapping?.note ? { stream: this.streams[k].label, note: l.mapping.note } : null)).filter((x) => x !== null);
    const errors = per.flatMap((p, si) => p.errors.map((e, k) => (e ? { stream: si, index: indices[k], error: e } : null)).filter((x) => x !== null));
    const withImages = looks.filter((l) => l.mapping?.adjustable);
    const info = {
      key, indices, ms: performance.now() - t0, fetchMs, renderMs: performance.now() - fetched, notes, errors,
      contrast: { images: withImages.length > 0, stretched: withImages.some((l) => l.mapping?.stretched) },
    };
    this.hooks.onRendered(info);
    return info;
  }

  /**
   * One stream's part of a tile. `compact` for the streams after the first.
   * @param {Stream} s
   * @param {Rec | null} rec
   * @param {any} err  why the record could not be read (then `rec` is null)
   * @param {ImageSpec | null} spec
   * @param {Mapping | null} mapping  (set when the page has images)
   * @param {boolean} compact
   * @param {[HTMLCanvasElement, ArrayLike<number>, Stats][]} sparks  sparklines to draw once laid out
   */
  #body(s, rec, err, spec, mapping, compact, sparks) {
    const box = el('div', { class: compact ? 'tile-stream' : 'tile-main' });
    if (compact) box.append(el('span', { class: 'stream-name', title: s.label }, s.short ?? s.label));
    if (err) {
      box.append(el('div', { class: 'tile-error', title: err.message }, el('strong', {}, err.code === 'LOADERX_CORRUPT' ? 'corrupt' : 'unreadable'), el('span', {}, err.message)));
      return box;
    }
    if (!rec) return box;
    const interp = s.interp;
    if (interp.schema?.media) {
      // A store of encoded images: the browser decodes each record.
      const frame = el('div', { class: compact ? 'tile-img small' : 'tile-img checker' });
      const img = encodedImage(/** @type {Uint8Array} */ (rec), this.urls, (message) => {
        frame.replaceWith(el('div', { class: 'tile-error', title: message }, el('strong', {}, 'undecodable'), el('span', {}, message)));
        box.closest('.tile')?.classList.add('bad');
      }, 'tile-picture');
      frame.append(img);
      box.append(frame);
      return box;
    }
    if (spec) {
      const canvas = el('canvas', { class: 'tile-canvas', title: `${fmtShape(interp.shapeOf(rec))} ${interp.dt.name}` });
      drawImage(canvas, interp.numbers(rec), spec, /** @type {Mapping} */ (mapping));
      const big = spec.w > 160 || spec.h > 160;
      canvas.classList.toggle('smooth', big);
      box.append(el('div', { class: compact ? 'tile-img small' : 'tile-img checker' }, canvas));
      return box;
    }
    const n = interp.count(rec);
    if (n === 1) {
      box.append(el('div', { class: compact ? 'scalar small' : 'scalar' }, interp.format(rec, 0)));
      return box;
    }
    if (compact) {
      box.append(el('div', { class: 'preview small' }, previewText(interp, rec, 4)));
      return box;
    }
    box.append(el('div', { class: 'preview' }, n ? previewText(interp, rec, 8) : '(empty)'));
    if (interp.numeric && n) {
      const values = interp.numbers(rec);
      const st = statsOf([values]);
      const canvas = el('canvas', { class: 'spark' });
      sparks.push([canvas, values, st]);
      box.append(canvas, el('div', { class: 'mmm' },
        el('span', {}, el('em', {}, 'min '), fmtNum(st.min)),
        el('span', {}, el('em', {}, 'max '), fmtNum(st.max)),
        el('span', {}, el('em', {}, 'mean '), fmtNum(st.mean))));
    }
    return box;
  }
}
