// What a record's values mean and how they are drawn: element formatting, statistics, the image
// rule (H×W, H×W×1/3/4, or channels first), images on canvases, histograms and sparklines.
import { dtypeInfo } from '../src/browser.js';
import { fmtNum, product } from './util.js';

/** @typedef {import('../src/browser.js').Schema} Schema */
/** @typedef {import('../src/browser.js').Shaped} Rec  a record's values, with their shape */
/** @typedef {Exclude<import('../src/browser.js').TypedArray, BigInt64Array | BigUint64Array>} NumberArray */
/**
 * @typedef {object} Stats
 * @property {number | null} min  (null when no value is finite)
 * @property {number | null} max
 * @property {number | null} mean
 * @property {number} count  finite values
 * @property {number} nan  the other values
 */
/**
 * An image record: `h`×`w` pixels of `c` channels, channels last ('hwc') or first ('chw').
 * @typedef {{h: number, w: number, c: number, layout: 'hwc' | 'chw'}} ImageSpec
 */
/**
 * How values become 0..255: as they are, times `k`, or min–max over [`lo`, `hi`]. `stretched`:
 * auto-contrast made it a min–max stretch; `lowContrast`: without one the values would use
 * fewer than LOW_CONTRAST of the 256 gray levels (then auto-contrast is the default);
 * `adjustable`: auto-contrast changes something (values outside 0–255 are min–max normalized
 * either way).
 * @typedef {({mode: 'direct', note: string | null}
 *   | {mode: 'scale', k: number, note: string}
 *   | {mode: 'minmax', lo: number, hi: number, note: string})
 *   & {stretched?: boolean, lowContrast?: boolean, adjustable?: boolean}} Mapping
 */
/**
 * @typedef {object} Series  one series of a histogram's input
 * @property {ArrayLike<number>} values
 * @property {number} [stride]  take every `stride`-th value ...
 * @property {number} [offset]  ... from `offset`
 * @property {string} [color]
 * @property {string} [label]
 */
/**
 * @typedef {object} Histogram
 * @property {{counts: Float64Array, color?: string, label?: string}[]} series
 * @property {number} lo
 * @property {number} hi
 * @property {number} width  of a bin
 * @property {boolean} integer
 * @property {number} bins
 */

/** How to read the values of one store's records. */
export class Interp {
  /** @param {Schema | null} schema */
  constructor(schema) {
    this.schema = schema;
    this.dt = dtypeInfo(schema);
    this.ext = this.dt.extraDim;
    this.numeric = this.dt.numeric;
    this.big = this.dt.arrayType.startsWith('Big');
  }

  /**
   * The shape of a record's elements (its shape without the trailing extra dimension).
   * @param {Rec} rec
   * @returns {number[]}
   */
  shapeOf(rec) {
    return this.ext == null ? rec.shape : rec.shape.slice(0, -1);
  }

  /**
   * Elements in a record.
   * @param {Rec} rec
   */
  count(rec) {
    return this.ext == null ? rec.length : Math.floor(rec.length / this.ext);
  }

  /**
   * Numbers for statistics and images (BigInt arrays become Float64Array).
   * @param {Rec} rec
   * @returns {NumberArray}
   */
  numbers(rec) {
    const known = /** @type {Rec & {__numbers?: NumberArray}} */ (rec).__numbers;
    if (known) return known;
    const v = this.big ? Float64Array.from(rec, Number) : /** @type {NumberArray} */ (rec);
    Object.defineProperty(rec, '__numbers', { value: v, enumerable: false });
    return v;
  }

