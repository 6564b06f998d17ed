// gather / get / gatherBytes / lengths with any index argument give the snapshot's records or the
// documented LOADERX_INDEX / LOADERX_ARGUMENT / LOADERX_TOO_LARGE error, alone and concurrently.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { describe, test } from 'node:test';
import fc from 'fast-check';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

describe('indices: gather / get / gatherBytes / lengths', () => {
  for (const spec of prop.TARGETS) {
    test(`${spec.name}: every index argument gives the snapshot's records or the documented error`, async () => {
      const t = prop.targets.get(spec.name);
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(prop.callArb(t), async (call) => {
          await prop.runCall(t, call);
          await prop.assertUnchanged(t, ++runs % 25 === 0);
        }),
        { seed: prop.SEED, numRuns: 250 },
      );
      await prop.assertUnchanged(t, true);
    });
  }

  for (const name of ['u8img_zstd', 'tokens_i32_ragged_zstd_dict']) {
    test(`${name}: good and bad calls at once do not disturb each other`, async () => {
      const t = prop.targets.get(name);
      const small = { ...t, huge: null };
      await fc.assert(
        fc.asyncProperty(fc.array(prop.callArb(small), { minLength: 2, maxLength: 8 }), async (calls) => {
          await Promise.all(calls.map((c) => prop.runCall(t, c)));
          await prop.assertUnchanged(t);
        }),
        { seed: prop.SEED, numRuns: 60 },
      );
      await prop.assertUnchanged(t, true);
      await prop.stillWorks();
    });
  }
});
