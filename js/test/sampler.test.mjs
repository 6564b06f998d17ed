// The sampler: SEQUENTIAL reproduces the reference recording (tests/fixtures/v3/sampler.json);
// IID and CYCLIC give exactly the batches of our Python sampler (loaderx.sampler.Sampler, run
// in /work/main/.venv or $LOADERX_PYTHON; skipped when absent, failed then if LOADERX_REQUIRE_PY=1).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sampler } from '../src/node.js';
import { FIXTURES, range } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const recording = JSON.parse(readFileSync(join(FIXTURES, 'sampler.json'), 'utf8'));
const MODES = { SEQUENTIAL: 0, IID: 1, CYCLIC: 2 };
const list = (a) => Array.from(a);

describe('SEQUENTIAL matches the reference recording', () => {
  const cases = recording.cases.filter((c) => c.mode === MODES.SEQUENTIAL);
  test('the recording has sequential cases', () => assert.ok(cases.length > 0));
  for (const c of cases) {
    test(`length ${c.length}, batch ${c.batch_size}, seed ${c.seed}`, () => {
      const s = new Sampler(c.length, c.batch_size, c.mode, c.seed);
      c.steps.forEach((want, k) => {
        assert.equal(s.step, k);
        const got = s.next();
        assert.ok(got instanceof Float64Array);
        assert.deepEqual(list(got), want, `step ${k}`);
        assert.deepEqual(list(s.batchAt(k)), want, `batchAt(${k})`);
      });
      assert.equal(s.step, c.steps.length);
      for (const [step, want] of Object.entries(c.seek_then_next)) {
        s.seek(Number(step));
        assert.deepEqual(list(s.next()), want, `seek(${step}) then next()`);
        assert.equal(s.step, Number(step) + 1);
        s.seek(BigInt(step));
        assert.deepEqual(list(s.next()), want, `seek(${step}n) then next()`);
        assert.deepEqual(list(s.batchAt(BigInt(step))), want, `batchAt(${step}n)`);
      }
      s.free();
    });
  }
});

// IID and CYCLIC against Python. Seeds and steps are strings so 2^63 and 2^64 - 1 stay exact.
const STEPS = [...range(12), 17, 100, 100000, 10 ** 12].map(String);
const PY_CASES = [
  ...recording.cases.filter((c) => c.mode !== MODES.SEQUENTIAL).map((c) => ({ length: c.length, batch: c.batch_size, mode: c.mode, seed: String(c.seed), steps: STEPS })),
  ...[1, 2].flatMap((mode) => [
    { length: 1000, batch: 32, mode, seed: String(2n ** 63n), steps: ['0', '1', '30', '31', '999999', String(10 ** 12), String(2n ** 64n - 1n)] },
    { length: 2 ** 40, batch: 7, mode, seed: String(2n ** 64n - 1n), steps: ['0', '1', String(10 ** 12)] },
    { length: 2 ** 53 - 1, batch: 3, mode, seed: '7', steps: ['0', '5', String(2 ** 53)] },
    { length: 5, batch: 8, mode, seed: '0', steps: ['0', '1', '2', String(10 ** 12)] },
    { length: 1, batch: 1, mode, seed: '3', steps: ['0', '1'] },
  ]),
];

const PY_CODE = `
import json, sys
from loaderx.sampler import Sampler
out = []
for c in json.load(sys.stdin):
    s = Sampler(c["length"], c["batch"], c["mode"], int(c["seed"]))
    out.append([s.batch_at(int(k)).tolist() for k in c["steps"]])
print(json.dumps(out))
`;

describe('IID and CYCLIC equal the Python sampler', () => {
  /** @type {{ value?: any, missing?: string }} */
  let py = {};
  before(() => {
    py = pythonJson(PY_CODE, PY_CASES);
  });

  PY_CASES.forEach((c, n) => {
    const name = `${Object.keys(MODES)[c.mode]} length ${c.length}, batch ${c.batch}, seed ${c.seed}`;
    test(name, (t) => {
      if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
      const s = new Sampler(c.length, c.batch, c.mode, BigInt(c.seed));
      c.steps.forEach((step, k) => {
        assert.deepEqual(list(s.batchAt(BigInt(step))), py.value[n][k], `batchAt(${step})`);
      });
      // next() walks the same batches.
      const small = c.steps.filter((x) => Number(x) < 12).map(Number);
      for (let k = 0; k <= Math.max(-1, ...small); k++) {
        const got = list(s.next());
        const at = c.steps.indexOf(String(k));
        if (at >= 0) assert.deepEqual(got, py.value[n][at], `next() at step ${k}`);
      }
      s.free();
    });
  });
});

describe('sampler properties', () => {
  test('modes may be given by name', () => {
    assert.deepEqual(Sampler.Mode, MODES);
    for (const [name, mode] of /** @type {[keyof typeof Sampler.Mode, 0 | 1 | 2][]} */ (Object.entries(MODES))) {
      const a = new Sampler(50, 6, name, 9);
      const b = new Sampler(50, 6, mode, 9);
      assert.deepEqual(list(a.batchAt(3)), list(b.batchAt(3)));
      // Lower-case names work too, though the typings (SamplerMode) list only the upper-case ones.
      assert.deepEqual(list(new Sampler(50, 6, /** @type {any} */ (name.toLowerCase()), 9).batchAt(3)), list(b.batchAt(3)));
    }
  });

  test('batchAt does not move the cursor; seek does', () => {
    const s = new Sampler(100, 10, 'IID', 5);
    const first = list(s.batchAt(0));
    s.batchAt(40);
    assert.equal(s.step, 0);
    assert.deepEqual(list(s.next()), first);
    s.seek(40);
    assert.equal(s.step, 40);
    assert.deepEqual(list(s.next()), list(s.batchAt(40)));
  });

  for (const [length, batch] of [[10, 4], [7, 3], [1000, 32], [64, 64], [5, 8]]) {
    test(`CYCLIC length ${length}, batch ${batch}: distinct indices within an epoch`, () => {
      const s = new Sampler(length, batch, 'CYCLIC', 2n ** 63n);
      const per = Math.max(1, Math.floor(length / batch)); // batches per epoch (remainder dropped)
      const width = Math.min(length, batch);
      assert.equal(s.batchLength, width);
      for (const epoch of [0, 1, 2, Math.floor(10 ** 12 / per)]) {
        const seen = new Set();
        for (let b = 0; b < per; b++) {
          const batchIdx = list(s.batchAt(epoch * per + b));
          assert.equal(batchIdx.length, width);
          for (const i of batchIdx) {
            assert.ok(Number.isInteger(i) && i >= 0 && i < length, `index ${i} in range`);
            assert.ok(!seen.has(i), `index ${i} repeats within epoch ${epoch}`);
            seen.add(i);
          }
        }
        assert.equal(seen.size, per * width);
      }
    });
  }

  test('IID indices are in range', () => {
    const s = new Sampler(13, 50, 'IID', 1);
    for (let k = 0; k < 20; k++) for (const i of s.next()) assert.ok(Number.isInteger(i) && i >= 0 && i < 13);
  });
});