  /**
   * Element `i` as text.
   * @param {Rec} rec
   * @param {number} i
   * @returns {string}
   */
  format(rec, i) {
    const { kind, unit } = this.dt;
    const k = this.ext ?? 0; // set for the kinds that use it (U, S, V)
    switch (kind) {
      case 'b': return rec[i] ? 'True' : 'False';
      case 'U': {
        let s = '';
        for (let j = i * k; j < (i + 1) * k; j++) {
          const cp = /** @type {number} */ (rec[j]); // str: Uint32Array code points
          if (cp === 0) break;
          s += cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd';
        }
        return JSON.stringify(s);
      }
      case 'S': {
        let s = '';
        let end = (i + 1) * k;
        while (end > i * k && rec[end - 1] === 0) end--;
        for (let j = i * k; j < end; j++) {
          const b = /** @type {number} */ (rec[j]); // bytes: Uint8Array
          s += b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
        }
        return `b'${s}'`;
      }
      case 'V': {
        let s = '';
        for (let j = i * k; j < (i + 1) * k; j++) s += rec[j].toString(16).padStart(2, '0');
        return s.replace(/(.{8})(?=.)/g, '$1 ');
      }
      case 'c': {
        const re = rec[2 * i];
        const im = /** @type {number} */ (rec[2 * i + 1]); // complex: Float32Array or Float64Array
        return `${fmtNum(re)}${im < 0 || Object.is(im, -0) ? '−' : '+'}${fmtNum(Math.abs(im))}j`;
      }
      case 'M': return fmtDatetime(/** @type {bigint} */ (rec[i]), unit); // datetime64: BigInt64Array
      case 'm': return rec[i] === NAT ? 'NaT' : `${rec[i]} ${unit ?? ''}`.trim();
      default: return fmtNum(rec[i]);
    }
  }
}

const NAT = -(2n ** 63n);
/** @type {Record<string, number | null>} */
const UNIT_MS = { Y: null, M: null, W: 604800000, D: 86400000, h: 3600000, m: 60000, s: 1000, ms: 1 };

/**
 * @param {bigint} v
 * @param {string | null} unit
 */
function fmtDatetime(v, unit) {
  if (v === NAT) return 'NaT';
  let ms;
  const per = unit == null ? null : UNIT_MS[unit];
  if (per) ms = Number(v) * per;
  else if (unit === 'us') ms = Number(v / 1000n);
  else if (unit === 'ns') ms = Number(v / 1000000n);
  else return `${v} ${unit ?? ''}`.trim();
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return `${v} ${unit}`;
  const iso = d.toISOString();
  return unit === 'D' || unit === 'W' ? iso.slice(0, 10) : iso.replace('T', ' ').replace(/\.000Z$|Z$/, '');
}

/**
 * min, max, mean over the finite values of one or more arrays; `nan` counts the others.
 * @param {ArrayLike<number>[]} arrays
 * @returns {Stats}
 */
export function statsOf(arrays) {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let n = 0;
  let nan = 0;
  for (const a of arrays) {
    for (let i = 0; i < a.length; i++) {
      const v = a[i];
      if (Number.isNaN(v) || v === Infinity || v === -Infinity) { nan++; continue; }
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
      n++;
    }
  }
  return n ? { min, max, mean: sum / n, count: n, nan } : { min: null, max: null, mean: null, count: 0, nan };
}

/**
 * The image rule: a record looks like an image when its element shape is H×W, H×W×C or C×H×W
 * with C in {1, 3, 4}, both sides at least 4 (any size when `force`), and its values are numbers.
 * Returns `{h, w, c, layout}` ('hwc' or 'chw') or null.
 * @param {readonly number[]} shape
 * @param {Interp} interp
 * @param {boolean} [force]
 * @returns {ImageSpec | null}
 */
export function imageSpec(shape, interp, force = false) {
  if (!interp.numeric || interp.ext != null || interp.dt.kind === 'raw') return null;
  const min = force ? 1 : 4;
  const ok = (/** @type {number} */ h, /** @type {number} */ w) => h >= min && w >= min;
  if (shape.length === 2 && ok(shape[0], shape[1])) return { h: shape[0], w: shape[1], c: 1, layout: 'hwc' };
  if (shape.length === 3) {
    const [a, b, c] = shape;
    if ([1, 3, 4].includes(c) && ok(a, b)) return { h: a, w: b, c, layout: 'hwc' };
    if ([1, 3, 4].includes(a) && ok(b, c)) return { h: b, w: c, c: a, layout: 'chw' };
  }
  return null;
}

