// The detail view of one record, for every open stream: the full values in a virtualized list
// (only the visible rows are in the DOM), a histogram, statistics, and for images a zoomable
// nearest-neighbour view with the coordinates and value of the pixel under the cursor.
import { el, fmtInt, fmtNum, fmtShape, fmtStat, perFrame } from './util.js';
import { drawHistogram, drawImage, encodedImage, histogramOf, imageMapping, imageSpec, pixelIndex, rowIndex, rowLayout, statsOf } from './render.js';
import { describeError } from './open.js';
import { $ } from './util.js';

/** @typedef {import('./render.js').Interp} Interp */
/** @typedef {import('./render.js').Rec} Rec */
/** @typedef {import('./render.js').ImageSpec} ImageSpec */
/** @typedef {import('./render.js').Mapping} Mapping */
/** @typedef {import('./render.js').NumberArray} NumberArray */
/** @typedef {import('./open.js').Stream} Stream */

const ROW_H = 22;
const OVERSCAN = 8;
const CHANNELS = ['R', 'G', 'B', 'A'];
const CHANNEL_COLORS = ['#e5484d', '#30a46c', '#3e63dd', '#8b8d98'];
const MAX_ZOOM = 64;
/** Tallest scrolling spacer, in CSS pixels (browsers cap element heights near 16-33 million). */
const MAX_SCROLL = 4_000_000;
/** Largest side of the zoomed stage, in CSS pixels. */
const MAX_STAGE = 16384;

/**
 * A list of a record's values with only the visible rows in the DOM. Lists taller than browsers
 * allow (a 1 MiB uint8 record has a million rows) scroll a shorter spacer proportionally.
 */
class ValueList {
  /**
   * @param {Interp} interp
   * @param {Rec} rec
   */
  constructor(interp, rec) {
    this.interp = interp;
    this.rec = rec;
    this.layout = rowLayout(interp.shapeOf(rec));
    this.marked = -1;
    this.virtualHeight = this.layout.rows * ROW_H;
    this.root = el('div', { class: 'vlist', tabindex: '0', dataset: { rows: String(this.layout.rows) } });
    this.spacer = el('div', { class: 'vlist-spacer', style: { height: `${Math.min(this.virtualHeight, MAX_SCROLL)}px` } });
    // Short lists take only the room they need (and a sideways scrollbar's, for wide rows).
    if (this.layout.rows < 14) this.root.style.height = 'auto';
    this.root.append(this.spacer);
    this.root.addEventListener('scroll', perFrame(() => this.render()));
    this.drawn = '';
  }

  /** Real scroll range and virtual range (they differ only for very long lists). */
  #ranges() {
    const view = this.root.clientHeight || 300;
    return { view, real: Math.max(0, Math.min(this.virtualHeight, MAX_SCROLL) - view), virt: Math.max(0, this.virtualHeight - view) };
  }

  render(force = false) {
    const { rows, cols, lead, total } = this.layout;
    const { view, real, virt } = this.#ranges();
    const top = this.root.scrollTop;
    const virtTop = real > 0 ? (top / real) * virt : 0;
    const first = Math.max(0, Math.floor(virtTop / ROW_H) - OVERSCAN);
    const last = Math.min(rows, Math.ceil((virtTop + view) / ROW_H) + OVERSCAN);
    const key = `${first}:${last}:${Math.round(top)}`;
    if (!force && key === this.drawn) return;
    this.drawn = key;
    const frag = document.createDocumentFragment();
    for (let r = first; r < last; r++) {
      const cells = [];
      for (let c = 0; c < cols; c++) {
        const e = r * cols + c;
        if (e < total) cells.push(el('span', { class: 'vv' }, this.interp.format(this.rec, e)));
      }
      const y = top + r * ROW_H - virtTop;
      frag.append(el('div', { class: `vrow${r === this.marked ? ' marked' : ''}${r % 2 ? ' odd' : ''}`, style: { top: `${y}px` }, dataset: { row: String(r) } },
        el('span', { class: 'vi' }, rowIndex(lead, r)), ...cells));
    }
    this.spacer.replaceChildren(frag);
  }

  /**
   * Scrolls row `r` into the middle and marks it.
   * @param {number} r
   */
  reveal(r) {
    this.marked = r;
    const { view, real, virt } = this.#ranges();
    const virtTop = Math.max(0, Math.min(virt, r * ROW_H - view / 2 + ROW_H / 2));
    this.root.scrollTop = virt > 0 ? (virtTop / virt) * real : 0;
    this.render(true);
  }
}

