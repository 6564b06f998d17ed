// Small helpers shared by the viewer modules: DOM building, number and size formatting, dtypes.

/** `el('div', {class: 'x', onclick: f}, child, 'text', ...)`. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(node.style, v);
    else if (k in node && typeof v !== 'string') node[k] = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

export const $ = (sel, root = document) => root.querySelector(sel);

/** 1234567 -> "1,234,567". */
export const fmtInt = (n) => (typeof n === 'bigint' ? n.toLocaleString('en-US') : Number(n).toLocaleString('en-US'));

/** Bytes in binary units: "104.9 KiB". */
export function fmtBytes(n) {
  if (n == null || Number.isNaN(n)) return '–';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let u = -1;
  do {
    v /= 1024;
    u++;
  } while (v >= 1024 && u < units.length - 1);
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${units[u]}`;
}

/** A value for display: integers as they are, other numbers with 5 significant digits. */
export function fmtNum(v) {
  if (typeof v === 'bigint') return v.toString();
  if (v == null) return '–';
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-4 || a >= 1e9)) return v.toExponential(3).replace(/\.?0+e/, 'e');
  return String(Number(v.toPrecision(5)));
}

/** A mean or other statistic: a few more digits than fmtNum for small spreads. */
export const fmtStat = (v) => (v == null ? '–' : fmtNum(Number.isInteger(v) ? v : Number(v.toPrecision(6))));

const NAMES = { u: 'uint', i: 'int', f: 'float', c: 'complex', b: 'bool', S: 'bytes', U: 'str', V: 'void', M: 'datetime64', m: 'timedelta64' };

/**
 * What a NumPy dtype string means: `{kind, bytes, name, bigEndian, unit}`; kind is one of
 * u i f c b S U V M m, or 'raw' for stores without a schema (plain bytes).
 */
export function dtypeInfo(schema) {
  if (!schema) return { kind: 'raw', bytes: 1, name: 'bytes (no schema)', bigEndian: false, unit: null };
  const m = /^([<>|=]?)([a-zA-Z])(\d*)(?:\[(\w+)\])?$/.exec(schema.dtype);
  if (!m) return { kind: 'V', bytes: schema.itemBytes, name: schema.dtype, bigEndian: false, unit: null };
  const [, order, kind, size, unit] = m;
  const bytes = Number(size || 1);
  let name = NAMES[kind] ?? schema.dtype;
  if (kind === 'u' || kind === 'i' || kind === 'f') name += bytes * 8;
  else if (kind === 'c') name += bytes * 8;
  else if (kind === 'S' || kind === 'V') name += `${bytes}`;
  else if (kind === 'U') name = `str (up to ${bytes} characters)`;
  else if (unit) name += `[${unit}]`;
  if (order === '>' && bytes > 1) name += ', big-endian';
  return { kind, bytes, name, bigEndian: order === '>', unit: unit ?? null };
}

/** Whether values of this dtype are plain numbers (stats, histograms, images). */
export const isNumericKind = (k) => k === 'u' || k === 'i' || k === 'f' || k === 'b' || k === 'raw';

/** "28 × 28", "scalar". */
export const fmtShape = (shape) => (shape.length ? shape.join(' × ') : 'scalar');

const product = (a) => a.reduce((x, y) => x * y, 1);
export { product };

/** Lets the browser paint and handle input between pieces of main-thread work. */
export function yieldToBrowser() {
  if (globalThis.scheduler?.yield) return globalThis.scheduler.yield();
  return new Promise((r) => setTimeout(r, 0));
}

/** Runs `fn` at most once per animation frame. */
export function perFrame(fn) {
  let queued = false;
  return (...args) => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn(...args);
    });
  };
}