/**
 * Position of channel `ch` of pixel (x, y) in the record's values.
 * @param {ImageSpec} spec
 * @param {number} x
 * @param {number} y
 * @param {number} ch
 */
export function pixelIndex(spec, x, y, ch) {
  return spec.layout === 'chw' ? ch * spec.h * spec.w + y * spec.w + x : (y * spec.w + x) * spec.c + ch;
}

/** Gray levels (of 256) below which images count as low-contrast: auto-contrast is then on by default. */
export const LOW_CONTRAST = 64;

/**
 * How values become 0..255 for a set of image records with statistics `st` (min and max over
 * the set). Without auto-contrast: uint8 as is, bool ×255, floats in [0, 1] ×255, other values
 * within 0..255 as they are, the rest min–max normalized over the set. Auto-contrast stretches
 * min–max to black–white; `contrast` true or false asks for it or not, null (the default) turns
 * it on when the values would otherwise use fewer than LOW_CONTRAST gray levels (the digits of
 * scikit-learn, uint8 0–16, would be black squares). A set of one value is never stretched.
 * `note` says what was done (null for plain uint8).
 * @param {Interp} interp
 * @param {{min?: number | null, max?: number | null}} st
 * @param {string} [scope]
 * @param {boolean | null} [contrast]
 * @returns {Mapping}
 */
export function imageMapping(interp, st, scope = 'this page', contrast = null) {
  const fixed = fixedMapping(interp, st, scope);
  const { min: lo, max: hi } = st;
  if (lo == null || hi == null || fixed.mode === 'minmax') return { ...fixed, stretched: false, lowContrast: false, adjustable: false };
  const level = (/** @type {number} */ v) => (fixed.mode === 'scale' ? v * fixed.k : v);
  const lowContrast = Math.min(255, level(hi)) - Math.max(0, level(lo)) < LOW_CONTRAST;
  if (!(contrast ?? lowContrast) || !(hi > lo)) return { ...fixed, stretched: false, lowContrast, adjustable: hi > lo };
  return {
    mode: 'minmax', lo, hi, stretched: true, lowContrast, adjustable: true,
    note: `auto-contrast: ${interp.dt.name} values ${fmtNum(lo)}–${fmtNum(hi)} stretched to black–white over ${scope}`,
  };
}

/**
 * The mapping without auto-contrast (see imageMapping).
 * @param {Interp} interp
 * @param {{min?: number | null, max?: number | null}} st
 * @param {string} scope
 * @returns {Mapping}
 */
function fixedMapping(interp, st, scope) {
  const { kind, bytes } = interp.dt;
  if (kind === 'u' && bytes === 1) return { mode: 'direct', note: null };
  if (kind === 'b') return { mode: 'scale', k: 255, note: 'bool values: False black, True white' };
  const lo = st.min ?? 0;
  const hi = st.max ?? 0;
  if (kind === 'f' && lo >= 0 && hi <= 1) return { mode: 'scale', k: 255, note: `${interp.dt.name} values in [0, 1], scaled by 255` };
  if (lo >= 0 && hi <= 255 && (kind !== 'f' || hi > 1)) return { mode: 'direct', note: `${interp.dt.name} values within 0–255, shown as they are` };
  return {
    mode: 'minmax', lo, hi,
    note: `${interp.dt.name} values in [${fmtNum(lo)}, ${fmtNum(hi)}], min–max normalized over ${scope}`,
  };
}

/**
 * The canvas's 2D context (a canvas has one unless it was given another kind of context).
 * @param {HTMLCanvasElement} canvas
 */
function context2d(canvas) {
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('viewer: a canvas has no 2D context');
  return ctx;
}

/**
 * Draws an image record on `canvas` (resized to W×H).
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} values
 * @param {ImageSpec} spec
 * @param {Mapping} mapping
 */