/** A zoomable, pixelated view of an image record with a readout of the pixel under the cursor. */
class ZoomView {
  /**
   * @param {Interp} interp
   * @param {Rec} rec
   * @param {ImageSpec} spec
   * @param {(contrast: boolean | null) => Mapping} mappingFor  the mapping for an auto-contrast choice
   * @param {{onPick: (x: number, y: number) => void, contrast: boolean | null, onContrast: (on: boolean) => void}} hooks
   *   a click on pixel (x, y); the auto-contrast choice, and a click on its toggle
   */
  constructor(interp, rec, spec, mappingFor, { onPick, contrast, onContrast }) {
    this.interp = interp;
    this.rec = rec;
    this.spec = spec;
    this.mappingFor = mappingFor;
    this.canvas = el('canvas', { class: 'zoom-canvas' });
    this.note = el('span', { class: 'dim note' });
    this.contrastBtn = el('button', { class: 'btn small toggle', type: 'button', title: 'Stretch the values to black–white (min–max over this record)' },
      'Auto-contrast ', el('span', { class: 'toggle-state' }));
    this.contrastBtn.addEventListener('click', () => {
      const on = this.contrastBtn.dataset.state !== 'on';
      this.setContrast(on);
      onContrast(on);
    });
    this.setContrast(contrast);
    this.cursor = el('div', { class: 'pix-cursor', hidden: true });
    this.stage = el('div', { class: 'zoom-stage' }, this.canvas, this.cursor);
    this.wrap = el('div', { class: 'zoom-wrap checker' }, this.stage);
    this.level = el('span', { class: 'zoom-level' });
    this.readout = el('div', { class: 'pix-readout', dataset: { k: 'pixel' } }, 'move over the image to read pixel values; click a pixel to find it in the list');
    const btn = (/** @type {string} */ label, /** @type {string} */ title, /** @type {() => void} */ fn) => el('button', { class: 'btn small', type: 'button', title, onclick: fn }, label);
    const tools = el('div', { class: 'zoom-tools' },
      btn('−', 'Zoom out', () => this.setZoom(this.z / 2)),
      this.level,
      btn('+', 'Zoom in', () => this.setZoom(this.z * 2)),
      btn('Fit', 'Fit the view', () => this.setZoom(this.fit())),
      btn('1:1', 'One image pixel per screen pixel', () => this.setZoom(1)),
      this.contrastBtn,
      this.note);
    this.root = el('div', { class: 'd-image' }, tools, this.wrap, this.readout);
    this.z = 1;
    this.stage.addEventListener('mousemove', (ev) => this.#hover(ev));
    this.stage.addEventListener('mouseleave', () => { this.cursor.hidden = true; });
    this.stage.addEventListener('click', (ev) => {
      const p = this.#pixelAt(ev);
      if (p) onPick(p.x, p.y);
    });
    this.wrap.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      this.setZoom(this.z * (ev.deltaY < 0 ? 1.25 : 0.8), ev);
    }, { passive: false });
  }

  /**
   * Draws the image with auto-contrast on, off, or by its range (null).
   * @param {boolean | null} contrast
   */
  setContrast(contrast) {
    const mapping = this.mappingFor(contrast);
    drawImage(this.canvas, this.interp.numbers(this.rec), this.spec, mapping);
    const on = Boolean(mapping.stretched);
    this.contrastBtn.hidden = !mapping.adjustable;
    this.contrastBtn.setAttribute('aria-pressed', String(on));
    this.contrastBtn.dataset.state = on ? 'on' : 'off';
    $('.toggle-state', HTMLElement, this.contrastBtn).textContent = on ? 'on' : 'off';
    this.note.textContent = mapping.note ?? '';
  }

  /** The largest zoom that shows the whole image in the view (whole numbers when above 1). */
  fit() {
    const box = Math.min(this.wrap.clientWidth || 480, 520) - 2;
    const z = Math.min(box / this.spec.w, 520 / this.spec.h);
    return z >= 1 ? Math.floor(z) : z;
  }

  /**
   * @param {number} z
   * @param {{clientX: number, clientY: number} | null} [anchor]  the point that stays put (the cursor)
   */
  setZoom(z, anchor = null) {
    const { w, h } = this.spec;
    const nz = Math.min(MAX_ZOOM, MAX_STAGE / Math.max(w, h), Math.max(z, 1 / 16));
    let ax = 0;
    let ay = 0;
    let fx = 0;
    let fy = 0;
    if (anchor) {
      const r = this.wrap.getBoundingClientRect();
      ax = anchor.clientX - r.left;
      ay = anchor.clientY - r.top;
      fx = (this.wrap.scrollLeft + ax) / this.z;
      fy = (this.wrap.scrollTop + ay) / this.z;
    }
    this.z = nz;
    this.stage.style.width = `${w * nz}px`;
    this.stage.style.height = `${h * nz}px`;
    this.canvas.classList.toggle('smooth', nz < 1);
    this.level.textContent = nz >= 1 ? `${Number(nz.toFixed(2))}×` : `1/${Number((1 / nz).toFixed(1))}`;
    if (anchor) {
      this.wrap.scrollLeft = fx * nz - ax;
      this.wrap.scrollTop = fy * nz - ay;
    }
    this.cursor.hidden = true;
  }

  /** @param {MouseEvent} ev */
  #pixelAt(ev) {
    const r = this.stage.getBoundingClientRect();
    const x = Math.floor(((ev.clientX - r.left) / r.width) * this.spec.w);
    const y = Math.floor(((ev.clientY - r.top) / r.height) * this.spec.h);
    if (x < 0 || y < 0 || x >= this.spec.w || y >= this.spec.h) return null;
    return { x, y };
  }

  /** @param {MouseEvent} ev */
  #hover(ev) {
    const p = this.#pixelAt(ev);
    if (!p) return;
    const { c } = this.spec;
    const values = [];
    for (let ch = 0; ch < c; ch++) values.push(this.interp.format(this.rec, pixelIndex(this.spec, p.x, p.y, ch)));
    const shown = c === 1 ? values[0] : values.map((v, ch) => `${CHANNELS[ch]} ${v}`).join('  ');
    this.readout.dataset.x = String(p.x);
    this.readout.dataset.y = String(p.y);
    this.readout.dataset.value = values.join(',');
    this.readout.replaceChildren(el('span', { class: 'xy' }, `x ${p.x}, y ${p.y}`), el('span', { class: 'val' }, shown));
    if (this.z >= 3) {
      Object.assign(this.cursor.style, { left: `${p.x * this.z}px`, top: `${p.y * this.z}px`, width: `${this.z}px`, height: `${this.z}px` });
      this.cursor.hidden = false;
    }
  }
}

