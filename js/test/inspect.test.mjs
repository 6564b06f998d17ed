// The step inspector's rule (stepRecords) against Python's loaders: for every sampler mode, a run
// whose world size changes on resume (two segments of receipts), a loader state, a mixed run with
// a linear schedule resumed with new weights, and a run through an exclusion mask, Node gives each rank the records Python's DataLoader read at that step
// (`loaderx.receipt.indices`, itself checked against the batches in the Python tests), and the
// batches the loader actually yielded.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Mask, stepRecords } from '../src/node.js';
import { removeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PY_CODE = `
import json, sys
import numpy as np
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.mask import Mask
from loaderx.receipt import indices
root = json.load(sys.stdin)["root"]
from_numpy(f"{root}/ids", np.arange(257, dtype=np.int64), codec="raw")
ds = DenseDataset(f"{root}/ids")
out = {}
for mode in (0, 1, 2):
    seen = {}
    with DataLoader({"x": ds}, batch_size=24, mode=mode, seed=5, num_workers=1) as one:
        for k in range(6):
            seen[k] = [np.asarray(next(one)["x"]).tolist()]
        state = one.state_dict()
    ranks = []
    for r in range(3):
        with DataLoader({"x": ds}, batch_size=24, mode=mode, seed=5, shard_index=r, shard_count=3, num_workers=1) as l:
            l.load_state_dict(state)
            ranks.append([np.asarray(next(l)["x"]).tolist() for _ in range(5)])
            if r == 0:
                receipt = l.receipt()
    for k in range(5):
        seen[6 + k] = [ranks[r][k] for r in range(3)]
    out[mode] = {"receipt": receipt, "state": state, "seen": seen,
                 "python": {k: indices(receipt, k)["ranks"] for k in range(11)}}
# A mix of two sources with a linear schedule, resumed on 2 ranks with new weights.
from_numpy(f"{root}/other", np.arange(1000, 1090, dtype=np.int64), codec="raw")
other = DenseDataset(f"{root}/other")
sched = {"points": [[0, [3.0, 1.0]], [6, [1.0, 1.0]]], "interpolation": "linear"}
mixed = {}
with DataLoader.mix([{"x": ds}, {"x": other}], sched, batch_size=16, mode=2, seed=4, num_workers=1) as a:
    for k in range(5):
        mixed[k] = [np.asarray(next(a)["x"]).tolist()]
    st = a.state_dict()
ranks = []
for r in range(2):
    with DataLoader.mix([{"x": ds}, {"x": other}], [1.0, 3.0], batch_size=16, mode=2, seed=4, shard_index=r, shard_count=2, num_workers=1) as b:
        b.load_state_dict(st)
        ranks.append([np.asarray(next(b)["x"]).tolist() for _ in range(3)])
        if r == 0:
            mreceipt = b.receipt()
for k in range(3):
    mixed[5 + k] = [ranks[r][k] for r in range(2)]
# The loaders yield the records' values: ids 0..256 for ds, 1000.. for other; joined indices are
# ds's index, or 257 + (value - 1000).
to_joined = lambda rows: [[v if v < 1000 else 257 + v - 1000 for v in row] for row in rows]
out["mix"] = {"receipt": mreceipt, "state": st, "seen": {k: to_joined(v) for k, v in mixed.items()},
              "python": {k: indices(mreceipt, k)["ranks"] for k in range(8)}}
mask = Mask.build(ds, [0, 1, 2, 100, 256])
mask.save(f"{root}/ids.lxmask")
with DataLoader({"x": ds}, batch_size=16, mode=2, seed=1, exclude=mask, num_workers=1) as m:
    batches = [np.asarray(next(m)["x"]).tolist() for _ in range(4)]
    out["masked"] = {"receipt": m.receipt(), "batches": batches, "digest": mask.digest}
print(json.dumps(out))
`;

describe('stepRecords against Python loaders', () => {
  let dir, py;
  before(() => {
    dir = tempDir('lx-inspect-');
    py = pythonJson(PY_CODE, { root: dir });
  });
  after(() => removeDir(dir));

  for (const mode of [0, 1, 2]) {
    test(`mode ${mode}: every step of a run resumed on 3 ranks, from its receipt and its state`, (t) => {
      if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
      const { receipt, state, seen, python } = py.value[mode];
      for (let k = 0; k < 11; k++) {
        const got = stepRecords(receipt, k);
        assert.deepEqual(got.ranks, python[k], `step ${k}: Python's receipt.indices`);
        assert.deepEqual(got.ranks, seen[k], `step ${k}: what the loaders yielded`);
        assert.equal(got.shardCount, k < 6 ? 1 : 3);
      }
      // A state: steps before it by its history, steps from it on by its shard count (1).
      assert.deepEqual(stepRecords(state, 3).ranks, seen[3]);
      assert.deepEqual(stepRecords(state, 8).ranks, [seen[8].flat()]);
      assert.throws(() => stepRecords(receipt, 11), { code: 'LOADERX_ARGUMENT', message: /not consumed/ });
    });
  }

  test("a masked run needs its mask and then gives the loader's records", (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const { receipt, batches, digest } = py.value.masked;
    assert.throws(() => stepRecords(receipt, 0), { code: 'LOADERX_ARGUMENT', message: /mask/ });
    const mask = new Mask(readFileSync(join(dir, 'ids.lxmask')));
    for (let k = 0; k < 4; k++) assert.deepEqual(stepRecords(receipt, k, { mask, digest }).ranks, [batches[k]]);
    assert.throws(() => stepRecords(receipt, 0, { mask, digest: 'sha256:00' }), { code: 'LOADERX_ARGUMENT' });
  });

  test('a mixed run with a schedule, resumed on 2 ranks with new weights', (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const { receipt, state, seen, python } = py.value.mix;
    for (let k = 0; k < 8; k++) {
      const got = stepRecords(receipt, k);
      assert.deepEqual(got.ranks, python[k], `step ${k}: Python's receipt.indices`);
      assert.deepEqual(got.ranks, seen[k], `step ${k}: what the loaders yielded`);
    }
    assert.deepEqual(stepRecords(state, 2).ranks, seen[2], 'the state, by its history');
  });

  test('what is not a run is refused readably', () => {
    for (const bad of [null, 3, {}, { config: { length: 5, batch_size: 2, mode: 1, seed: 1, mix: [2, 'x'] } }, { config: { length: -1, batch_size: 2, mode: 1, seed: 1 } }]) {
      assert.throws(() => stepRecords(bad, 0), { code: 'LOADERX_ARGUMENT' }, JSON.stringify(bad));
    }
  });
});
