// The overview of the open store: schema, record count, sizes, compression, reclaimable bytes,
// dictionary, where decoding runs, a full verify on request, and for ragged (or schemaless)
// stores the length of every record as a histogram.
import { $, el, fmtBytes, fmtInt, fmtShape, fmtNum, fmtStat, yieldToBrowser } from './util.js';
import { drawHistogram, histogramOf } from './render.js';

/** @typedef {import('../src/browser.js').Schema} Schema */
/** @typedef {import('../src/browser.js').Store} Store */
/** @typedef {import('./open.js').Stream} Stream */

/** Records per lengths() call when the lengths of the whole store are read. */
const LENGTHS_CHUNK = 65536;

/**
 * A card of the overview; `k` and `v` go to the value's data-k and data-v (for tests).
 * @param {string} title
 * @param {string | Node} value
 * @param {{k?: string, v?: unknown, sub?: string | null, wide?: boolean, extra?: Node | null, text?: boolean}} [options]
 */
function card(title, value, { k, v, sub = null, wide = false, extra = null, text = false } = {}) {
  return el('section', { class: `card${wide ? ' wide' : ''}` },
    el('h3', {}, title),
    el('div', { class: `card-value${text ? ' text' : ''}`, dataset: k ? { k, v: String(v ?? value) } : {} }, value),
    sub ? el('div', { class: 'card-sub' }, sub) : null,
    extra);
}

/**
 * Unit of a ragged record's length: rows of the item shape, elements, or bytes.
 * @param {Schema | null} schema
 * @returns {{unit: string, per: number} | null}  null for dense stores
 */
export function lengthUnit(schema) {
  if (!schema) return { unit: 'bytes', per: 1 };
  if (schema.kind !== 'ragged') return null;
  return { unit: schema.itemShape.length ? 'rows' : 'elements', per: schema.itemBytes || 1 };
}

export class Overview {
  /**
   * @param {HTMLElement} root  the cards
   * @param {HTMLElement} lengthsRoot  the record lengths (ragged and schemaless stores)
   * @param {{onError: (e: any, context: string) => void, onOpenRecord: (index: number) => void}} hooks
   */
  constructor(root, lengthsRoot, { onError, onOpenRecord }) {
    this.root = root;
    this.lengthsRoot = lengthsRoot;
    this.hooks = { onError, onOpenRecord };
    this.token = 0;
  }

  /** Empties the overview (a store is opening; `show` fills it in). */
  clear() {
    this.token++;
    this.root.replaceChildren();
    this.lengthsRoot.hidden = true;
  }