export class Detail {
  /**
   * @param {HTMLDialogElement} dialog
   * @param {{onClose: () => void, onMove: (index: number) => void, contrast: () => boolean | null,
   *   onContrast: (on: boolean) => void}} hooks  `contrast` tells the auto-contrast choice
   */
  constructor(dialog, hooks) {
    this.dialog = dialog;
    this.hooks = hooks;
    this.body = $('.detail-body', HTMLElement, dialog);
    this.title = $('.detail-index', HTMLElement, dialog);
    this.sub = $('.detail-sub', HTMLElement, dialog);
    this.prev = $('.detail-prev', HTMLButtonElement, dialog);
    this.next = $('.detail-next', HTMLButtonElement, dialog);
    /** @type {Stream[]} */
    this.streams = [];
    /** @type {number | null} */
    this.index = null;
    this.token = 0;
    this.prev.onclick = () => this.move(-1);
    this.next.onclick = () => this.move(1);
    $('.detail-close', HTMLButtonElement, dialog).onclick = () => dialog.close();
    dialog.addEventListener('close', () => {
      this.index = null;
      this.token++;
      this.body.replaceChildren();
      hooks.onClose();
    });
    // A click on the backdrop (outside the panel) closes.
    dialog.addEventListener('click', (ev) => { if (ev.target === dialog) dialog.close(); });
    dialog.addEventListener('keydown', (ev) => {
      if (ev.target instanceof Element && ev.target.closest('input, select, textarea')) return;
      if (ev.key === 'ArrowLeft') { ev.preventDefault(); this.move(-1); }
      if (ev.key === 'ArrowRight') { ev.preventDefault(); this.move(1); }
    });
  }

