// `store.batches(options)`: an async iterator over gathered batches, in order, for the Store on
// this thread and the one in a worker alike. The next batch is read while the caller works on
// the current one.
import { batchOptions, toIndexArray } from './args.js';
import { toLoaderxError } from './errors.js';

/**
 * Batches of `store`: consecutive slices of `indices` (default: every record in order), or the
 * sampler's batches from its current step on. `steps` caps the count (a sampler is endless
 * without it). With a sampler, the sampler is left at the step after the last batch yielded.
 * Bad options reject the first `next()` with LOADERX_ARGUMENT.
 * @param {{length: number, gather: Function, gatherBytes: Function, lengths: Function}} store
 * @param {unknown} options
 */
export async function* batches(store, options) {
  const { batchSize, indices, sampler, steps, method } = batchOptions(options);
  /** @type {() => Float64Array | null} the indices of the next batch, null after the last */
  let nextIndices;
  let yielded = 0;
  const start = sampler ? sampler.step : 0;
  if (sampler) {
    let step = start;
    nextIndices = () => sampler.batchAt(step++);
  } else {
    const all = indices == null ? null : toIndexArray(indices);
    const total = all ? all.length : store.length;
    let at = 0;
    nextIndices = () => {
      if (at >= total) return null;
      const end = Math.min(total, at + batchSize);
      const idx = all ? all.subarray(at, end) : Float64Array.from({ length: end - at }, (_, k) => at + k);
      at = end;
      return idx;
    };
  }
  /** Reads the next batch, or null after the last; a failure waits to be awaited. */
  const read = (/** @type {number} */ count) => {
    if (count >= steps) return null;
    const idx = nextIndices();
    if (!idx) return null;
    const p = Promise.resolve().then(() => store[method](idx));
    p.catch(() => {}); // read ahead: the caller may stop before awaiting it
    return p;
  };
  try {
    for (let pending = read(0); pending;) {
      const current = pending;
      pending = read(yielded + 1);
      const value = await current;
      yielded++; // counted before the yield: a caller that stops there has had this batch
      yield value;
    }
  } catch (e) {
    throw toLoaderxError(e);
  } finally {
    if (sampler) {
      try { sampler.seek(start + yielded); } catch { /* a freed sampler: nothing to leave */ }
    }
  }
}
