// The step inspector's rule: which records a training run fed each rank at step k, from the
// run's receipt (`DataLoader.receipt()` in Python) or a loader state (`state_dict()`), by the
// same core sampler compiled to wasm. Python's `loaderx.receipt.indices` is the reference: a
// batch is a pure function of (length, batch_size, mode, seed, step), a segment of steps says
// how many ranks shared it, and rank r of n takes rows [r·b/n, (r+1)·b/n) of the global batch.
// A run sampled through an exclusion mask needs that mask: positions map to its kept records. A
// mixed run's indices are into its sources joined in order (core's mixer, rebased where each
// segment starts, as Python's receipts do), each source through its own mask where it had one.
// A packed run's rows come from core's packer over the sources' document lengths (which the
// caller reads from the stores), each source seeded as core's mixer seeds its stream.
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
  const packed = c.packed == null ? null : {
    seqLen: count(c.packed.seq_len, 'config.packed.seq_len'), packing: String(c.packed.packing), bins: count(c.packed.bins ?? 128, 'config.packed.bins'),
  };
  const config = {
    packed,
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
 * The run's masks, one (or null) per source, checked against what it recorded.
 * @param {any} exclude the run's config.exclude
 * @param {number} sources
 * @param {any[] | null} given
 * @param {(string | null)[] | null} digests
 */
function masksOf(exclude, sources, given, digests) {
  if (exclude == null) return null;
  const recorded = Array.isArray(exclude) ? exclude : [exclude];
  if (recorded.length !== sources) throw bad(`config.exclude lists ${recorded.length} masks for ${sources} sources`);
  if (!given || given.length !== recorded.length) {
    throw bad(recorded.length === 1 ? 'this run sampled through an exclusion mask: open its mask file too' : `this mixed run sampled through masks per source: give ${recorded.length} (a mask or null per source)`);
  }
  return recorded.map((want, j) => {
    const m = given[j] ?? null;
    if ((want == null) !== (m == null)) throw bad(want == null ? `source ${j} of this run was not masked` : `source ${j} of this run was masked: give its mask file`);
    const digest = digests?.[j];
    if (want != null && digest != null && digest !== want.digest) throw bad(`this run used the mask ${want.digest}, not ${digest}`);
    return m;
  });
}

/**
 * Positions among the kept records of sources of `lengths` records joined in order (source
 * `j` through `masks[j]`, or all of it), as indices of the joined records (Python's
 * `loaderx.mask.joined_records`).
 * @param {number[]} lengths @param {any[]} masks @param {number[]} positions
 */
function joinedRecords(lengths, masks, positions) {
  const kept = lengths.map((n, j) => masks[j]?.kept ?? n);
  const keptBefore = [0];
  const before = [0];
  for (let j = 0; j < lengths.length; j++) {
    keptBefore.push(keptBefore[j] + kept[j]);
    before.push(before[j] + lengths[j]);
  }
  return positions.map((g) => {
    let j = 0;
    while (j + 1 < kept.length && g >= keptBefore[j + 1]) j++;
    const local = g - keptBefore[j];
    return before[j] + (masks[j] ? masks[j].select([local])[0] : local);
  });
}

/**
 * `stepRecords(run, step, {mask, masks, digest, lengths})`: `{step, shardCount, ranks: [[record,
 * ...] per rank], global}` for a receipt or a loader state (a packed run adds `rows`: each rank's
 * rows as `[record, first token, tokens]` segments). LOADERX_ARGUMENT for a step the receipt did
 * not consume, a masked run without its masks (or with others), or a packed run without its
 * sources' document lengths.
 * @param {new (length: number, batchSize: number, mode: number, seed: number) => {batchAt(step: number): Float64Array, free(): void}} Sampler
 * @param {any} wasm the wasm module (Mixer, Packer, MaskFile, mixStreamSeed)
 */
export function makeStepRecords(Sampler, wasm) {
  /**
   * @param {any} run
   * @param {number} step
   * @param {{mask?: any, masks?: any[] | null, digest?: string | null, digests?: (string | null)[] | null, lengths?: ArrayLike<number> | ArrayLike<number>[] | null}} [options]
   */
  return function stepRecords(run, step, { mask = null, masks = null, digest = null, digests = null, lengths = null } = {}) {
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
    const sources = r.config.mix ? r.config.mix.length : 1;
    const given = masks ?? (mask ? [mask] : null);
    const all = masksOf(r.config.exclude, sources, given, digests ?? (digest != null ? [digest] : null));
    const keptCounts = r.config.mix ?? [r.config.length];
    all?.forEach((m, j) => {
      if (m && m.kept !== keptCounts[j]) throw bad(`this run sampled ${keptCounts[j]} kept records${sources > 1 ? ` of source ${j}` : ''}; the mask keeps ${m.kept}`);
    });
    const mixer = r.config.mix && base ? makeMixer(wasm, r.config, base) : null;
    try {
      if (r.config.packed) return packedStep(wasm, r.config, step, shardCount, mixer, all, lengths);
      let global;
      if (mixer) {
        global = Array.from(mixer.batchAt(BigInt(step)));
      } else {
        const sampler = new Sampler(r.config.length, r.config.batchSize, r.config.mode, r.config.seed);
        try {
          global = Array.from(sampler.batchAt(step));
        } finally {
          sampler.free();
        }
      }
      if (all) {
        const recordCounts = keptCounts.map((n, j) => all[j]?.length ?? n);
        global = joinedRecords(recordCounts, all, global);
      }
      const ranks = rankSlices(global, shardCount);
      return { step, shardCount, ranks, global };
    } finally {
      mixer?.free();
    }
  };
}

/** @template T @param {T[]} rows @param {number} shardCount */
function rankSlices(rows, shardCount) {
  const b = rows.length;
  return Array.from({ length: shardCount }, (_, k) => rows.slice(Math.floor((k * b) / shardCount), Math.floor(((k + 1) * b) / shardCount)));
}

/** The core mixer of a run's config, rebased where its streams stood. @param {any} wasm @param {any} config @param {any} base */
function makeMixer(wasm, config, base) {
  const { points, interpolation } = schedulePoints(base.weights);
  const mixer = new wasm.Mixer(Float64Array.from(config.mix), JSON.stringify(points), interpolation, BigInt(config.batchSize), config.mode, BigInt(config.seed));
  try {
    mixer.rebase(BigInt(base.step), Float64Array.from(base.positions));
  } catch (e) {
    mixer.free();
    throw e;
  }
  return mixer;
}

/**
 * A packed run's step: each global row's segments from core's packer per source, split by rank.
 * @param {any} wasm @param {any} config @param {number} step @param {number} shardCount
 * @param {any} mixer @param {any[] | null} masks
 * @param {ArrayLike<number> | ArrayLike<number>[] | null} lengths
 */
function packedStep(wasm, config, step, shardCount, mixer, masks, lengths) {
  const sources = config.mix ? config.mix.length : 1;
  if (lengths == null) throw bad('this run packed token documents: give each source\'s document lengths (tokens per record), which decide its rows');
  /** @type {ArrayLike<number>[]} */
  const perSource = sources === 1 && !Array.isArray(lengths[0]) && typeof lengths[0] !== 'object' ? [/** @type {ArrayLike<number>} */ (lengths)] : /** @type {ArrayLike<number>[]} */ (lengths);
  if (perSource.length !== sources) throw bad(`this run packed ${sources} sources; ${perSource.length} lists of lengths were given`);
  const b = config.batchSize;
  /** @type {[number, number, number][][]} */
  const rows = Array.from({ length: b }, () => []);
  /** @type {[number, number, number[]][]} source, first stream row, batch slots */
  let plan;
  if (mixer) {
    const flat = mixer.slotsAt(BigInt(step));
    /** @type {Map<number, {first: number, slots: number[]}>} */
    const by = new Map();
    for (let k = 0; k < flat.length; k += 2) {
      const j = flat[k];
      const entry = by.get(j) ?? { first: flat[k + 1], slots: /** @type {number[]} */ ([]) };
      entry.slots.push(k / 2);
      by.set(j, entry);
    }
    plan = [...by].sort((x, y) => x[0] - y[0]).map(([j, e]) => [j, e.first, e.slots]);
  } else {
    plan = [[0, step * b, Array.from({ length: b }, (_, k) => k)]];
  }
  const before = [0];
  perSource.forEach((l, j) => {
    before.push(before[j] + (masks?.[j]?.length ?? l.length));
  });
  for (const [j, first, slots] of plan) {
    const all = perSource[j];
    const m = masks?.[j] ?? null;
    if ((m?.length ?? all.length) !== all.length) throw bad(`source ${j}'s mask is for ${m.length} records; ${all.length} lengths were given`);
    const docs = m ? Array.from(m.select(Array.from({ length: m.kept }, (_, i) => i))) : null;
    const kept = docs ? docs.map((d) => all[d]) : Array.from(all);
    const want = config.mix ? config.mix[j] : config.length;
    if (kept.length !== want) throw bad(`this run packed ${want} documents${sources > 1 ? ` of source ${j}` : ''}; ${kept.length} ${m ? 'are kept of the lengths' : 'lengths were'} given`);
    const seed = sources > 1 ? wasm.mixStreamSeed(BigInt(config.seed), j) : BigInt(config.seed);
    let packer = new wasm.Packer(Uint32Array.from(kept), config.packed.seqLen, config.packed.packing, config.packed.bins, config.mode, seed);
    try {
      if (m) {
        const file = new wasm.MaskFile(m.toBytes());
        try {
          packer = packer.withMask(file);
        } finally {
          file.free();
        }
      }
      const flat = packer.segments(BigInt(first), BigInt(slots.length));
      for (let k = 0; k < flat.length; k += 5) {
        rows[slots[flat[k] - first]].push([before[j] + flat[k + 3], flat[k + 4], flat[k + 2]]);
      }
    } finally {
      packer.free();
    }
  }
  const byRank = rankSlices(rows, shardCount);
  const ranks = byRank.map((rank) => [...new Set(rank.flatMap((row) => row.map((g) => g[0])))]);
  const global = [...new Set(rows.flatMap((row) => row.map((g) => g[0])))];
  return { step, shardCount, ranks, global, rows: byRank };
}
