// The step inspector's rule: which records a training run fed each rank at step k, from the
// run's receipt (`DataLoader.receipt()` in Python) or a loader state (`state_dict()`), by the
// same core sampler compiled to wasm. Python's `loaderx.receipt.indices` is the reference: a
// batch is a pure function of (length, batch_size, mode, seed, step), a segment of steps says
// how many ranks shared it, and rank r of n takes rows [r·b/n, (r+1)·b/n) of the global batch.
// A run sampled through an exclusion mask needs that mask: positions map to its kept records. A
// mixed run's indices are into its sources joined in order (core's mixer, rebased where each
// segment starts, as Python's receipts do).
import { loaderxError } from './errors.js';

const bad = (/** @type {string} */ why) => loaderxError('LOADERX_ARGUMENT', why);

/** @param {unknown} v @param {string} what */
function count(v, what) {
  if (!Number.isSafeInteger(v) || /** @type {number} */ (v) < 0) throw bad(`${what} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return /** @type {number} */ (v);
}

/**
 * A mix's weights as schedule points and interpolation (Python's `schedule_points`): a list of
 * weights, a list of `[step, weights]` points, or `{points, interpolation}`.
 * @param {any} weights
 */
function schedulePoints(weights) {
  let interpolation = 'step';
  let items = weights;
  if (weights && !Array.isArray(weights) && typeof weights === 'object') {
    interpolation = weights.interpolation ?? 'step';
    items = weights.points;
  }
  if (!Array.isArray(items) || !items.length) throw bad('a mix\'s weights must be a list of weights or of [step, weights] points');
  if (items.every((w) => typeof w === 'number')) return { points: [[0, items]], interpolation: 'step' };
  return { points: items, interpolation };
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
  if (c.mix != null && !(Array.isArray(c.mix) && c.mix.every((n) => Number.isSafeInteger(n) && n >= 0))) throw bad('config.mix must list the sources\' lengths');
  if (c.packed != null) throw bad('this run packs token sequences: the inspector follows record batches (use python -m loaderx receipt)');
  const config = {
    length: count(c.length, 'config.length'), batchSize: count(c.batch_size, 'config.batch_size'),
    mode: count(c.mode, 'config.mode'), seed: count(c.seed, 'config.seed'), exclude: c.exclude ?? null,
    mix: /** @type {number[] | null} */ (c.mix ?? null),
  };
  if (config.length < 1 || config.batchSize < 1 || config.mode > 2) throw bad('config.length and config.batch_size must be positive, config.mode 0, 1 or 2');
  const receipt = run.format === 'loaderx-receipt';
  const list = receipt ? run.segments : (run.history ?? []);
  if (!Array.isArray(list)) throw bad(`the ${receipt ? 'receipt\'s segments' : 'state\'s history'} must be a list`);
  const mixOf = (/** @type {any} */ s, /** @type {string} */ what) => {
    if (!config.mix) return null;
    const weights = s?.schedule ?? s?.weights;
    if (weights == null || !Array.isArray(s?.positions)) throw bad(`${what} of a mixed run needs its weights and positions`);
    return { weights, positions: s.positions.map((/** @type {unknown} */ p, /** @type {number} */ j) => count(p, `${what} position ${j}`)) };
  };
  const segments = list.map((s, k) => ({
    start: count(s?.start, `segment ${k} start`), end: count(s?.end, `segment ${k} end`), shardCount: Math.max(1, count(s?.shard_count, `segment ${k} shard_count`)),
    mix: mixOf(s, `segment ${k}`),
  }));
  const state = receipt ? null : {
    step: count(run.step, 'step'), shardCount: Math.max(1, count(run.shard_count ?? 1, 'shard_count')), mix: mixOf(run, 'the state'),
  };
  return { kind: receipt ? 'receipt' : 'state', config, segments, state };
}

/**
 * `stepRecords(run, step, {mask})`: `{step, shardCount, ranks: [[record, ...] per rank], global}`
 * for a receipt or a loader state. LOADERX_ARGUMENT for a step the receipt did not consume, a
 * mix or packed run, or a masked run without its mask (or with another).
 * @param {new (length: number, batchSize: number, mode: number, seed: number) => {batchAt(step: number): Float64Array, free(): void}} Sampler
 * @param {any} Mixer the wasm mixer class
 */
export function makeStepRecords(Sampler, Mixer) {
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
    /** Where the mix's streams stand: the segment's start, or the state's step. */
    let base = null;
    if (seg) {
      shardCount = seg.shardCount;
      base = seg.mix && { step: seg.start, ...seg.mix };
    } else if (r.state && step >= r.state.step) {
      shardCount = r.state.shardCount;
      base = r.state.mix && { step: r.state.step, ...r.state.mix };
    } else {
      const spans = r.segments.map((s) => `${s.start}..${s.end - 1}`).join(', ') || 'none';
      throw bad(`step ${step} was not consumed by this run (steps consumed: ${spans})`);
    }
    if (Array.isArray(r.config.exclude)) throw bad('this mixed run sampled through masks per source: the inspector does not follow it yet');
    if (r.config.exclude) {
      if (!mask) throw bad('this run sampled through an exclusion mask: open its mask file too');
      if (digest != null && digest !== r.config.exclude.digest) throw bad(`this run used the mask ${r.config.exclude.digest}, not ${digest}`);
      if (mask.kept !== r.config.length) throw bad(`this run sampled ${r.config.length} kept records; the mask keeps ${mask.kept}`);
    }
    let global;
    if (r.config.mix && base) {
      const { points, interpolation } = schedulePoints(base.weights);
      const mixer = new Mixer(Float64Array.from(r.config.mix), JSON.stringify(points), interpolation, BigInt(r.config.batchSize), r.config.mode, BigInt(r.config.seed));
      try {
        mixer.rebase(BigInt(base.step), Float64Array.from(base.positions));
        global = Array.from(mixer.batchAt(BigInt(step)));
      } finally {
        mixer.free();
      }
    } else {
      const sampler = new Sampler(r.config.length, r.config.batchSize, r.config.mode, r.config.seed);
      try {
        global = Array.from(sampler.batchAt(step));
      } finally {
        sampler.free();
      }
    }
    if (r.config.exclude && mask) global = Array.from(mask.select(global));
    const b = global.length;
    const ranks = Array.from({ length: shardCount }, (_, k) => global.slice(Math.floor((k * b) / shardCount), Math.floor(((k + 1) * b) / shardCount)));
    return { step, shardCount, ranks, global };
  };
}
