// Small helpers shared by the viewer modules: DOM building, number and size formatting.

/**
 * `el('div', {class: 'x', onclick: f}, child, 'text', ...)`.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [attrs]
 * @param {...any} children nodes, text, numbers and (nested) arrays of them; null and false are skipped
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(node.style, v);
    else if (k in node && typeof v !== 'string') /** @type {Record<string, any>} */ (node)[k] = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

/**
 * The element matching `sel` under `root`: it must exist and be a `type` (by default any
 * HTMLElement), else this throws, naming the selector (the page's markup and the code disagree).
 * @template {Element} [T=HTMLElement]
 * @param {string} sel
 * @param {{new (): T, prototype: T}} [type]
 * @param {ParentNode} [root]
 * @returns {T}
 */
export function $(sel, type, root = document) {
  const node = root.querySelector(sel);
  if (!node) throw new Error(`viewer: no element matches ${sel}`);
  const want = type ?? HTMLElement;
  if (!(node instanceof want)) throw new Error(`viewer: ${sel} is a <${node.localName}>, not a ${want.name}`);
  return /** @type {T} */ (node);
}

/**
 * 1234567 -> "1,234,567".
 * @param {number | bigint} n
 */
export const fmtInt = (n) => (typeof n === 'bigint' ? n.toLocaleString('en-US') : Number(n).toLocaleString('en-US'));

/**
 * Bytes in binary units: "104.9 KiB".
 * @param {number | null | undefined} n
 */
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

/**
 * A value for display: integers as they are, other numbers with 5 significant digits.
 * @param {number | bigint | null | undefined} v
 */
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

/**
 * A mean or other statistic: a few more digits than fmtNum for small spreads.
 * @param {number | null | undefined} v
 */
export const fmtStat = (v) => (v == null ? '–' : fmtNum(Number.isInteger(v) ? v : Number(v.toPrecision(6))));

/**
 * "28 × 28", "scalar".
 * @param {readonly number[]} shape
 */
export const fmtShape = (shape) => (shape.length ? shape.join(' × ') : 'scalar');

/** @param {readonly number[]} a */
const product = (a) => a.reduce((x, y) => x * y, 1);
export { product };

/** Lets the browser paint and handle input between pieces of main-thread work. */
export function yieldToBrowser() {
  if (globalThis.scheduler?.yield) return globalThis.scheduler.yield();
  return new Promise((r) => setTimeout(r, 0));
}

/**
 * Runs `fn` at most once per animation frame.
 * @template {unknown[]} A
 * @param {(...args: A) => void} fn
 * @returns {(...args: A) => void}
 */
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