  /** @param {Stream[]} streams  the main store first */
  setStreams(streams) {
    this.streams = streams;
    if (this.dialog.open) this.dialog.close();
  }

  get isOpen() {
    return this.dialog.open;
  }

  /** @param {number} delta */
  move(delta) {
    if (this.index == null) return;
    const n = this.streams[0]?.store.length ?? 0;
    const i = this.index + delta;
    if (i >= 0 && i < n) {
      this.open(i);
      this.hooks.onMove(i);
    }
  }

  /**
   * Shows record `index` of every stream.
   * @param {number} index
   */
  async open(index) {
    const token = ++this.token;
    this.index = index;
    const n = this.streams[0].store.length;
    this.title.textContent = fmtInt(index);
    this.sub.textContent = `of ${fmtInt(n)}`;
    this.dialog.dataset.index = String(index);
    this.prev.disabled = index <= 0;
    this.next.disabled = index >= n - 1;
    if (!this.dialog.open) this.dialog.showModal();
    this.dialog.setAttribute('aria-busy', 'true');
    /** @type {{rec?: Rec, error?: any}[]} */
    const got = await Promise.all(this.streams.map((s) => s.store.get(index).then((rec) => ({ rec }), (error) => ({ error }))));
    if (token !== this.token) return;
    const sections = this.streams.map((s, k) => this.#section(s, got[k]));
    this.body.replaceChildren(...sections.map((x) => x.root));
    for (const x of sections) x.after?.();
    this.dialog.removeAttribute('aria-busy');
    this.dialog.dataset.loaded = String(index);
  }

  /**
   * An encoded image record, decoded by the browser: the picture, its format, size and bytes.
   * @param {HTMLElement} root
   * @param {HTMLElement} head
   * @param {Uint8Array} bytes
   */
  #picture(root, head, bytes) {
    for (const url of this.urls ?? []) URL.revokeObjectURL(url);
    this.urls = [];
    const info = el('span', { class: 'dim', dataset: { k: 'picture' } }, ` ${fmtInt(bytes.length)} bytes`);
    head.append(info);
    const img = encodedImage(bytes, this.urls, (message) => {
      img.replaceWith(el('div', { class: 'd-error', role: 'alert' }, el('strong', {}, 'Undecodable image'), el('p', {}, message)));
    }, 'd-picture');
    img.addEventListener('load', () => {
      const mime = bytes[0] === 0xff ? 'JPEG' : bytes[0] === 0x89 ? 'PNG' : 'WebP';
      info.textContent = ` ${mime} · ${img.naturalWidth}×${img.naturalHeight} · ${fmtInt(bytes.length)} bytes`;
      info.dataset.v = JSON.stringify({ width: img.naturalWidth, height: img.naturalHeight });
    }, { once: true });
    root.append(el('div', { class: 'd-grid single' }, img));
    return { root };
  }

