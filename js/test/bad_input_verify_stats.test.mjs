// verify() and stats() with any options (batchSize, onProgress that is junk, throws or calls
// back into the store) resolve with the store's answer or reject with a documented code.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// verify and stats options

describe('verify and stats options', () => {
  for (const name of ['u8img_zstd', 'tokens_i32_ragged_zstd_dict', 'empty_dense']) {
    test(`${name}: verify with bad batchSize / onProgress succeeds with the snapshot report or fails as documented`, async () => {
      const t = prop.targets.get(name);
      await fc.assert(
        // batchSize and progress: generated good and bad values, deliberately of any type.
        fc.asyncProperty(prop.batchSizeArb, prop.onProgressArb, fc.boolean(), async (/** @type {any} */ batchSize, /** @type {any} */ progress, withKey) => {
          const log = [];
          const extra = [];
          const opts = { onProgress: prop.makeProgress(progress, t, log, extra) };
          if (withKey || batchSize !== undefined) opts.batchSize = batchSize;
          const res = await prop.settle(() => t.store.verify(opts));
          await Promise.all(extra);
          const total = t.snap.length;
          if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize >= 1)) {
            prop.expectRejects(res, ['LOADERX_ARGUMENT'], `verify({batchSize: ${fc.stringify(batchSize)}})`);
          } else if (typeof progress === 'object' && progress.throwAt < Math.max(1, Math.ceil(total / (batchSize ?? 1024)))) {
            // onProgress throws: the call fails, as some LoaderxError (the README names no code
            // for it); a thrown LoaderxError passes through, anything else is wrapped.
            prop.expectRejects(res, progress.thrown === 'loaderx' ? ['LOADERX_ARGUMENT'] : null, `verify with onProgress ${fc.stringify(progress)}`);
          } else if (typeof progress === 'object' && 'junk' in progress) {
            // onProgress is not a function: a bad argument, before any record is read.
            prop.expectRejects(res, ['LOADERX_ARGUMENT'], `verify with onProgress ${fc.stringify(progress)}`);
            assert.equal(log.length, 0);
          } else {
            assert.deepEqual(prop.expectResolves(res, 'verify'), t.snap.verify);
            if (progress === 'record' || progress === 'reenter') {
              const steps = Math.max(1, Math.ceil(total / (batchSize ?? 1024)));
              assert.equal(log.length, steps, 'one onProgress call per batch');
              assert.deepEqual(log.at(-1), [total, total]);
              log.forEach(([d, n], k) => { assert.ok(n === total && d <= total && (k === 0 || d > log[k - 1][0] || total === 0)); });
            }
          }
          await prop.assertUnchanged(t);
        }),
        { seed: prop.SEED, numRuns: 120 },
      );
      await prop.assertUnchanged(t, true);
    });
  }

  test('verify(options) and stats(anything) with options that are not objects: the snapshot answer or LOADERX_ARGUMENT', async () => {
    const t = prop.targets.get('u8img_zstd');
    const junk = fc.oneof(
      fc.constantFrom(undefined, null, 0, 1, -1, NaN, '', 'x', true, false, Symbol('o'), 1n, () => {}, [], [1], new Date(0), new Map()),
      fc.anything({ maxDepth: 1 }),
    );
    await fc.assert(
      fc.asyncProperty(junk, async (value) => {
        const res = await prop.settle(() => t.store.verify(value));
        if ('error' in res) prop.expectRejects(res, ['LOADERX_ARGUMENT'], `verify(${fc.stringify(value)})`);
        else assert.deepEqual(prop.expectResolves(res, `verify(${fc.stringify(value)})`), t.snap.verify);
        assert.deepEqual(prop.expectResolves(await prop.settle(() => t.store.stats(value, value)), 'stats'), t.snap.stats);
        await prop.assertUnchanged(t);
      }),
      { seed: prop.SEED, numRuns: 80 },
    );
  });
});