  /**
   * Shows `entry` ({store, label, interp}); stats, lengths and verify fill in as they arrive.
   * @param {Stream} entry
   */
  show(entry) {
    const token = ++this.token;
    const { store, interp } = entry;
    const s = store.schema;
    const dt = interp.dt;
    const shapeText = !s ? 'per record' : s.kind === 'ragged' ? `n × ${fmtShape(s.itemShape)}`.replace(' × scalar', ' (variable)') : fmtShape(s.itemShape);
    /** @type {[name: string, value: string, note: string | null, raw: string][]} */
    const schemaRows = s
      ? [['kind', s.kind, s.kind === 'ragged' ? 'records of different lengths' : null, s.kind],
        ['dtype', s.dtype, dt.name, s.dtype],
        ['item shape', shapeText, null, JSON.stringify(s.itemShape)],
        ['codec', s.codec ?? 'unknown', null, s.codec ?? ''],
        ...(s.media ? [/** @type {[string, string, string | null, string]} */ (['media', s.media, 'encoded images, shown as pictures', s.media])] : [])]
      : [['kind', 'no schema', 'no schema.msgpack: records are plain bytes', 'none'], ['dtype', 'bytes', null, ''], ['item shape', shapeText, null, ''], ['codec', '–', null, '']];
    const schemaCard = el('section', { class: 'card schema' }, el('h3', {}, 'Schema'),
      el('dl', {}, schemaRows.map(([name, value, note, raw]) => [
        el('dt', {}, name),
        el('dd', { dataset: { k: name.replace(' ', '-'), v: raw } }, value, note ? el('span', { class: 'dim' }, ` ${note}`) : null),
      ])));
    const pending = (/** @type {string} */ t) => el('span', { class: 'dim' }, t);
    const threaded = store.threaded;
    const decoding = card('Decoding', threaded ? 'Worker, threaded' : 'Worker', {
      k: 'decoding', v: threaded ? 'threaded' : 'worker', text: true,
      sub: threaded
        ? `Web Worker with the threaded wasm build (${navigator.hardwareConcurrency || 2} threads); the page is cross-origin isolated`
        : `Web Worker with the plain wasm build${globalThis.crossOriginIsolated ? '' : '; serve the page with COOP/COEP headers for the threaded build'}`,
    });
    const cards = {
      records: card('Records', fmtInt(store.length), { k: 'records', v: store.length, sub: storesLine(store) }),
      disk: card('Files', pending('…'), { k: 'apparent-bytes', v: '' }),
      ratio: card('Compression', pending('…'), { k: 'compression', v: '' }),
      reclaim: card('Reclaimable', pending('…'), { k: 'reclaimable', v: '' }),
      sums: card('Checksums', pending('…'), { k: 'checksums', v: '' }),
      dict: card('Dictionary', store.hasDict ? 'yes' : 'none', { k: 'dict', v: store.hasDict ? 'yes' : 'no', sub: store.hasDict ? 'records are compressed with a trained zstd dictionary' : 'no trained zstd dictionary' }),
    };
    const verifyBtn = el('button', { class: 'btn small', type: 'button' }, 'Verify all records');
    const verifyOut = el('div', { class: 'card-sub verify-out', dataset: { k: 'verify' } }, 'checks every record against its checksum, or decodes it, and checks its length and bounds');
    const verifyCard = el('section', { class: 'card integrity' }, el('h3', {}, 'Integrity'), el('div', { class: 'card-value' }, verifyBtn), verifyOut);
    verifyBtn.onclick = () => this.#verify(token, store, verifyBtn, verifyOut);
    this.root.replaceChildren(cards.records, schemaCard, cards.disk, cards.ratio, cards.reclaim, cards.dict, cards.sums, decoding, verifyCard);
    store.checksums().then((c) => {
      if (token !== this.token) return;
      const next = c.present
        ? card('Checksums', `${fmtInt(c.covered)} of ${fmtInt(c.total)}`, {
          k: 'checksums', v: `${c.covered}/${c.total}`,
          sub: c.digest ? 'records covered by a checksum' : 'records covered by a checksum (the rest read unchecked; loaderx checksum add covers them)',
          extra: c.digest ? el('div', { class: 'card-sub digest', title: 'content digest' }, `content digest ${c.digest}`) : null,
        })
        : card('Checksums', 'none', { k: 'checksums', v: `0/${c.total}`, sub: 'no checksums.lx: written by loaderx 0.9.11 or an older loaderx (loaderx checksum add adds them)' });
      cards.sums.replaceWith(next);
      cards.sums = next;
    }, (e) => {
      if (token !== this.token) return;
      $('.card-value', HTMLElement, cards.sums).replaceChildren(pending('unavailable'));
      this.hooks.onError(e, 'Reading the checksums');
    });

    /** Puts `next` in place of card `name`. @param {'disk' | 'ratio' | 'reclaim'} name @param {HTMLElement} next */
    const swap = (name, next) => {
      cards[name].replaceWith(next);
      cards[name] = next;
    };
    store.stats().then((st) => {
      if (token !== this.token) return;
      const files = Object.entries(st.fileBytes).filter(([, n]) => n > 0)
        .map(([f, n]) => /** @type {[string, number, number]} */ ([f, n, st.usedFileBytes[f] ?? n]));
      const used = st.usedBytes;
      // Writers preallocate meta.zr (256 MiB) and each chunk (4 GiB) as sparse files: their
      // apparent size says little about the space taken, so the bytes used lead.
      const sparse = st.apparentBytes > used;
      const apparent = el('span', { dataset: { k: 'apparent-bytes', v: String(st.apparentBytes) } }, fmtBytes(st.apparentBytes));
      swap('disk', card('Size', fmtBytes(used), {
        k: 'used-bytes', v: used,
        sub: null,
        extra: el('div', { class: 'card-sub' },
          `bytes used in ${files.length} file${files.length === 1 ? '' : 's'}; `,
          sparse ? ['apparent size ', apparent, ' (the files are preallocated, sparse)'] : ['apparent size ', apparent],
          el('details', { class: 'files' }, el('summary', {}, 'files'),
            el('table', {}, el('tr', {}, el('th', {}, 'file'), el('th', {}, 'used'), el('th', {}, 'apparent')),
              files.map(([f, n, u]) => el('tr', {}, el('td', {}, f),
                el('td', { title: `${fmtInt(u)} bytes` }, fmtBytes(u)),
                el('td', { title: `${fmtInt(n)} bytes` }, fmtBytes(n))))))),
      }));
      swap('ratio', card('Compression', `${st.compressionRatio.toFixed(2)}×`, {
        k: 'compression', v: st.compressionRatio,
        sub: `${fmtBytes(st.logicalBytes)} decoded in ${fmtBytes(st.liveBytes)} stored`,
      }));
      const pct = st.chunkBytes ? (100 * st.reclaimable) / st.chunkBytes : 0;
      swap('reclaim', card('Reclaimable', fmtBytes(st.reclaimable), {
        k: 'reclaimable', v: st.reclaimable,
        sub: st.reclaimable ? `${pct.toFixed(1)}% of the chunk data belongs to deleted or replaced records; ZRecord.compact() frees it` : 'no dead bytes in the chunks',
      }));
    }, (e) => {
      if (token !== this.token) return;
      for (const c of [cards.disk, cards.ratio, cards.reclaim]) $('.card-value', HTMLElement, c).replaceChildren(pending('unavailable'));
      this.hooks.onError(e, 'Reading the store statistics');
    });

    const lu = lengthUnit(s);
    this.lengthsRoot.hidden = !lu;
    if (lu) this.#lengths(token, store, lu);
  }