  /**
   * @param {Stream} s
   * @param {{rec?: Rec, error?: any}} got  the record, or why it could not be read
   */
  #section(s, got) {
    const { error } = got;
    const interp = s.interp;
    const head = el('h3', {}, s.label);
    const root = el('section', { class: 'd-stream' }, head);
    if (error) {
      const d = describeError(error);
      root.append(el('div', { class: 'd-error', role: 'alert' }, el('strong', {}, d.title), el('p', {}, d.message), d.hint ? el('p', { class: 'dim' }, d.hint) : null));
      return { root };
    }
    const rec = /** @type {Rec} */ (got.rec);
    if (interp.schema?.media) return this.#picture(root, head, /** @type {Uint8Array} */ (rec));
    const shape = interp.shapeOf(rec);
    const count = interp.count(rec);
    head.append(el('span', { class: 'dim' }, ` ${fmtShape(shape)} · ${interp.dt.name} · ${fmtInt(count)} value${count === 1 ? '' : 's'}`));
    const spec = imageSpec(shape, interp);
    const numbers = interp.numeric ? interp.numbers(rec) : null;
    const st = numbers ? statsOf([numbers]) : null;

    const side = el('div', { class: 'd-side' });
    if (st) {
      side.append(el('div', { class: 'd-stats', dataset: { k: 'stats', v: JSON.stringify({ min: st.min, max: st.max, mean: st.mean }) } },
        el('span', {}, el('em', {}, 'min '), fmtNum(st.min)),
        el('span', {}, el('em', {}, 'max '), fmtNum(st.max)),
        el('span', {}, el('em', {}, 'mean '), fmtStat(st.mean)),
        st.nan ? el('span', {}, el('em', {}, 'NaN/inf '), fmtInt(st.nan)) : null));
    } else {
      side.append(el('div', { class: 'd-stats dim' }, `no numeric statistics for ${interp.dt.name} values`));
    }

    let histCanvas = null;
    let hist = null;
    const tip = el('div', { class: 'hist-tip' });
    if (numbers && st?.count && count > 1) {
      const integer = ['u', 'i', 'b', 'raw'].includes(interp.dt.kind);
      const u8 = (interp.dt.kind === 'u' && interp.dt.bytes === 1) || interp.dt.kind === 'raw';
      const range = u8 && spec ? { lo: 0, hi: 255 } : { lo: st.min, hi: st.max };
      /** @type {import('./render.js').Series[]} */
      const series = spec && spec.c >= 3
        ? Array.from({ length: 3 }, (_, ch) => ({ ...channelSeries(numbers, spec, ch), color: CHANNEL_COLORS[ch], label: CHANNELS[ch] }))
        : [{ values: numbers }];
      hist = histogramOf(series, { ...range, integer, bins: 64 });
      histCanvas = el('canvas', { class: 'hist' });
      side.append(el('h4', {}, 'Histogram'), histCanvas, tip);
    }

    const list = new ValueList(interp, rec);
    const listBox = el('div', { class: 'd-values' }, el('h4', {}, `Values`, el('span', { class: 'dim' }, ` ${fmtInt(list.layout.rows)} rows${list.layout.cols > 1 ? ` of ${list.layout.cols}` : ''}`)), list.root);
    const grid = el('div', { class: 'd-grid' });
    let zoom = null;
    if (spec) {
      zoom = new ZoomView(interp, rec, spec, (contrast) => imageMapping(interp, st ?? {}, 'this record', contrast), {
        onPick: (x, y) => list.reveal(Math.floor(pixelIndex(spec, x, y, 0) / list.layout.cols)),
        contrast: this.hooks.contrast(),
        onContrast: this.hooks.onContrast,
      });
      side.append(listBox);
      grid.append(zoom.root, side);
    } else if (count === 1) {
      grid.classList.add('single');
      grid.append(el('div', { class: 'd-scalar', dataset: { k: 'scalar' } }, interp.format(rec, 0)));
    } else {
      grid.append(listBox, side);
    }
    root.append(grid);
    return {
      root,
      after: () => {
        zoom?.setZoom(zoom.fit());
        list.render(true);
        if (histCanvas) drawHistogram(histCanvas, hist, { tip, unit: 'values' });
      },
    };
  }
}

/**
 * The values of channel `ch` of an image record, for its histogram.
 * @param {NumberArray} values
 * @param {ImageSpec} spec
 * @param {number} ch
 */
function channelSeries(values, spec, ch) {
  if (spec.layout === 'chw') {
    const n = spec.h * spec.w;
    return { values: values.subarray(ch * n, (ch + 1) * n) };
  }
  return { values, offset: ch, stride: spec.c };
}
