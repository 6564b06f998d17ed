// `filterRecords(streams, text)`: the records of aligned streams that match a filter such as
// `label == 3 && len(tokens) > 512` (core's filter language, docs/format.md "Filters"). Streams
// are named stores of the same length; a name is a stream's value (one number per record), and
// `len(name)` a record's length in rows. The records are read in batches; each batch's columns go
// to core's evaluator in wasm.
import { loaderxError, wasmCall } from './errors.js';

const bad = (/** @type {string} */ why) => loaderxError('LOADERX_ARGUMENT', why);

/** Rows per record byte count of a store: `itemBytes` of a ragged store's rows, 1 without a schema. */
function rowBytes(/** @type {any} */ schema) {
  if (!schema) return 1;
  return schema.itemBytes || 1;
}

/** @param {any} wasm the loaded wasm module */
export function makeFilterRecords(wasm) {
  /**
   * @param {Record<string, any>} streams  name -> store, all of one length
   * @param {string} text
   * @param {{batchSize?: number, onProgress?: ((done: number, total: number, found: number) => void) | null, signal?: AbortSignal | null}} [options]
   * @returns {Promise<Float64Array>} the matching records, ascending
   */
  return async function filterRecords(streams, text, { batchSize = 65536, onProgress = null, signal = null } = {}) {
    if (streams == null || typeof streams !== 'object') throw bad('filterRecords takes {name: store} of aligned streams');
    if (typeof text !== 'string') throw bad('the filter must be text');
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw bad(`batchSize must be a positive integer, got ${batchSize}`);
    const names = Object.keys(streams);
    if (!names.length) throw bad('filterRecords needs at least one stream');
    const total = streams[names[0]].length;
    for (const n of names) if (streams[n].length !== total) throw bad(`the streams differ in length: ${names.map((k) => `${k} ${streams[k].length}`).join(', ')}`);
    const filter = wasmCall(() => new wasm.Filter(text));
    try {
      /** @type {[string, boolean][]} */
      const columns = Array.from(filter.columns());
      for (const [name, isLength] of columns) {
        const s = streams[name];
        if (!s) throw bad(`the filter names ${name}, but the streams are ${names.join(', ')}`);
        const schema = s.schema;
        if (!isLength) {
          const scalar = schema?.kind === 'dense' && schema.itemShape.every((/** @type {number} */ d) => d === 1) && schema.extraDim == null;
          if (!scalar) throw bad(`${name} is not a stream of one number per record${schema?.kind === 'ragged' ? `: use len(${name})` : ''}`);
        }
      }
      const found = [];
      for (let start = 0; start < total; start += batchSize) {
        signal?.throwIfAborted();
        const n = Math.min(batchSize, total - start);
        const idx = new Float64Array(n).map((_, k) => start + k);
        const flat = new Float64Array(columns.length * n);
        let c = 0;
        for (const [name, isLength] of columns) {
          const s = streams[name];
          if (isLength) {
            const lens = await s.lengths(idx);
            const per = rowBytes(s.schema);
            for (let k = 0; k < n; k++) flat[c * n + k] = lens[k] / per;
          } else {
            const values = await s.gather(idx);
            for (let k = 0; k < n; k++) flat[c * n + k] = Number(values[k]);
          }
          c++;
        }
        const hit = wasmCall(() => filter.matches(flat, n));
        for (let k = 0; k < n; k++) if (hit[k]) found.push(start + k);
        onProgress?.(start + n, total, found.length);
      }
      if (total === 0) onProgress?.(0, 0, 0);
      return Float64Array.from(found);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw e;
    } finally {
      filter.free();
    }
  };
}
