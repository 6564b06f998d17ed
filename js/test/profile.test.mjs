// Whole-store statistics (Store.profile) against NumPy: Python writes the stores (a million
// float32 values with NaN and ±Inf, per-channel images, int64 labels, ragged token lists with
// duplicates, a manifest of two stores) and computes every number with NumPy; the wasm build's
// profile must give the same counts, histograms, value counts, duplicate groups and NaN records,
// and means and deviations within float64 rounding. Also: progress, abort, bad options, and
// loaderx-qa's statistics, output formats and thresholds (exit 3), locally and over HTTP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { serve } from '../scripts/serve.mjs';
import { Store } from '../src/node.js';
import { JS_DIR, removeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PY_CODE = `
import json, sys
import numpy as np
from loaderx.converter import from_numpy, from_iterator
from loaderx import manifest
args = json.load(sys.stdin)
root = args["root"]
rng = np.random.default_rng(5)
BINS = 20

def hist(v):
    v = v.astype(np.float64)
    lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 0.0)
    counts, edges = np.histogram(v, bins=BINS, range=(lo, hi))
    return {"edges": edges.tolist(), "counts": counts.tolist()}

def channel(v):
    v = np.asarray(v).ravel()
    f = v[np.isfinite(v)] if v.dtype.kind == "f" else v
    f64 = f.astype(np.float64)
    out = {"count": int(f.size), "nan": int(np.isnan(v).sum()) if v.dtype.kind == "f" else 0,
           "posInf": int(np.isposinf(v).sum()) if v.dtype.kind == "f" else 0,
           "negInf": int(np.isneginf(v).sum()) if v.dtype.kind == "f" else 0}
    if f.size:
        out.update(min=float(f64.min()), max=float(f64.max()), mean=float(f64.mean()), std=float(f64.std()), histogram=hist(f64))
    return out

def groups(records):
    seen = {}
    for i, r in enumerate(records):
        seen.setdefault(bytes(r), []).append(i)
    return sorted([g for g in seen.values() if len(g) > 1], key=lambda g: g[0])

expected = {}

# A million float32 values around 1e4 (a float32 running sum would drift), some NaN and Inf.
scalars = (1e4 + rng.standard_normal(1_000_000)).astype(np.float32)
scalars[[3, 77, 500_000]] = np.nan
scalars[[10, 999_999]] = np.inf
scalars[42] = -np.inf
from_numpy(f"{root}/floats", scalars, codec="zstd")
expected["floats"] = {"channels": [channel(scalars)], "nanRecords": [3, 77, 500_000], "records": scalars.size,
                      "duplicates": groups(scalars.view(np.uint32).reshape(-1, 1).view(np.uint8).reshape(-1, 4))}

# Pictures: per channel (the last axis, 3).
pics = rng.integers(0, 256, (300, 8, 6, 3), dtype=np.uint8)
pics[:, :, :, 2] //= 4
from_numpy(f"{root}/pictures", pics, codec="raw")
expected["pictures"] = {"channels": [channel(pics[..., c]) for c in range(3)], "records": len(pics)}

# Labels: value counts; two stores committed to a manifest read as one.
labels = rng.integers(0, 10, 20_000).astype(np.int64)
labels[:5] = [-3, 900, 900, 7, 7]
from_numpy(f"{root}/labels_a", labels[:12_000], codec="zstd")
from_numpy(f"{root}/labels_b", labels[12_000:], codec="raw")
manifest.commit(f"{root}/labels", ["../labels_a", "../labels_b"])
values, counts = np.unique(labels, return_counts=True)
expected["labels"] = {"channels": [channel(labels)], "valueCounts": [[int(v), int(c)] for v, c in zip(values, counts)],
                      "records": labels.size}

# Ragged token lists with repeats.
docs = [rng.integers(0, 50_000, int(n), dtype=np.uint32) for n in rng.integers(1, 400, 3000)]
for i, j in [(10, 2000), (10, 2999), (5, 6)]:
    docs[j] = docs[i].copy()
docs[100] = np.array([7], np.uint32)
from_iterator(f"{root}/tokens", docs, codec="zstd")
lengths = np.array([len(d) for d in docs])
flat = np.concatenate(docs)
expected["tokens"] = {"channels": [channel(flat)], "records": len(docs),
                      "lengths": {"min": int(lengths.min()), "max": int(lengths.max()), "mean": float(lengths.mean()), "histogram": hist(lengths)},
                      "duplicates": groups([d.tobytes() for d in docs])}
print(json.dumps(expected))
`;

const close = (got, want, what) => {
  const tol = 1e-9 * Math.max(1, Math.abs(want));
  assert.ok(Math.abs(got - want) <= tol, `${what}: ${got} against NumPy's ${want}`);
};

/** The channel statistics equal NumPy's: counts and histograms exactly, moments within rounding. */
function sameChannel(got, want, what) {
  for (const k of ['count', 'nan', 'posInf', 'negInf', 'min', 'max']) assert.equal(got[k], want[k] ?? null, `${what} ${k}`);
  close(got.mean, want.mean, `${what} mean`);
  close(got.std, want.std, `${what} std`);
  assert.deepEqual(got.histogram.edges, want.histogram.edges, `${what} histogram edges`);
  assert.deepEqual(got.histogram.counts, want.histogram.counts, `${what} histogram counts`);
}

/** Runs loaderx-qa; resolves to `{code, stdout, stderr}`. */
function qa(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(JS_DIR, 'examples/qa.mjs'), ...args], { encoding: 'utf8', timeout: 120000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

describe('Store.profile against NumPy', () => {
  let dir, py;
  before(() => {
    dir = tempDir('lx-profile-');
    py = pythonJson(PY_CODE, { root: dir });
  });
  after(() => removeDir(dir));

  const profileOf = async (name, options) => {
    const store = await Store.open(join(dir, name));
    try {
      return /** @type {any} */ (await store.profile(options));
    } finally {
      await store.close();
    }
  };

  test('a million float32 values: moments, NaN and Inf counts, histogram, NaN records', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const want = py.value.floats;
    const seen = [];
    const got = await profileOf('floats', { onProgress: (done, total, pass) => seen.push([done, total, pass]) });
    assert.equal(got.records, want.records);
    sameChannel(got.channels[0], want.channels[0], 'floats');
    assert.deepEqual(got.nanRecords, { count: 3, indices: want.nanRecords });
    assert.equal(got.valueCounts, null);
    assert.equal(got.lengths, null);
    // Progress: both passes, in order, each ending at the total.
    assert.deepEqual(seen.at(-1), [want.records, want.records, 2]);
    assert.ok(seen.some(([d, tot, p]) => p === 1 && d === tot), 'the first pass completes');
    assert.ok(seen.every(([d], k) => k === 0 || d > seen[k - 1][0] || seen[k - 1][2] === 1), 'monotonic within a pass');
    // Equal float32 values are duplicate records; NumPy's groups, capped at 1000 listed.
    assert.equal(got.duplicates.groups, want.duplicates.length);
    assert.deepEqual(got.duplicates.listed, want.duplicates.slice(0, 1000));
    // Every record under some codec (4-byte records do not shrink: zstd stores them raw).
    assert.equal(got.codecs.reduce((a, c) => a + c.records, 0), want.records);
    assert.equal(got.codecs.reduce((a, c) => a + c.decodedBytes, 0), want.records * 4);
  });

  test('pictures are profiled per channel', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const want = py.value.pictures;
    const got = await profileOf('pictures', { bins: 20 });
    assert.equal(got.channels.length, 3);
    want.channels.forEach((w, c) => { sameChannel(got.channels[c], w, `channel ${c}`); });
    assert.deepEqual(got.codecs.map((c) => c.codec), ['raw']);
  });

  test('labels over a manifest of two stores: value counts and per-codec bytes', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const want = py.value.labels;
    const got = await profileOf('labels');
    assert.equal(got.records, want.records);
    assert.deepEqual(got.valueCounts, want.valueCounts);
    sameChannel(got.channels[0], want.channels[0], 'labels');
    // Summed over both stores (8-byte records do not shrink: zstd stores them raw).
    assert.deepEqual(got.codecs, [{ codec: 'raw', records: 20_000, storedBytes: 160_000, decodedBytes: 160_000 }]);
    // Labels repeat: every value is a duplicate group.
    assert.equal(got.duplicates.groups, want.valueCounts.filter(([, n]) => n > 1).length);
  });

  test('ragged tokens: length histogram, value statistics and duplicate groups', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const want = py.value.tokens;
    const got = await profileOf('tokens', { batchSize: 333 });
    assert.equal(got.records, want.records);
    assert.equal(got.lengths.min, want.lengths.min);
    assert.equal(got.lengths.max, want.lengths.max);
    close(got.lengths.mean, want.lengths.mean, 'mean length');
    assert.deepEqual(got.lengths.histogram, want.lengths.histogram);
    sameChannel(got.channels[0], want.channels[0], 'tokens');
    assert.deepEqual(got.duplicates.listed, want.duplicates);
    assert.equal(got.duplicates.extraRecords, want.duplicates.reduce((a, g) => a + g.length - 1, 0));
    assert.equal(got.misfit.count, 0);
    const zstd = got.codecs.find((c) => c.codec === 'zstd');
    assert.ok(zstd && zstd.storedBytes < zstd.decodedBytes, JSON.stringify(got.codecs));
    assert.equal(got.codecs.reduce((a, c) => a + c.decodedBytes, 0), 4 * Math.round(want.lengths.mean * want.records));
  });

  test('an aborted profile rejects with the signal\'s reason; bad options are LOADERX_ARGUMENT', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const store = await Store.open(join(dir, 'floats'));
    try {
      const controller = new AbortController();
      const reason = new Error('stop here');
      let batches = 0;
      const onProgress = () => { if (++batches === 2) controller.abort(reason); };
      await assert.rejects(store.profile({ onProgress, signal: controller.signal }), (e) => e === reason);
      assert.equal(batches, 2, 'no batch after the abort');
      for (const bad of [{ bins: 0 }, { bins: 1.5 }, { bins: 5000 }, { batchSize: -1 }, { onProgress: 3 }, { signal: {} }, 'x']) {
        await assert.rejects(store.profile(/** @type {any} */ (bad)), { code: 'LOADERX_ARGUMENT' }, JSON.stringify(bad));
      }
      // The store still reads after all that.
      assert.equal((await store.profile({ bins: 3 })).channels[0].histogram?.counts.length, 3);
    } finally {
      await store.close();
    }
  });

  test('loaderx-qa: statistics in every format, and thresholds that exit 3', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const { floats, labels, tokens } = py.value;
    const at = (name) => join(dir, name);

    const nan = await qa(at('floats'), '--fail-on', 'nan', '--fail-on', 'inf');
    assert.equal(nan.code, 3, nan.stderr + nan.stdout);
    assert.match(nan.stdout, /^FAIL\s+nan: 3 NaN value\(s\) in 3 record\(s\) \(records 3, 77, 500000\)$/m);
    assert.match(nan.stdout, /^FAIL\s+inf: 3 infinite value\(s\)$/m);
    assert.match(nan.stdout, /^verify\s+ok/m, 'the store itself is healthy');

    const json = await qa(at('labels'), '--json', '--labels', '0..9');
    assert.equal(json.code, 3);
    const r = JSON.parse(json.stdout);
    assert.equal(r.ok, true);
    assert.deepEqual(r.profile.valueCounts, labels.valueCounts);
    assert.deepEqual(r.checks.map((c) => [c.check, c.ok]), [['labels', false]]);
    assert.match(r.checks[0].detail, /-3 \(1x\), 900 \(2x\)/);
    assert.equal((await qa(at('labels'), '--labels', '-3..900')).code, 0);

    const max = tokens.lengths.max;
    const long = await qa(at('tokens'), '--max-length', String(max - 1), '--fail-on', 'duplicates', '--format', 'markdown');
    assert.equal(long.code, 3);
    assert.match(long.stdout, new RegExp(`^\\| max-length \\| \\*\\*FAIL\\*\\* \\| longest record ${max} rows, limit ${max - 1} \\|$`, 'm'));
    assert.match(long.stdout, /^\| duplicates \| \*\*FAIL\*\* \| 2 group\(s\) of equal records, 3 repeat\(s\): \[5, 6\] \[10, 2000, 2999\] \|$/m);
    assert.match(long.stdout, /^\| channel \| count \| min \| max \| mean \| std \|/m);
    const fine = await qa(at('tokens'), '--max-length', String(max));
    assert.equal(fine.code, 0, fine.stdout);
    assert.match(fine.stdout, new RegExp(`^ok\\s+max-length: longest record ${max} rows`, 'm'));
    // A threshold that does not apply is a failed check, not a pass.
    assert.equal((await qa(at('floats'), '--max-length', '5')).code, 3);
    // Thresholds need the statistics; unknown ones are bad usage.
    assert.equal((await qa(at('floats'), '--fail-on', 'nan', '--no-profile')).code, 2);
    assert.equal((await qa(at('floats'), '--fail-on', 'typos')).code, 2);
    assert.equal((await qa(at('floats'), '--labels', '9..0')).code, 2);
    assert.equal(floats.records, 1_000_000);
  });

  test('loaderx-qa reads a manifest over HTTP with the same statistics', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const server = await serve({ root: dir });
    try {
      const [remote, local] = await Promise.all([
        qa(`${server.url}labels/manifest.json`, '--json'),
        qa(join(dir, 'labels'), '--json'),
      ]);
      assert.equal(remote.code, 0, remote.stderr);
      const [a, b] = [JSON.parse(remote.stdout), JSON.parse(local.stdout)];
      assert.deepEqual(a.profile, b.profile);
      assert.deepEqual(a.profile.valueCounts, py.value.labels.valueCounts);
    } finally {
      await server.close();
    }
  });
});