export function drawImage(canvas, values, spec, mapping) {
  const { h, w, c } = spec;
  if (canvas.width !== w) canvas.width = w;
  if (canvas.height !== h) canvas.height = h;
  const ctx = context2d(canvas);
  const img = ctx.createImageData(w, h);
  const px = img.data;
  const { mode } = mapping;
  const k = mode === 'scale' ? mapping.k : mode === 'minmax' ? (mapping.hi > mapping.lo ? 255 / (mapping.hi - mapping.lo) : 0) : 1;
  const lo = mode === 'minmax' ? mapping.lo : 0;
  const map = mode === 'direct' && values instanceof Uint8Array ? null : (v) => (Number.isNaN(v) ? 0 : (v - lo) * k);
  const n = h * w;
  const chw = spec.layout === 'chw';
  for (let p = 0; p < n; p++) {
    const o = p * 4;
    for (let ch = 0; ch < c; ch++) {
      const raw = values[chw ? ch * n + p : p * c + ch];
      const v = map ? map(raw) : raw; // Uint8ClampedArray rounds and clamps
      if (c === 1) { px[o] = v; px[o + 1] = v; px[o + 2] = v; } else px[o + ch] = v;
    }
    if (c !== 4) px[o + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

/**
 * Histogram of `arrays` (each array one series, e.g. one per channel, or one for all values):
 * integer values with few levels get one bin per level, others `bins` equal bins over [lo, hi].
 * @param {Series[]} series
 * @param {{lo: number | null, hi: number | null, integer?: boolean, bins?: number}} range  null when there are no values
 * @returns {Histogram | null}
 */
export function histogramOf(series, { lo, hi, integer, bins = 64 }) {
  if (lo == null || hi == null) return null;
  let width;
  let count;
  if (integer) {
    // Whole-number bins: one per value when there are few, else `bins` bins of equal width.
    width = hi - lo + 1 <= 256 ? 1 : Math.ceil((hi - lo + 1) / bins);
    count = Math.ceil((hi - lo + 1) / width);
  } else {
    count = hi > lo ? bins : 1;
    width = hi > lo ? (hi - lo) / bins : 1;
  }
  const out = series.map(({ values, stride = 1, offset = 0, color, label }) => {
    const counts = new Float64Array(count);
    for (let i = offset; i < values.length; i += stride) {
      const v = values[i];
      if (Number.isNaN(v) || v === Infinity || v === -Infinity) continue;
      let b = Math.floor((v - lo) / width);
      if (b >= count) b = count - 1;
      if (b < 0) b = 0;
      counts[b]++;
    }
    return { counts, color, label };
  });
  return { series: out, lo, hi, width, integer: Boolean(integer), bins: count };
}

const css = (/** @type {string} */ name, /** @type {string} */ fallback) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;

/**
 * Sizes a canvas to its CSS box times devicePixelRatio; returns a context in CSS pixels.
 * @param {HTMLCanvasElement} canvas
 * @param {readonly number[] | null} [size]  the CSS box, when already measured
 */
function fitCanvas(canvas, size = null) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, size?.[0] || canvas.clientWidth || 300);
  const h = Math.max(1, size?.[1] || canvas.clientHeight || 120);
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const ctx = context2d(canvas);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w, h };
}

/**
 * The range a bin covers, as text.
 * @param {Histogram} hist
 * @param {number} b
 */
export function binLabel(hist, b) {
  if (hist.integer && hist.width === 1) return fmtNum(hist.lo + b);
  if (hist.integer) return `${fmtNum(hist.lo + b * hist.width)}–${fmtNum(Math.min(hist.hi, hist.lo + (b + 1) * hist.width - 1))}`;
  const a = hist.lo + b * hist.width;
  return `${fmtNum(a)} – ${fmtNum(a + hist.width)}`;
}

/**
 * Draws a histogram (bars for one series, outlined steps for several) with its range and peak.
 * Hovering shows the bin under the cursor in `canvas.title`-like `tip` element when given.
 * @param {HTMLCanvasElement} canvas
 * @param {Histogram | null} hist
 * @param {{tip?: HTMLElement | null, unit?: string}} [options]
 */
