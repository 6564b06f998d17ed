// The step inspector's rule: which records a training run fed each rank at step k, from the
// run's receipt (`DataLoader.receipt()` in Python) or a loader state (`state_dict()`), by the
// same core sampler compiled to wasm. Python's `loaderx.receipt.indices` is the reference: a
// batch is a pure function of (length, batch_size, mode, seed, step), a segment of steps says
// how many ranks shared it, and rank r of n takes rows [r·b/n, (r+1)·b/n) of the global batch.
// A run sampled through an exclusion mask needs that mask: positions map to its kept records.
import { loaderxError } from './errors.js';

const bad = (/** @type {string} */ why) => loaderxError('LOADERX_ARGUMENT', why);

/** @param {unknown} v @param {string} what */
function count(v, what) {
  if (!Number.isSafeInteger(v) || /** @type {number} */ (v) < 0) throw bad(`${what} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return /** @type {number} */ (v);
}

/**
 * What a pasted run holds: the sampler config and the segments of steps (`[{start, end,
 * shardCount}]`), plus, for a state, where it stands (steps from it on use its shard count).
 * @param {any} run a receipt or a loader state (parsed JSON)
 */
export function runOf(run) {
  if (run == null || typeof run !== 'object') throw bad('paste the JSON of a receipt (DataLoader.receipt()) or a loader state (state_dict())');
  const c = run.config;
  if (c == null || typeof c !== 'object') throw bad('the JSON has no "config": paste a receipt or a loader state');
  if (c.mix != null) throw bad('this run mixes sources: the inspector follows single-stream runs (use python -m loaderx receipt STEP receipt.json)');
  if (c.packed != null) throw bad('this run packs token sequences: the inspector follows record batches (use python -m loaderx receipt)');
  const config = {
    length: count(c.length, 'config.length'), batchSize: count(c.batch_size, 'config.batch_size'),
    mode: count(c.mode, 'config.mode'), seed: count(c.seed, 'config.seed'), exclude: c.exclude ?? null,
  };
  if (config.length < 1 || config.batchSize < 1 || config.mode > 2) throw bad('config.length and config.batch_size must be positive, config.mode 0, 1 or 2');
  const receipt = run.format === 'loaderx-receipt';
  const list = receipt ? run.segments : (run.history ?? []);
  if (!Array.isArray(list)) throw bad(`the ${receipt ? 'receipt\'s segments' : 'state\'s history'} must be a list`);
  const segments = list.map((s, k) => ({
    start: count(s?.start, `segment ${k} start`), end: count(s?.end, `segment ${k} end`), shardCount: Math.max(1, count(s?.shard_count, `segment ${k} shard_count`)),
  }));
  const state = receipt ? null : { step: count(run.step, 'step'), shardCount: Math.max(1, count(run.shard_count ?? 1, 'shard_count')) };
  return { kind: receipt ? 'receipt' : 'state', config, segments, state };
}

/**
 * `stepRecords(run, step, {mask})`: `{step, shardCount, ranks: [[record, ...] per rank], global}`
 * for a receipt or a loader state. LOADERX_ARGUMENT for a step the receipt did not consume, a
 * mix or packed run, or a masked run without its mask (or with another).
 * @param {new (length: number, batchSize: number, mode: number, seed: number) => {batchAt(step: number): Float64Array, free(): void}} Sampler
 */
export function makeStepRecords(Sampler) {
  /**
   * @param {any} run
   * @param {number} step
   * @param {{mask?: {kept: number, select(i: ArrayLike<number>): Float64Array, toBytes(): Uint8Array} | null, digest?: string | null}} [options]
   */
  return function stepRecords(run, step, { mask = null, digest = null } = {}) {
    const r = runOf(run);
    count(step, 'step');
    const seg = r.segments.find((s) => s.start <= step && step < s.end);
    let shardCount;
    if (seg) shardCount = seg.shardCount;
    else if (r.state && step >= r.state.step) shardCount = r.state.shardCount;
    else {
      const spans = r.segments.map((s) => `${s.start}..${s.end - 1}`).join(', ') || 'none';
      throw bad(`step ${step} was not consumed by this run (steps consumed: ${spans})`);
    }
    if (r.config.exclude) {
      if (!mask) throw bad('this run sampled through an exclusion mask: open its mask file too');
      if (digest != null && digest !== r.config.exclude.digest) throw bad(`this run used the mask ${r.config.exclude.digest}, not ${digest}`);
      if (mask.kept !== r.config.length) throw bad(`this run sampled ${r.config.length} kept records; the mask keeps ${mask.kept}`);
    }
    const sampler = new Sampler(r.config.length, r.config.batchSize, r.config.mode, r.config.seed);
    let global;
    try {
      global = Array.from(sampler.batchAt(step));
    } finally {
      sampler.free();
    }
    if (r.config.exclude && mask) global = Array.from(mask.select(global));
    const b = global.length;
    const ranks = Array.from({ length: shardCount }, (_, k) => global.slice(Math.floor((k * b) / shardCount), Math.floor(((k + 1) * b) / shardCount)));
    return { step, shardCount, ranks, global };
  };
}
