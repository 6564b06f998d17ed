// The parts of a gather shared between this thread and the worker (node-store.js,
// node-worker.js): a result's bytes and places, how it travels, and how two parts become the
// result of the whole call. A gather's result is one typed array with `shape` (dense), or a list
// of typed arrays with `shape` each; either way its arrays sit back to back on one buffer, in
// request order (store.js `split`).
import { freshBytes } from './store.js';

/** Spare output buffers kept per thread, and the largest kept. */
const SPARES = 4;
const SPARE_BYTES = 64 << 20;

/**
 * Output buffers reused across calls, by exact size: a fresh buffer costs page faults on first
 * touch (about 0.2 ms per MiB here), which the Store's `GATHER_INTO` avoids when handed a buffer
 * of the output's exact size. A buffer taken is the taker's alone (calls in flight together each
 * get their own) until it is given back, once the part's result has been copied out of it.
 */
export class Spares {
  /** @type {Map<number, Uint8Array[]>} */
  #free = new Map();
  #count = 0;

  /** A buffer of `n` bytes: a kept one, or a new one (pages touched). */
  take(n) {
    const list = this.#free.get(n);
    const b = list?.pop();
    if (!b) return freshBytes(n);
    this.#count--;
    if (!list?.length) this.#free.delete(n);
    return b;
  }

  /** Keeps `b` for a later `take` (the oldest size goes when SPARES are kept; a buffer over
   *  SPARE_BYTES is not kept). */
  give(b) {
    const n = b.byteLength;
    if (n > SPARE_BYTES) return;
    if (this.#count >= SPARES) {
      const [oldest, list] = /** @type {[number, Uint8Array[]]} */ (this.#free.entries().next().value);
      list.pop();
      this.#count--;
      if (!list.length) this.#free.delete(oldest);
    }
    const list = this.#free.get(n) ?? [];
    list.push(b);
    this.#free.set(n, list);
    this.#count++;
  }
}

/** The arrays of a result, and the bytes `[start, end)` they span on their buffer. */
export function partOf(result) {
  const single = !Array.isArray(result);
  const list = single ? [result] : result;
  if (list.length === 0) return { single, list, start: 0, end: 0 };
  const last = list[list.length - 1];
  return { single, list, start: list[0].byteOffset, end: last.byteOffset + last.byteLength };
}

/**
 * The worker's part as it travels: `out`, a new buffer of `before + (its bytes)` whose first
 * `before` bytes are left for this thread's part (`ahead` when it is that size: a buffer
 * allocated ahead), and each array's place in it.
 * @param {any} result @param {number} before @param {Uint8Array | null} [ahead]
 */
export function packAfter(result, before, ahead = null) {
  const { single, list, start, end } = partOf(result);
  if (list.some((a) => a.buffer !== list[0].buffer)) throw new Error('a gather gave arrays on more than one buffer');
  const n = before + end - start;
  const out = ahead?.length === n ? ahead : freshBytes(n);
  if (list.length) out.set(new Uint8Array(list[0].buffer, start, end - start), before);
  const ctor = list.length ? list[0].constructor.name : 'Uint8Array';
  const items = list.map((a) => [a.byteOffset - start + before, a.length, a.shape]);
  return { single, ctor, buffer: out.buffer, before, items };
}

/**
 * This thread's part `mine` and the worker's `theirs` (from `packAfter`) as the result of the
 * whole call: `mine` is copied into the space left before the worker's part when it is exactly
 * that size, else both are copied into a new buffer.
 */
export function joinParts(mine, theirs) {
  const a = partOf(mine);
  const C = /** @type {any} */ (globalThis[theirs.ctor]);
  const aBytes = a.end - a.start;
  let buffer = theirs.buffer;
  let shift = 0;
  if (aBytes !== theirs.before) {
    const tail = new Uint8Array(theirs.buffer, theirs.before);
    const whole = new Uint8Array(aBytes + tail.length);
    whole.set(tail, aBytes);
    buffer = whole.buffer;
    shift = aBytes - theirs.before;
  }
  if (aBytes) new Uint8Array(buffer, 0, aBytes).set(new Uint8Array(a.list[0].buffer, a.start, aBytes));
  if (a.single) {
    const rows = a.list[0].shape[0] + theirs.items[0][2][0];
    return Object.assign(new C(buffer, 0, buffer.byteLength / C.BYTES_PER_ELEMENT), { shape: [rows, ...a.list[0].shape.slice(1)] });
  }
  const view = (offset, length, shape) => Object.assign(new C(buffer, offset, length), { shape });
  return [
    ...a.list.map((x) => view(x.byteOffset - a.start, x.length, x.shape)),
    ...theirs.items.map(([offset, length, shape]) => view(offset + shift, length, shape)),
  ];
}
