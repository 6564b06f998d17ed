// Sampler with any length, batchSize, mode, seed and step, and after free(): the model's batches
// or a documented LoaderxError.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Sampler } from '../src/node.js';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// Sampler

const MODE_NAMES = { SEQUENTIAL: 0, IID: 1, CYCLIC: 2 };
const MAX_SAFE = 2n ** 53n - 1n;
const U64 = 2n ** 64n;
/** A u64 argument as the README and index.d.ts allow it, or null. */
const asU64 = (x) => (typeof x === 'bigint' ? (x >= 0n && x < U64 ? x : null) : Number.isSafeInteger(x) && x >= 0 ? BigInt(x) : null);

const u64Arb = (small) => fc.oneof(
  { weight: 6, arbitrary: small },
  { weight: 2, arbitrary: small.map(BigInt) },
  { weight: 2, arbitrary: fc.constantFrom(0, -1, 1.5, NaN, Infinity, 2 ** 53, 2 ** 53 - 1, 2 ** 24, 2 ** 24 + 1, 0n, -1n, 2n ** 53n, MAX_SAFE,
    2n ** 32n, U64 - 1n, U64, '5', null, {}, [5], true, Symbol('n'), new Number(5)) },
  { weight: 1, arbitrary: fc.bigInt({ min: -10n, max: U64 + 10n }) },
);
const modeArb = fc.oneof(
  fc.constantFrom(0, 1, 2, 'SEQUENTIAL', 'IID', 'CYCLIC', 'iid', 'Cyclic', 'sequential'),
  fc.constantFrom(3, 7, 255, 256, -1, 1.5, NaN, 2n, '0', '', ' IID', 'RANDOM', 'constructor', '__proto__', null, undefined, {}, new String('IID'), [1]),
);

/** The model: `{batchLength, mode, length, batch, seed}` or null when the arguments are bad. */
function samplerModel(length, batchSize, mode, seed = 42) {
  const m = typeof mode === 'string' ? MODE_NAMES[mode.toUpperCase()] : mode;
  if (!(m === 0 || m === 1 || m === 2)) return null;
  const [L, B, S] = [asU64(length), asU64(batchSize), asU64(seed)];
  if (L == null || B == null || S == null || L < 1n || L > MAX_SAFE || B < 1n) return null;
  const batchLength = m === 2 && L < B ? L : B;
  return batchLength > 2n ** 24n ? null : { batchLength: Number(batchLength), mode: m, L, B };
}

/**
 * A batch is right for the model: SEQUENTIAL exactly, the others in range (CYCLIC without repeats).
 * @param {Float64Array} got
 * @param {{batchLength: number, mode: number, L: bigint, B: bigint}} mdl
 * @param {bigint} step
 * @param {string} what
 */
function checkBatch(got, mdl, step, what) {
  assert.ok(got instanceof Float64Array, `${what}: a Float64Array`);
  assert.equal(got.length, mdl.batchLength, `${what}: batch length`);
  const { L, B } = mdl;
  for (let j = 0; j < got.length; j++) {
    assert.ok(Number.isInteger(got[j]) && got[j] >= 0 && got[j] < Number(L), `${what}: index ${got[j]} of ${L}`);
    if (mdl.mode === 0) assert.equal(BigInt(got[j]), ((BigInt.asUintN(64, step * B + BigInt(j))) % L), `${what}: element ${j}`);
  }
  if (mdl.mode === 2) assert.equal(new Set(got).size, got.length, `${what}: a repeat within a cyclic batch`);
}

describe('Sampler', () => {
  test('bad length / batchSize / mode / seed / step: LOADERX_ARGUMENT, good ones give batches in range', async () => {
    const small = fc.integer({ min: 0, max: 40 });
    await fc.assert(
      fc.property(u64Arb(small), u64Arb(small), modeArb, fc.option(u64Arb(small), { nil: undefined }), u64Arb(fc.nat(1000)), u64Arb(fc.nat(1000)), (/** @type {any} */ length, /** @type {any} */ batchSize, /** @type {any} */ mode, /** @type {any} */ seed, /** @type {any} */ step, /** @type {any} */ seekTo) => {
        // (generated good and bad arguments, deliberately of any type)
        const mdl = samplerModel(length, batchSize, mode, seed);
        const what = `new Sampler(${fc.stringify([length, batchSize, mode, seed])})`;
        const res = prop.attempt(() => new Sampler(length, batchSize, mode, seed));
        if (!mdl) return prop.expectThrows(res, ['LOADERX_ARGUMENT'], what);
        assert.ok(!('error' in res), `${what}: threw ${prop.show(res.error)}`);
        const s = res.value;
        try {
          assert.equal(s.batchLength, mdl.batchLength);
          if (mdl.batchLength > 4096) return;
          checkBatch(s.next(), mdl, 0n, `${what}.next()`);
          assert.equal(s.step, 1);
          const st = asU64(step);
          const at = prop.attempt(() => s.batchAt(step));
          if (st == null) prop.expectThrows(at, ['LOADERX_ARGUMENT'], `batchAt(${fc.stringify(step)})`);
          else checkBatch(at.value, mdl, st, `batchAt(${fc.stringify(step)})`);
          const sk = asU64(seekTo);
          const sought = prop.attempt(() => s.seek(seekTo));
          if (sk == null) {
            prop.expectThrows(sought, ['LOADERX_ARGUMENT'], `seek(${fc.stringify(seekTo)})`);
            assert.equal(s.step, 1, 'a failed seek keeps the step');
          } else {
            assert.ok(!('error' in sought), `seek(${fc.stringify(seekTo)}) threw ${prop.show(sought.error)}`);
            assert.equal(s.step, Number(sk));
            const again = s.batchAt(sk);
            checkBatch(s.next(), mdl, sk, `next() after seek(${fc.stringify(seekTo)})`);
            assert.deepEqual(Array.from(s.batchAt(sk)), Array.from(again));
            assert.equal(s.step, Number(BigInt.asUintN(64, sk + 1n)));
          }
        } finally {
          s.free();
        }
      }),
      { seed: prop.SEED, numRuns: 400 },
    );
    assert.deepEqual(Array.from(new Sampler(10, 4, 0, 1).next()), [0, 1, 2, 3]);
    await prop.stillWorks();
  });

  test('calls after free() throw LOADERX_CLOSED (no trap, no crash); free() again does nothing', () => {
    const callArbS = fc.constantFrom('next', 'batchAt', 'seek', 'step', 'batchLength', 'free');
    fc.assert(
      fc.property(fc.array(callArbS, { minLength: 1, maxLength: 6 }), fc.constantFrom(0, 1, 2), (calls, mode) => {
        const s = new Sampler(10, 3, mode, 7);
        s.free();
        for (const c of calls) {
          const res = prop.attempt(() => (c === 'next' ? s.next() : c === 'batchAt' ? s.batchAt(0) : c === 'seek' ? s.seek(0) : c === 'free' ? s.free() : s[c]));
          if (c === 'free') {
            assert.ok(!('error' in res), `Sampler.free() twice threw ${prop.show(res.error)}`);
            continue;
          }
          prop.expectThrows(res, ['LOADERX_CLOSED'], `Sampler.${c} after free()`);
        }
        assert.deepEqual(Array.from(new Sampler(10, 3, 0, 7).next()), [0, 1, 2]);
      }),
      { seed: prop.SEED, numRuns: 50 },
    );
  });
});
