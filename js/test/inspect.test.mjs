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
# A mix with masks per source (none on the second), on 2 ranks.
other_mask = Mask.build(other, range(0, 90, 4))
other_mask.save(f"{root}/other.lxmask")
with DataLoader.mix([{"x": ds}, {"x": other}], [1.0, 1.0], batch_size=12, mode=2, seed=8, exclude=[mask, other_mask], shard_index=1, shard_count=2, num_workers=1) as mm:
    rows = [to_joined([np.asarray(next(mm)["x"]).tolist()])[0] for _ in range(4)]
    out["mixmasked"] = {"receipt": mm.receipt(), "rank1": rows,
                        "python": {k: indices(mm.receipt(), k, mask=[mask, other_mask])["ranks"] for k in range(4)}}
# Packed runs: one source through a mask (best_fit, 2 ranks), and a mix of two (concat).
from loaderx.converter import from_iterator
from loaderx.dataset import RaggedDataset
rng = np.random.default_rng(4)
for name, count in (("docs", 60), ("docs2", 25)):
    from_iterator(f"{root}/{name}", iter([rng.integers(1, 999, n).astype(np.int32) for n in rng.integers(1, 50, count)]), progress=False)
docs, docs2 = RaggedDataset(f"{root}/docs"), RaggedDataset(f"{root}/docs2")
dmask = Mask.build(docs, [1, 2, 3, 40])
dmask.save(f"{root}/docs.lxmask")
lengths = lambda d: [len(d[i]) for i in range(len(d))]
packed = {"lengths": [lengths(docs), lengths(docs2)]}
for r in range(2):
    with DataLoader.packed(docs, 32, 6, "best_fit", "cyclic", 3, bins=4, exclude=dmask, shard_index=r, shard_count=2, num_workers=1) as p:
        packed[f"rank{r}"] = [np.asarray(next(p)["doc_index"]).tolist() for _ in range(5)]
        if r == 0:
            packed["receipt"] = p.receipt()
with DataLoader.packed([docs, docs2], 16, 4, weights=[2.0, 1.0], seed=6, num_workers=1) as p:
    got = []
    for _ in range(5):
        b = next(p)
        got.append(np.where(b["doc_index"] >= 0, b["doc_index"] + 60 * b["source"][:, None], -1).tolist())
    packed["mix"] = {"receipt": p.receipt(), "seen": got,
                     "python": {k: indices(p.receipt(), k, sources=[docs, docs2])["rows"] for k in range(5)}}
packed["python"] = {k: indices(packed["receipt"], k, mask=dmask, sources=docs)["rows"] for k in range(5)}
out["packed"] = packed
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

  test('a mix with a mask per source', (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const { receipt, rank1, python } = py.value.mixmasked;
    const masks = [new Mask(readFileSync(join(dir, 'ids.lxmask'))), new Mask(readFileSync(join(dir, 'other.lxmask')))];
    assert.throws(() => stepRecords(receipt, 0, { mask: masks[0] }), { code: 'LOADERX_ARGUMENT', message: /masks per source/ });
    assert.throws(() => stepRecords(receipt, 0, { masks: [masks[0], null] }), { code: 'LOADERX_ARGUMENT', message: /source 1/ });
    for (let k = 0; k < 4; k++) {
      const got = stepRecords(receipt, k, { masks });
      assert.deepEqual(got.ranks, python[k], `step ${k}: Python's receipt.indices`);
      assert.deepEqual(got.ranks[1], rank1[k], `step ${k}: what rank 1 read`);
    }
  });

  test('packed runs: rows from the sources\' lengths, through a mask, on 2 ranks, and mixed', (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const p = py.value.packed;
    const mask = new Mask(readFileSync(join(dir, 'docs.lxmask')));
    assert.throws(() => stepRecords(p.receipt, 0, { mask }), { code: 'LOADERX_ARGUMENT', message: /document lengths/ });
    assert.throws(() => stepRecords(p.receipt, 0, { mask, lengths: p.lengths[0].slice(1) }), { code: 'LOADERX_ARGUMENT' });
    /** Each row's slots, as the loader's doc_index shows them. */
    const slots = (rows) => rows.map((row) => row.flatMap(([d, , n]) => Array(n).fill(d)));
    for (let k = 0; k < 5; k++) {
      const got = stepRecords(p.receipt, k, { mask, lengths: p.lengths[0] });
      assert.deepEqual(got.rows, p.python[k], `step ${k}: Python's receipt.indices`);
      for (const r of [0, 1]) {
        const yielded = p[`rank${r}`][k].map((row) => row.filter((d) => d >= 0));
        assert.deepEqual(slots(got.rows?.[r] ?? []), yielded, `step ${k}, rank ${r}: the loader's doc_index`);
        assert.deepEqual(got.ranks[r], [...new Set(yielded.flat())]);
      }
      assert.ok(!got.global.some((d) => [1, 2, 3, 40].includes(d)), 'no excluded record');
    }
    for (let k = 0; k < 5; k++) {
      const got = stepRecords(p.mix.receipt, k, { lengths: p.lengths });
      assert.deepEqual(got.rows, p.mix.python[k], `mixed step ${k}: Python's receipt.indices`);
      assert.deepEqual(slots(got.rows?.[0] ?? []), p.mix.seen[k].map((row) => row.filter((d) => d >= 0)), `mixed step ${k}: the loader's rows`);
    }
  });

  test('what is not a run is refused readably', () => {
    for (const bad of [null, 3, {}, { config: { length: 5, batch_size: 2, mode: 1, seed: 1, mix: [2, 'x'] } }, { config: { length: -1, batch_size: 2, mode: 1, seed: 1 } }]) {
      assert.throws(() => stepRecords(bad, 0), { code: 'LOADERX_ARGUMENT' }, JSON.stringify(bad));
    }
  });
});
