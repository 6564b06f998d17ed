// Arguments as the API takes them, converted once for the Store on this thread and the one hosted
// in a worker (the same functions, so both give the same errors). Conversion only: what the
// values mean for a store (an index in range, say) is for wasm to check.
import { loaderxError, describe } from './errors.js';

/** Records per verify step, by default. */
export const VERIFY_BATCH = 1024;
/** Records per batch of `Store.batches`, by default. */
export const BATCH_SIZE = 1024;
/** Longest list of indices one call takes: the most records a store holds (2^24), so a call
 *  can name every record once. A longer list (an endless generator, say) is LOADERX_TOO_LARGE,
 *  and an iterable is not read past its MAX_INDICES + 1st element. */
export const MAX_INDICES = 2 ** 24;
/** Longest array-like taken as a list at all (the longest Array); longer is not a list. */
const MAX_ARRAY_LIKE = 2 ** 32 - 1;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Indices as a Float64Array for wasm: any iterable (Array, typed array, Set, generator) or
 * array-like (`{length, 0: ..., 1: ...}`) of numbers or bigints. Anything else is
 * LOADERX_ARGUMENT, an element that is not a number or bigint LOADERX_INDEX naming it.
 * @param {unknown} indices
 * @returns {Float64Array}
 */
export function toIndexArray(indices) {
  return toNumbers(indices);
}

/** @param {unknown} indices */
function toNumbers(indices) {
  if (indices == null || typeof indices !== 'object') {
    throw loaderxError('LOADERX_ARGUMENT', `indices must be an array, typed array or other list of integers, got ${describe(indices)}`);
  }
  const list = /** @type {any} */ (indices);
  if (ArrayBuffer.isView(list) && !(list instanceof DataView)) {
    tooMany(/** @type {ArrayLike<unknown>} */ (/** @type {unknown} */ (list)).length);
    return list instanceof BigInt64Array || list instanceof BigUint64Array ? Float64Array.from(list, toNumber) : Float64Array.from(/** @type {ArrayLike<number>} */ (/** @type {unknown} */ (list)));
  }
  if (typeof list[Symbol.iterator] === 'function') {
    const out = [];
    for (const x of list) {
      // Leaving the loop closes the iterator (a generator's finally blocks run).
      if (out.length === MAX_INDICES) tooMany(MAX_INDICES + 1);
      out.push(toNumber(x));
    }
    return Float64Array.from(out);
  }
  const n = list.length;
  if (!Number.isSafeInteger(n) || n < 0 || n > MAX_ARRAY_LIKE) {
    throw loaderxError('LOADERX_ARGUMENT', `indices must be an array, typed array or other list of integers, got ${describe(indices)} with length ${describe(n)}`);
  }
  tooMany(n);
  // Element by element, so a made-up length fails at its first hole before anything is allocated.
  const out = [];
  for (let k = 0; k < n; k++) out.push(toNumber(list[k]));
  return Float64Array.from(out);
}

/** LOADERX_TOO_LARGE when a list of `n` indices is longer than one call takes. */
function tooMany(n) {
  if (n > MAX_INDICES) {
    throw loaderxError('LOADERX_TOO_LARGE', `a call takes at most ${MAX_INDICES} indices (the most records a store holds), got ${n === MAX_INDICES + 1 ? 'more' : n}`);
  }
}

/** One index as a number; anything but a number or a bigint a number holds exactly is
 *  LOADERX_INDEX naming it. */
function toNumber(x) {
  if (typeof x === 'number') return x;
  if (typeof x === 'bigint') {
    if (x >= -MAX_SAFE && x <= MAX_SAFE) return Number(x);
    throw loaderxError('LOADERX_INDEX', `index ${x} is beyond any store (not a safe integer)`);
  }
  throw loaderxError('LOADERX_INDEX', `index ${describe(x)} is not an integer (number or bigint)`);
}

/**
 * `verify` options checked: `{onProgress, batchSize}` (null or undefined: the defaults).
 * @param {unknown} options
 * @returns {{onProgress: ((done: number, total: number) => void) | null, batchSize: number}}
 */
