// Packed rows: the wasm packer plans exactly the segments the Python engine plans (one core,
// every front end), for both packings and every mode, across epochs; and bad options are
// LOADERX_ARGUMENT. The Python side runs in /work/main/.venv or $LOADERX_PYTHON (skipped when
// absent, failed then if LOADERX_REQUIRE_PY=1).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Packer } from '../src/node.js';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

// Lengths from a small LCG, so both sides see the same documents without a store.
function lengths(n, max, seed) {
  let x = seed;
  return Array.from({ length: n }, () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return 1 + (x % max);
  });
}

const CASES = [];
for (const packing of ['concat', 'best_fit']) {
  for (const mode of [0, 1, 2]) {
    CASES.push({ lengths: lengths(300, 90, 7 + mode), seqLen: 64, packing, bins: 8, mode, seed: '12345', first: 0, rows: 700 });
    CASES.push({ lengths: lengths(40, 400, 3), seqLen: 128, packing, bins: 3, mode, seed: String(2n ** 64n - 1n), first: 90, rows: 60 });
  }
}

const PY_CODE = `
import json, sys
import numpy as np
from loaderx import _loaderx
out = []
for c in json.load(sys.stdin):
    p = _loaderx.Packer(np.array(c["lengths"], np.uint32), c["seqLen"], c["packing"], c["bins"], c["mode"], int(c["seed"]))
    cols = p.segments(c["first"], c["rows"])
    out.append(np.stack(cols, 1).reshape(-1).tolist())
print(json.dumps(out))
`;

describe('the wasm packer plans what the Python engine plans', () => {
  /** @type {{ value?: any, missing?: string }} */
  let py = {};
  before(() => {
    py = pythonJson(PY_CODE, CASES);
  });

  CASES.forEach((c, n) => {
    test(`${c.packing}, mode ${c.mode}, ${c.lengths.length} documents, rows ${c.first}..+${c.rows}`, (t) => {
      if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
      const p = new Packer(c.lengths, { seqLen: c.seqLen, packing: c.packing, bins: c.bins, mode: c.mode, seed: BigInt(c.seed) });
      const got = p.segments(c.first, c.rows).flatMap((g) => [g.row, g.col, g.len, g.doc, g.offset]);
      assert.ok(got.length > 0);
      assert.deepEqual(got, py.value[n]);
      p.free();
    });
  });
});

describe('packer properties', () => {
  test('concat rows are full and hold each token of a cyclic epoch once', () => {
    const lens = lengths(120, 50, 1);
    const total = lens.reduce((a, b) => a + b, 0);
    const p = new Packer(lens, { seqLen: 32, mode: 'cyclic', seed: 5 });
    assert.equal(p.tokens, total);
    assert.equal(p.documents, 120);
    assert.equal(p.epochRows(0), undefined);
    const segs = p.segments(0, Math.ceil(total / 32));
    const fill = new Map();
    const seen = new Set();
    let count = 0;
    for (const g of segs) {
      fill.set(g.row, (fill.get(g.row) ?? 0) + g.len);
      for (let k = 0; k < g.len && count < total; k++, count++) seen.add(`${g.doc}:${g.offset + k}`);
    }
    assert.ok([...fill.values()].every((f) => f === 32));
    assert.equal(seen.size, total);
    p.free();
    assert.throws(() => p.segments(0, 1), { code: 'LOADERX_CLOSED' });
  });

  test('bad options are LOADERX_ARGUMENT', () => {
    for (const options of [{ seqLen: 0 }, { seqLen: 8, packing: 'first_fit' }, { seqLen: 8, mode: 'random' }, { seqLen: 8, bins: 0, packing: 'best_fit' }]) {
      assert.throws(() => new Packer([3, 4], /** @type {any} */ (options)), { code: 'LOADERX_ARGUMENT' }, JSON.stringify(options));
    }
    assert.throws(() => new Packer([0, 0], { seqLen: 8 }), { code: 'LOADERX_ARGUMENT' });
    assert.throws(() => new Packer([-1], { seqLen: 8 }), { code: 'LOADERX_ARGUMENT' });
    assert.throws(() => new Packer([3], { seqLen: 8 }).segments(0, 2 ** 21), { code: 'LOADERX_ARGUMENT' });
  });
});
