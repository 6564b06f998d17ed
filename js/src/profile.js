// Whole-store statistics for the viewer and loaderx-qa: the records stream, in order and in
// batches of about PROFILE_BYTES decoded bytes, through core's profile (the wasm Profiler); a
// second pass feeds the value histograms once the first has found the range. One function for
// every store kind (a store, a manifest read as one, a store hosted in a worker uses it there).
import { profileOptions } from './args.js';
import { wasmCall } from './errors.js';

/** Decoded bytes per batch, about (a batch holds at least one record). */
const PROFILE_BYTES = 16 << 20;

/**
 * Records as one byte buffer and their lengths: the views `gatherBytes` gives lie back to back
 * in one buffer for a store; a manifest's batch spanning stores is copied together.
 * @param {Uint8Array[]} list
 * @returns {[Uint8Array, Float64Array]}
 */
function packed(list) {
  const lens = Float64Array.from(list, (r) => r.byteLength);
  let n = 0;
  for (const l of lens) n += l;
  const first = list[0];
  let joined = first != null;
  for (let k = 1, at = first?.byteOffset ?? 0; joined && k < list.length; k++) {
    at += list[k - 1].byteLength;
    joined = list[k].buffer === first.buffer && list[k].byteOffset === at;
  }
  if (joined && first) return [new Uint8Array(first.buffer, first.byteOffset, n), lens];
  const out = new Uint8Array(n);
  let at = 0;
  for (const r of list) {
    out.set(r, at);
    at += r.byteLength;
  }
  return [out, lens];
}

/**
 * Sums per-codec byte counts (`[{codec, records, storedBytes, decodedBytes}]` lists) by codec.
 * @param {{codec: string, records: number, storedBytes: number, decodedBytes: number}[][]} parts
 */
export function mergeCodecBytes(parts) {
  /** @type {Map<string, {codec: string, records: number, storedBytes: number, decodedBytes: number}>} */
  const by = new Map();
  for (const list of parts) {
    for (const c of list) {
      const t = by.get(c.codec) ?? { codec: c.codec, records: 0, storedBytes: 0, decodedBytes: 0 };
      t.records += c.records;
      t.storedBytes += c.storedBytes;
      t.decodedBytes += c.decodedBytes;
      by.set(c.codec, t);
    }
  }
  return [...by.values()];
}

/**
 * The profile of `store` (anything with `length`, `schema`, `lengths`, `gatherBytes` and
 * `codecBytes`). Bad options are LOADERX_ARGUMENT; an aborted `signal` rejects with its reason.
 * @param {any} wasm the loaded wasm module
 * @param {any} store
 * @param {unknown} options
 */
export async function profileOf(wasm, store, options) {
  const { bins, batchSize, onProgress, signal } = profileOptions(options);
  signal?.throwIfAborted();
  const profiler = wasmCall(() => new wasm.Profiler(JSON.stringify(store.schema ?? null), bins));
  try {
    const total = store.length;
    const pass = async (/** @type {1 | 2} */ which) => {
      for (let start = 0, end = 0; start < total; start = end) {
        signal?.throwIfAborted();
        end = Math.min(total, start + batchSize);
        let idx = new Float64Array(end - start).map((_, k) => start + k);
        const lens = await store.lengths(idx);
        let n = 1;
        for (let sum = lens[0]; n < lens.length && sum + lens[n] <= PROFILE_BYTES; n++) sum += lens[n];
        if (n < idx.length) {
          idx = idx.subarray(0, n);
          end = start + n;
        }
        const [data, got] = packed(await store.gatherBytes(idx));
        signal?.throwIfAborted();
        if (which === 1) wasmCall(() => profiler.add(start, data, got));
        else wasmCall(() => profiler.addHistogram(data, got));
        onProgress?.(end, total, which);
      }
    };
    await pass(1);
    if (profiler.needsValuesAgain) await pass(2);
    const summary = JSON.parse(profiler.summary());
    summary.codecs = await store.codecBytes();
    return summary;
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    throw e;
  } finally {
    profiler.free();
  }
}
