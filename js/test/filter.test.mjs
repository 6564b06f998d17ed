// Filters over aligned streams (filterRecords, core's filter language in wasm) against NumPy's
// boolean masks: Python writes labels (int64), scores (float32 with NaN) and token lists (ragged
// uint16) of the same records; each filter's matches equal np.flatnonzero of the same condition.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Store, filterRecords } from '../src/node.js';
import { removeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PY_CODE = `
import json, sys
import numpy as np
from loaderx.converter import from_numpy, from_iterator
root = json.load(sys.stdin)["root"]
rng = np.random.default_rng(2)
n = 5000
label = rng.integers(0, 10, n).astype(np.int64)
score = rng.random(n).astype(np.float32)
score[rng.integers(0, n, 40)] = np.nan
lens = rng.integers(1, 1200, n)
from_numpy(f"{root}/label", label, codec="zstd")
from_numpy(f"{root}/score", score, codec="raw")
from_iterator(f"{root}/tokens", [np.full(k, 7, np.uint16) for k in lens], codec="zstd")
f = lambda m: np.flatnonzero(m).tolist()
with np.errstate(invalid="ignore"):
    print(json.dumps({
        "label == 3 && len(tokens) > 512": f((label == 3) & (lens > 512)),
        "0.25 <= score && score < 0.5": f((0.25 <= score) & (score < 0.5)),
        "score != score": f(np.isnan(score)),
        "!(label < 8) || len(tokens) <= 3": f(~(label < 8) | (lens <= 3)),
        "label == 1 && 0.9 < score < 1 && len(tokens) >= 100": f((label == 1) & (0.9 < score) & (score < 1) & (lens >= 100)),
    }))
`;

describe('filterRecords against NumPy', () => {
  let dir, py, streams;
  before(async () => {
    dir = tempDir('lx-filter-');
    py = pythonJson(PY_CODE, { root: dir });
    if (!py.missing) {
      streams = {
        label: await Store.open(join(dir, 'label')),
        score: await Store.open(join(dir, 'score')),
        tokens: await Store.open(join(dir, 'tokens')),
      };
    }
  });
  after(async () => {
    for (const s of Object.values(streams ?? {})) await s.close();
    removeDir(dir);
  });

  test('every filter matches what NumPy selects', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    for (const [text, want] of Object.entries(py.value)) {
      const seen = [];
      const got = await filterRecords(streams, text, { batchSize: 777, onProgress: (d, total, f) => seen.push([d, total, f]) });
      assert.deepEqual(Array.from(got), want, text);
      assert.deepEqual(seen.at(-1), [5000, 5000, want.length], `${text}: progress`);
    }
  });

  test('bad filters, names and streams are refused readably', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    await assert.rejects(filterRecords(streams, 'label == '), { code: 'LOADERX_ARGUMENT', message: /at character 9/ });
    await assert.rejects(filterRecords(streams, 'lable == 3'), { code: 'LOADERX_ARGUMENT', message: /names lable, but the streams are label, score, tokens/ });
    await assert.rejects(filterRecords(streams, 'tokens > 3'), { code: 'LOADERX_ARGUMENT', message: /use len\(tokens\)/ });
    const controller = new AbortController();
    const reason = new Error('enough');
    await assert.rejects(filterRecords(streams, 'label == 3', { batchSize: 100, signal: controller.signal, onProgress: () => controller.abort(reason) }), (e) => e === reason);
  });
});
