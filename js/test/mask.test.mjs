// Exclusion masks across languages: Python (loaderx.mask) writes masks for a store with
// checksums, a store the reference wrote (no checksums: the identity samples records) and a
// manifest; Node computes the same identities, reads the masks, maps kept positions to the same
// records, builds byte-identical masks, and refuses a mask for another store.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Mask, Store } from '../src/node.js';
import { copyStore, fixture, removeDir, storeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PY_CODE = `
import json, sys
import numpy as np
from loaderx import manifest
from loaderx.converter import from_numpy
from loaderx.mask import Mask, identity
args = json.load(sys.stdin)
root = args["root"]
from_numpy(f"{root}/a", np.arange(500, dtype=np.int64), codec="zstd")
from_numpy(f"{root}/b", np.arange(70, dtype=np.float32).reshape(70, 1) * 0.5, codec="raw")
from_numpy(f"{root}/a2", np.arange(30, dtype=np.int64), codec="raw")
manifest.commit(f"{root}/m", ["../a", "../a2"])
out = {}
for name, excl in [("a", [0, 7, 499]), ("ref", [1, 2, 3]), ("m", [499, 500, 529])]:
    mask = Mask.build(f"{root}/{name}", excl)
    mask.save(f"{root}/{name}.lxmask")
    kept = np.setdiff1d(np.arange(mask.length), excl)
    out[name] = {"identity": identity(f"{root}/{name}"), "kept": mask.kept, "select": mask.select(np.arange(0, mask.kept, 13)).tolist(),
                 "want": kept[::13].tolist()}
print(json.dumps(out))
`;

describe('exclusion masks: Python and Node agree', () => {
  let dir, py;
  before(() => {
    dir = tempDir('lx-mask-');
    copyStore(storeDir(fixture('labels_i64_zstd')), join(dir, 'ref'));
    py = pythonJson(PY_CODE, { root: dir });
  });
  after(() => removeDir(dir));

  for (const name of ['a', 'ref', 'm']) {
    test(`${name}: the same identity, kept records and mask bytes`, async (t) => {
      if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
      const want = py.value[name];
      const store = await Store.open(join(dir, name));
      try {
        assert.equal(await store.maskIdentity(), want.identity);
        const bytes = readFileSync(join(dir, `${name}.lxmask`));
        const mask = new Mask(bytes);
        assert.equal(mask.identity, want.identity);
        assert.equal(mask.kept, want.kept);
        await mask.check(store);
        const picks = Array.from({ length: Math.ceil(want.kept / 13) }, (_, k) => k * 13);
        assert.deepEqual(Array.from(mask.select(picks)), want.select);
        assert.deepEqual(want.select, want.want);
        const excluded = Array.from({ length: mask.length }, (_, i) => i).filter((i) => mask.isExcluded(i));
        const built = await Mask.build(store, excluded.reverse());
        assert.deepEqual(Buffer.from(built.toBytes()), bytes, 'Node builds the same file');
        assert.throws(() => mask.select([mask.kept]), { code: 'LOADERX_ARGUMENT' });
      } finally {
        await store.close();
      }
    });
  }

  test('a mask for another store, or damaged, is refused', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const bytes = readFileSync(join(dir, 'a.lxmask'));
    const other = await Store.open(join(dir, 'b'));
    try {
      await assert.rejects(new Mask(bytes).check(other), { code: 'LOADERX_ARGUMENT' });
    } finally {
      await other.close();
    }
    const bad = Uint8Array.from(bytes);
    bad[70] ^= 1;
    assert.throws(() => new Mask(bad), { code: 'LOADERX_CORRUPT' });
    const a = await Store.open(join(dir, 'a'));
    try {
      await assert.rejects(Mask.build(a, [500]), { code: 'LOADERX_INDEX' });
    } finally {
      await a.close();
    }
  });
});
