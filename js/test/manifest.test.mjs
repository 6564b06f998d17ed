// Store.open opens a manifest as it opens a store: by a directory holding manifest.json, the
// manifest's path or file: URL, an http(s) URL, or files by relative path. What it reads is
// what Python reads from the same manifest, byte for byte (the manifest and its stores written
// by Python here), and a manifest whose store changed is refused with Python's message.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Store } from '../src/node.js';
import { serve } from '../scripts/serve.mjs';
import { REPO, rejection, removeDir, sha256, tempDir } from './helpers/common.mjs';
import { required, skipUnlessRequired } from './helpers/require_all.mjs';

const PYTHON = process.env.LOADERX_PYTHON || join(REPO, '.venv/bin/python');

// Four stores (one empty), dense <f4 [2, 3], and a ragged manifest of three; Python then reads
// both manifests whole and the picks across stores, and prints each record's sha256.
const PY_WRITE = `
import hashlib, json, sys
import numpy as np
from loaderx import manifest
from loaderx.converter import from_numpy, from_iterator
from loaderx.dataset import DenseDataset, RaggedDataset
root = sys.argv[1]
rng = np.random.default_rng(24)
data = rng.standard_normal((24, 2, 3)).astype("<f4")
for k, (a, b) in enumerate([(0, 5), (5, 5), (5, 17), (17, 24)]):
    from_numpy(f"{root}/dense/p{k}", data[a:b], codec="raw" if k == 2 else "zstd", progress=False)
manifest.commit(f"{root}/dense", [f"p{k}" for k in range(4)])
for k, n in enumerate([3, 1, 4]):
    from_iterator(f"{root}/ragged/r{k}", (np.full((j + 1, 2), 10 * k + j, "<i2") for j in range(n)), progress=False)
manifest.commit(f"{root}/ragged/m.json", ["r0", "r1", "r2"])
h = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
dense = DenseDataset(f"{root}/dense")
ragged = RaggedDataset(f"{root}/ragged/m.json")
print(json.dumps({
    "dense": [h(dense[i]) for i in range(len(dense))],
    "ragged": [h(ragged[i]) for i in range(len(ragged))],
    "ragged_rows": [len(ragged[i]) for i in range(len(ragged))],
}))
`;

const PY_CHANGE = `
import sys
import numpy as np
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset
from_numpy(sys.argv[1] + "/dense/p3", np.zeros((2, 2, 3), "<f4"), progress=False)
try:
    DenseDataset(sys.argv[1] + "/dense")
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
`;

const python = (code, ...args) => {
  const env = { ...process.env };
  delete env.PYTHONPATH;
  return execFileSync(PYTHON, ['-c', code, ...args], { env, encoding: 'utf8', timeout: 120000 }).trim().split('\n').at(-1) ?? '';
};

/** Every file under `dir` by its path relative to it, each cut at 1 MiB (chunk files are
 *  preallocated to 4 GiB; these stores' records all lie in their first KiB). */
function filesUnder(dir, prefix = '') {
  const out = new Map();
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      for (const [k, v] of filesUnder(p, `${prefix}${name}/`)) out.set(k, v);
      continue;
    }
    const bytes = new Uint8Array(Math.min(statSync(p).size, 1 << 20));
    const fd = openSync(p, 'r');
    try {
      readSync(fd, bytes, 0, bytes.length, 0);
    } finally {
      closeSync(fd);
    }
    out.set(`${prefix}${name}`, bytes);
  }
  return out;
}

/** Each record's sha256, record by record (dense: each row of the gathered batch). */
async function hashes(store) {
  const all = Array.from({ length: store.length }, (_, k) => k);
  const got = await store.gather(all);
  if (!Array.isArray(got)) {
    const per = got.length / store.length;
    return all.map((k) => sha256(new Uint8Array(got.buffer, got.byteOffset + k * per * 4, per * 4)));
  }
  return got.map((a) => sha256(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)));
}