export function drawHistogram(canvas, hist, { tip = null, unit = 'values' } = {}) {
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.clearRect(0, 0, w, h);
  const padL = 6;
  const padR = 6;
  const padT = 16;
  const padB = 18;
  const ink = css('--muted', '#667');
  ctx.font = '11px system-ui, sans-serif';
  if (!hist?.series.length) {
    ctx.fillStyle = ink;
    ctx.fillText('no numeric values', padL, h / 2);
    return;
  }
  let peak = 0;
  for (const s of hist.series) for (const c of s.counts) if (c > peak) peak = c;
  const pw = w - padL - padR;
  const ph = h - padT - padB;
  const bw = pw / hist.bins;
  const y = (c) => padT + ph - (peak ? (c / peak) * ph : 0);
  const single = hist.series.length === 1;
  for (const s of hist.series) {
    const color = s.color || css('--accent', '#3b6ef5');
    if (single) {
      ctx.fillStyle = color;
      for (let b = 0; b < hist.bins; b++) {
        const c = s.counts[b];
        if (!c) continue;
        const top = y(c);
        ctx.fillRect(padL + b * bw, top, Math.max(1, bw - (bw > 4 ? 1 : 0)), padT + ph - top);
      }
    } else {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.globalAlpha = 0.9;
      ctx.beginPath();
      ctx.moveTo(padL, y(0));
      for (let b = 0; b < hist.bins; b++) {
        ctx.lineTo(padL + b * bw, y(s.counts[b]));
        ctx.lineTo(padL + (b + 1) * bw, y(s.counts[b]));
      }
      ctx.lineTo(padL + pw, y(0));
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
  }
  ctx.strokeStyle = css('--line', '#ccd');
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(padL, padT + ph + 0.5);
  ctx.lineTo(padL + pw, padT + ph + 0.5);
  ctx.stroke();
  ctx.fillStyle = ink;
  ctx.textBaseline = 'bottom';
  ctx.textAlign = 'left';
  ctx.fillText(fmtNum(hist.lo), padL, h - 2);
  ctx.textAlign = 'right';
  ctx.fillText(fmtNum(hist.hi), w - padR, h - 2);
  ctx.textBaseline = 'top';
  ctx.fillText(`peak ${fmtNum(peak)} ${unit}`, w - padR, 1);
  ctx.textAlign = 'left';
  if (!single) {
    let x = padL;
    for (const s of hist.series) {
      if (s.color !== undefined) ctx.fillStyle = s.color; // (undefined is ignored by the canvas anyway)
      ctx.fillText(s.label ?? '', x, 1);
      x += ctx.measureText(s.label ?? '').width + 8;
    }
  }
  if (tip) {
    canvas.onmousemove = (ev) => {
      const r = canvas.getBoundingClientRect();
      const b = Math.floor((ev.clientX - r.left - padL) / bw);
      if (b < 0 || b >= hist.bins) { tip.textContent = ''; return; }
      const counts = hist.series.map((s) => `${s.label ? `${s.label} ` : ''}${fmtNum(s.counts[b])}`).join(', ');
      tip.textContent = `${binLabel(hist, b)}: ${counts}`;
    };
    canvas.onmouseleave = () => { tip.textContent = ''; };
  }
}

/**
 * A small line of the values: through every value when they fit the width, else one continuous
 * line through each pixel column's first, lowest, highest and last value (in their order), so
 * the line keeps every column's range and never breaks into dots. Non-finite values are skipped.
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} values
 * @param {Stats} st
 * @param {readonly number[] | null} [size]
 */
export function drawSparkline(canvas, values, st, size = null) {
  const { ctx, w, h } = fitCanvas(canvas, size);
  ctx.clearRect(0, 0, w, h);
  const { min, max } = st; // both null or both numbers
  if (!values.length || min == null || max == null) return;
  const span = max - min || 1;
  const y = (/** @type {number} */ v) => h - 2 - ((v - min) / span) * (h - 4);
  ctx.strokeStyle = css('--accent', '#3b6ef5');
  ctx.lineWidth = 1;
  ctx.lineJoin = 'round';
  ctx.lineCap = 'round';
  ctx.beginPath();
  let started = false;
  const to = (/** @type {number} */ x, /** @type {number} */ v) => {
    if (started) ctx.lineTo(x, y(v));
    else { ctx.moveTo(x, y(v)); started = true; }
  };
  const finite = (/** @type {number} */ v) => !Number.isNaN(v) && v !== Infinity && v !== -Infinity;
  const n = values.length;
  if (n <= w) {
    for (let i = 0; i < n; i++) {
      if (finite(values[i])) to(n === 1 ? w / 2 : 0.5 + (i / (n - 1)) * (w - 1), values[i]);
    }
  } else {
    const cols = Math.floor(w);
    for (let x = 0; x < cols; x++) {
      const a = Math.floor((x / cols) * n);
      const b = Math.max(a + 1, Math.floor(((x + 1) / cols) * n));
      let first = NaN;
      let last = NaN;
      let lo = Infinity;
      let hi = -Infinity;
      let iLo = 0;
      let iHi = 0;
      for (let i = a; i < b; i++) {
        const v = values[i];
        if (!finite(v)) continue;
        if (Number.isNaN(first)) first = v;
        last = v;
        if (v < lo) { lo = v; iLo = i; }
        if (v > hi) { hi = v; iHi = i; }
      }
      if (lo === Infinity) continue;
      const px = x + 0.5;
      to(px, first);
      if (iLo <= iHi) { to(px, lo); to(px, hi); } else { to(px, hi); to(px, lo); }
      to(px, last);
    }
  }
  if (started) ctx.stroke();
}

/**
 * The first `max` elements as text, with an ellipsis when there are more.
 * @param {Interp} interp
 * @param {Rec} rec
 * @param {number} [max]
 */
export function previewText(interp, rec, max = 8) {
  const n = interp.count(rec);
  const parts = [];
  for (let i = 0; i < Math.min(n, max); i++) parts.push(interp.format(rec, i));
  return parts.join('  ') + (n > max ? '  …' : '');
}

/**
 * Elements of a record as rows: a row per leading index, with up to 16 trailing values each.
 * @param {number[]} shape
 */
export function rowLayout(shape) {
  const total = product(shape);
  const last = shape.length >= 2 && shape[shape.length - 1] <= 16 ? shape[shape.length - 1] : 1;
  const lead = last > 1 ? shape.slice(0, -1) : shape;
  return { rows: last ? Math.ceil(total / last) : 0, cols: last, lead, total };
}

/**
 * The multi-index of row `r` over `lead` dims, as "[a, b]".
 * @param {readonly number[]} lead
 * @param {number} r
 */
export function rowIndex(lead, r) {
  if (lead.length <= 1) return `[${r}]`;
  const idx = new Array(lead.length);
  for (let d = lead.length - 1; d >= 0; d--) {
    idx[d] = r % lead[d];
    r = Math.floor(r / lead[d]);
  }
  return `[${idx.join(', ')}]`;
}

/**
 * The MIME type of an encoded image, from its first bytes (null when it is none of the formats
 * image stores hold).
 * @param {Uint8Array} b
 * @returns {string | null}
 */
export function imageMime(b) {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) return 'image/png';
  if (b.length >= 12 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) return 'image/webp';
  return null;
}

/**
 * An `<img>` showing an encoded image record, decoded by the browser. Its object URL goes into
 * `urls` (the caller revokes them when the image leaves the page). `onFail(message)` runs when
 * the bytes are not an image or the browser cannot decode them.
 * @param {Uint8Array} bytes
 * @param {string[]} urls
 * @param {(message: string) => void} onFail
 * @param {string} cls
 */
export function encodedImage(bytes, urls, onFail, cls) {
  const img = /** @type {HTMLImageElement} */ (document.createElement('img'));
  img.className = cls;
  img.decoding = 'async';
  img.alt = 'encoded image';
  const mime = imageMime(bytes);
  if (!mime) {
    queueMicrotask(() => onFail('not a JPEG, PNG or WebP image'));
    return img;
  }
  // A copy: the record may be a view into a larger buffer that a Blob would keep whole.
  const url = URL.createObjectURL(new Blob([bytes.slice()], { type: mime }));
  urls.push(url);
  img.addEventListener('error', () => onFail(`the browser cannot decode this ${mime.slice(6).toUpperCase()}`), { once: true });
  img.src = url;
  return img;
}