  /**
   * @param {number} token
   * @param {Store} store
   * @param {HTMLButtonElement} btn
   * @param {HTMLElement} out
   */
  async #verify(token, store, btn, out) {
    btn.disabled = true;
    const bar = el('progress', { max: '1', value: '0' });
    out.replaceChildren(bar);
    try {
      const r = await store.verify({ onProgress: (d, t) => { bar.max = t || 1; bar.value = d; } });
      if (token !== this.token) return;
      const badCount = r.bad.length + (r.unlisted ?? 0);
      out.dataset.v = r.ok ? 'ok' : `bad:${badCount}`;
      const c = r.checksums;
      const sums = el('div', { class: 'dim', dataset: { k: 'verified', v: `${c.verified}/${r.checked}` } },
        `checksums: ${fmtInt(c.verified)} verified, ${fmtInt(c.mismatched)} mismatched, ${fmtInt(c.uncovered)} without one`
        + (c.unverified ? `, ${fmtInt(c.unverified)} unverified (changed by another writer since)` : ''));
      if (r.ok) {
        out.replaceChildren(el('span', { class: 'ok' }, `✓ all ${fmtInt(r.checked)} records decode and check out`), sums);
      } else {
        const links = r.bad.slice(0, 12).map((b) => el('a', { href: '#', title: b.message, onclick: (ev) => { ev.preventDefault(); this.hooks.onOpenRecord(b.index); } }, `#${b.index}`));
        out.replaceChildren(el('span', { class: 'bad-text' }, `✕ ${fmtInt(badCount)} of ${fmtInt(r.checked)} records are bad: `), ...links.flatMap((a, i) => (i ? [', ', a] : [a])), r.bad.length > 12 ? ' …' : '', sums);
      }
    } catch (e) {
      if (token !== this.token) return;
      out.replaceChildren(el('span', { class: 'bad-text' }, 'verify failed'));
      this.hooks.onError(e, 'Verifying');
    } finally {
      btn.disabled = false;
    }
  }

  /**
   * Reads the length of every record in chunks and draws their histogram.
   * @param {number} token
   * @param {Store} store
   * @param {{unit: string, per: number}} lengthUnit
   */
  async #lengths(token, store, { unit, per }) {
    const n = store.length;
    const canvas = el('canvas', { class: 'hist' });
    const tip = el('div', { class: 'hist-tip' });
    const summary = el('div', { class: 'lengths-summary', dataset: { k: 'lengths' } }, n ? `reading lengths… 0 / ${fmtInt(n)}` : 'no records');
    this.lengthsRoot.replaceChildren(el('h3', {}, `Record lengths (${unit})`), summary, canvas, tip);
    if (!n) return;
    const all = new Float64Array(n);
    let failed = 0;
    for (let start = 0; start < n; start += LENGTHS_CHUNK) {
      const count = Math.min(LENGTHS_CHUNK, n - start);
      const idx = new Array(count);
      for (let k = 0; k < count; k++) idx[k] = start + k;
      try {
        const got = await store.lengths(idx);
        for (let k = 0; k < count; k++) all[start + k] = got[k] / per;
      } catch {
        if (token !== this.token) return;
        failed += count;
        all.fill(NaN, start, start + count);
      }
      if (token !== this.token) return;
      summary.textContent = `reading lengths… ${fmtInt(start + count)} / ${fmtInt(n)}`;
      await yieldToBrowser();
    }
    let min = Infinity;
    let max = -Infinity;
    let sum = 0;
    let ok = 0;
    for (const v of all) {
      if (Number.isNaN(v)) continue;
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
      ok++;
    }
    if (!ok) {
      summary.textContent = 'the lengths could not be read';
      return;
    }
    const mean = sum / ok;
    summary.replaceChildren(...[
      el('span', {}, el('em', {}, 'min '), fmtNum(min)),
      el('span', {}, el('em', {}, 'max '), fmtNum(max)),
      el('span', {}, el('em', {}, 'mean '), fmtStat(mean)),
      el('span', {}, el('em', {}, 'total '), `${fmtInt(sum)} ${unit}`),
      failed ? el('span', { class: 'bad-text' }, `${fmtInt(failed)} records unreadable`) : null,
    ].filter((x) => x !== null));
    summary.dataset.v = JSON.stringify({ min, max, mean, total: sum });
    this.lengths = all;
    const hist = histogramOf([{ values: all }], { lo: min, hi: max, integer: true, bins: 48 });
    drawHistogram(canvas, hist, { tip, unit: 'records' });
  }
}

/**
 * The records card's line: the format version, and for a manifest how many stores it reads as
 * one.
 * @param {any} store
 */
export function storesLine(store) {
  const n = Array.isArray(store.stores) ? store.stores.length : 0;
  const format = `format v${store.header.version}`;
  return Array.isArray(store.stores) ? `${format} · one dataset read from ${n} store${n === 1 ? '' : 's'} (manifest)` : format;
}