describe('manifests written by Python', () => {
  let root = '';
  /** @type {{dense: string[], ragged: string[], ragged_rows: number[]}} */
  let py = { dense: [], ragged: [], ragged_rows: [] };
  let missing = '';
  before(() => {
    if (!existsSync(PYTHON)) {
      missing = `no Python with loaderx at ${PYTHON} (set LOADERX_PYTHON)`;
      if (required(['LOADERX_REQUIRE_PY'])) throw new Error(`${missing} (LOADERX_REQUIRE_ALL or LOADERX_REQUIRE_PY=1)`);
      return;
    }
    root = tempDir('loaderx-manifest-');
    py = JSON.parse(python(PY_WRITE, root));
  });
  after(() => root && removeDir(root));

  test('a directory, a path and a file: URL read what Python reads', async (t) => {
    if (missing) return skipUnlessRequired(t, missing, ['LOADERX_REQUIRE_PY']);
    for (const where of [join(root, 'dense'), join(root, 'dense/manifest.json'), pathToFileURL(join(root, 'dense/manifest.json'))]) {
      const s = /** @type {import('../src/common.js').ManifestStoreApi} */ (/** @type {unknown} */ (await Store.open(where)));
      assert.equal(s.length, 24);
      assert.ok(/** @type {unknown} */ (s) instanceof Store);
      assert.deepEqual(s.stores, [{ path: 'p0', length: 5 }, { path: 'p1', length: 0 }, { path: 'p2', length: 12 }, { path: 'p3', length: 7 }]);
      assert.deepEqual([s.schema?.kind, s.schema?.dtype, s.schema?.itemShape], ['dense', '<f4', [2, 3]]);
      assert.deepEqual(await hashes(s), py.dense);
      const picks = [23, 0, 4, 5, 16, 17, 5];
      const got = await s.gatherBytes(picks);
      assert.deepEqual(got.map((b) => sha256(b)), picks.map((i) => py.dense[i]));
      assert.deepEqual(Array.from(await s.lengths(picks)), picks.map(() => 24));
      const one = await s.get(17);
      assert.deepEqual(one.shape, [2, 3]);
      assert.match(String(s), /^Manifest\(.*manifest\.json, 4 stores, 24 records\)$/);
      const stats = await s.stats();
      assert.equal(stats.records, 24);
      assert.equal(stats.logicalBytes, 24 * 24);
      assert.ok('p2/meta.zr' in stats.fileBytes);
      const report = await s.verify();
      assert.deepEqual([report.ok, report.checked], [true, 24]);
      const seen = [];
      for await (const b of s.batches({ batchSize: 10 })) seen.push(/** @type {any} */ (b).shape[0]);
      assert.deepEqual(seen, [10, 10, 4]);
      assert.equal((await rejection(s.gather([24]))).code, 'LOADERX_INDEX');
      await s.close();
      assert.equal((await rejection(s.gather([0]))).code, 'LOADERX_CLOSED');
    }
    const store = await Store.open(join(root, 'dense/p2'));
    assert.match(String(store), /^Store\(/, 'a store inside a manifest directory opens as a store');
    await store.close();
  });

  test('a ragged manifest (a .json of another name) reads what Python reads', async (t) => {
    if (missing) return skipUnlessRequired(t, missing, ['LOADERX_REQUIRE_PY']);
    const s = await Store.open(join(root, 'ragged/m.json'));
    assert.equal(s.length, 8);
    assert.deepEqual(await hashes(s), py.ragged);
    const got = /** @type {any[]} */ (await s.gather([7, 0, 3]));
    assert.deepEqual(got.map((a) => a.shape[0]), [7, 0, 3].map((i) => py.ragged_rows[i]));
    await s.close();
  });

  test('files by relative path, and a manifest over HTTP, read the same', async (t) => {
    if (missing) return skipUnlessRequired(t, missing, ['LOADERX_REQUIRE_PY']);
    const mem = await Store.open(filesUnder(join(root, 'dense')));
    assert.deepEqual(await hashes(mem), py.dense);
    await mem.close();
    const server = await serve({ root });
    try {
      for (const url of [`${server.url}dense/`, `${server.url}dense`, `${server.url}dense/manifest.json`, `${server.url}ragged/m.json`]) {
        const s = await Store.open(url);
        assert.deepEqual(await hashes(s), url.includes('ragged') ? py.ragged : py.dense, url);
        await s.close();
      }
      const store = await Store.open(`${server.url}dense/p0/`);
      assert.equal(store.length, 5);
      await store.close();
      assert.equal((await rejection(Store.open(`${server.url}nothing/`))).code, 'LOADERX_NOT_FOUND');
      assert.equal((await rejection(Store.open(`${server.url}nothing.json`))).code, 'LOADERX_NOT_FOUND');
    } finally {
      await server.close();
    }
  });

  test('a store that changed after it was listed is refused with the message Python gives', async (t) => {
    if (missing) return skipUnlessRequired(t, missing, ['LOADERX_REQUIRE_PY']);
    const said = python(PY_CHANGE, root);
    const why = 'store p3 holds 9 records, but the manifest lists 7: it changed after it was added';
    assert.ok(said.includes(why), said);
    const e = await rejection(Store.open(join(root, 'dense')));
    assert.equal(e.code, 'LOADERX_CORRUPT');
    assert.ok(e.message.includes(why), e.message);
  });
});

test('a manifest that is not one, or lists a missing store, is a typed error naming it', async () => {
  const dir = tempDir('loaderx-manifest-bad-');
  try {
    const bad = await rejection(Store.open(new Map([['manifest.json', new TextEncoder().encode('{}')]])));
    assert.equal(bad.code, 'LOADERX_CORRUPT');
    assert.match(bad.message, /not a loaderx manifest/);
    const listing = JSON.stringify({ format: 'loaderx-manifest', version: 1, stores: [{ path: 'gone', length: 3 }] });
    const gone = await rejection(Store.open(new Map([['manifest.json', new TextEncoder().encode(listing)]])));
    assert.equal(gone.code, 'LOADERX_NOT_FOUND');
    assert.match(gone.message, /store gone/);
    const empty = await rejection(Store.open(dir));
    assert.equal(empty.code, 'LOADERX_NOT_FOUND', 'a directory with neither file fails as it always did');
  } finally {
    removeDir(dir);
  }
});
