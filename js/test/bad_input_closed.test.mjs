// Every call on a closed store, and every call in flight when it closes: LOADERX_CLOSED, or the
// call's own answer.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Store, MemorySource } from '../src/node.js';
import { fixture, readStoreFiles, storeDir } from './helpers/common.mjs';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// A closed store

describe('a closed store', () => {
  const t = () => prop.targets.get('u8img_zstd');
  /** One call on a closed store (`chain`: the target's snapshot exists only once `before` ran). */
  const closedCallArb = fc.oneof(
    { weight: 4, arbitrary: fc.constant(null).chain(() => prop.callArb(t())) },
    { weight: 1, arbitrary: fc.record({ method: fc.constant('verify'), batchSize: prop.batchSizeArb }) },
    { weight: 1, arbitrary: fc.record({ method: fc.constantFrom('stats', 'close', 'length', 'header', 'hasDict', 'schema') }) },
  );

  async function onClosed(store, c) {
    const what = `closed store.${c.method}`;
    if (['length', 'header', 'hasDict'].includes(c.method)) {
      return prop.expectThrows(await prop.settle(() => store[c.method]), ['LOADERX_CLOSED'], what);
    }
    if (c.method === 'schema') return assert.deepEqual(store.schema, t().snap.schema);
    if (c.method === 'close') return prop.expectResolves(await prop.settle(() => store.close()), what);
    if (c.method === 'stats') return prop.expectRejects(await prop.settle(() => store.stats()), ['LOADERX_CLOSED'], what);
    if (c.method === 'verify') {
      const bad = c.batchSize !== undefined && !(Number.isSafeInteger(c.batchSize) && c.batchSize >= 1);
      // A bad batchSize is checked before the store: LOADERX_ARGUMENT is documented as well.
      return prop.expectRejects(await prop.settle(() => store.verify({ batchSize: c.batchSize })), bad ? ['LOADERX_CLOSED', 'LOADERX_ARGUMENT'] : ['LOADERX_CLOSED'], what);
    }
    return prop.expectRejects(await prop.settle(() => store[c.method](prop.build(c.arg))), ['LOADERX_CLOSED'], what);
  }

  test('every call after close() is LOADERX_CLOSED (good or bad arguments), in any order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(closedCallArb, { minLength: 1, maxLength: 6 }), fc.boolean(), async (calls, memory) => {
        const dir = storeDir(fixture('u8img_zstd'));
        const store = await Store.open(memory ? new MemorySource(readStoreFiles(dir)) : dir);
        await store.close();
        for (const c of calls) await onClosed(store, c);
      }),
      { seed: prop.SEED, numRuns: 80 },
    );
    await prop.stillWorks();
  });

  test('calls in flight when the store closes: their own answer, or LOADERX_CLOSED', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(prop.callArb({ ...t(), huge: null }), { minLength: 1, maxLength: 6 }), fc.nat(3), async (calls, closeAfter) => {
        const base = t();
        const store = await prop.openTarget(base);
        const tt = { ...base, store };
        const pending = calls.map(async (c, k) => {
          const want = prop.model(tt, c.method, prop.build(c.arg));
          const res = await prop.settle(() => store[c.method](prop.build(c.arg)));
          if ('error' in res && res.error?.code === 'LOADERX_CLOSED') return prop.expectRejects(res, ['LOADERX_CLOSED'], `call ${k} in flight`);
          if (want.ok) prop.checkResult(tt, c.method, want.ok, prop.expectResolves(res, `call ${k} in flight`));
          else prop.expectRejects(res, want.codes, `call ${k} in flight`);
        });
        for (let k = 0; k < closeAfter; k++) await Promise.resolve();
        await store.close();
        await Promise.all(pending);
      }),
      { seed: prop.SEED, numRuns: 60 },
    );
    await prop.stillWorks();
  });
});