export function verifyOptions(options) {
  if (options != null && typeof options !== 'object') {
    throw loaderxError('LOADERX_ARGUMENT', `verify options must be an object, got ${describe(options)}`);
  }
  const { onProgress = null, batchSize = VERIFY_BATCH } = /** @type {any} */ (options ?? {});
  if (onProgress != null && typeof onProgress !== 'function') {
    throw loaderxError('LOADERX_ARGUMENT', `verify onProgress must be a function, got ${describe(onProgress)}`);
  }
  positive(batchSize, 'verify batchSize');
  return { onProgress, batchSize };
}

/**
 * `profile` options checked: `{bins, batchSize, onProgress, signal}`.
 * @param {unknown} options
 * @returns {{bins: number, batchSize: number, onProgress: ((done: number, total: number, pass: number) => void) | null, signal: AbortSignal | null}}
 */
export function profileOptions(options) {
  if (options != null && typeof options !== 'object') {
    throw loaderxError('LOADERX_ARGUMENT', `profile options must be an object, got ${describe(options)}`);
  }
  const { bins = 20, batchSize = 4096, onProgress = null, signal = null } = /** @type {any} */ (options ?? {});
  positive(bins, 'profile bins');
  if (bins > 4096) throw loaderxError('LOADERX_ARGUMENT', `profile bins must be at most 4096, got ${bins}`);
  positive(batchSize, 'profile batchSize');
  if (onProgress != null && typeof onProgress !== 'function') {
    throw loaderxError('LOADERX_ARGUMENT', `profile onProgress must be a function, got ${describe(onProgress)}`);
  }
  if (signal != null && typeof signal.throwIfAborted !== 'function') {
    throw loaderxError('LOADERX_ARGUMENT', `profile signal must be an AbortSignal, got ${describe(signal)}`);
  }
  return { bins, batchSize, onProgress, signal };
}

const READS = { values: 'gather', bytes: 'gatherBytes', lengths: 'lengths' };

/**
 * `batches` options checked: `{batchSize, indices, sampler, steps, read}`.
 * @param {unknown} options
 */
export function batchOptions(options) {
  if (options != null && typeof options !== 'object') {
    throw loaderxError('LOADERX_ARGUMENT', `batches options must be an object, got ${describe(options)}`);
  }
  const { batchSize, indices, sampler, steps = Infinity, read = 'values' } = /** @type {any} */ (options ?? {});
  if (indices != null && sampler != null) throw loaderxError('LOADERX_ARGUMENT', 'batches takes indices or a sampler, not both');
  if (sampler != null && batchSize != null) throw loaderxError('LOADERX_ARGUMENT', 'batches takes no batchSize with a sampler: its batches are the sampler\'s');
  if (sampler != null && !['next', 'batchAt', 'seek'].every((m) => typeof sampler[m] === 'function')) {
    throw loaderxError('LOADERX_ARGUMENT', `batches sampler must be a Sampler, got ${describe(sampler)}`);
  }
  if (batchSize != null) positive(batchSize, 'batches batchSize');
  if (steps !== Infinity) positive(steps, 'batches steps');
  if (typeof read !== 'string' || !Object.hasOwn(READS, read)) {
    throw loaderxError('LOADERX_ARGUMENT', `batches read must be 'values', 'bytes' or 'lengths', got ${describe(read)}`);
  }
  return { batchSize: batchSize ?? BATCH_SIZE, indices, sampler, steps, method: /** @type {'gather'|'gatherBytes'|'lengths'} */ (READS[/** @type {keyof READS} */ (read)]) };
}

/** @param {unknown} n @param {string} what */
function positive(n, what) {
  if (!Number.isSafeInteger(n) || /** @type {number} */ (n) < 1) {
    throw loaderxError('LOADERX_ARGUMENT', `${what} must be a positive integer, got ${describe(n)}`);
  }
}

/** A u64 argument of the sampler as a bigint. */
export function u64(x, name) {
  if (typeof x === 'bigint' && x >= 0n && x < 1n << 64n) return x;
  if (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0) return BigInt(x);
  throw loaderxError('LOADERX_ARGUMENT', `${name} must be a non-negative integer (number or bigint), got ${describe(x)}`);
}
