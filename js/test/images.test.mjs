// Stores of encoded images in Node: Python writes one (from_images, scripts/image_set.py's
// pictures plus damaged records), and the wasm build reads every header as Python's engine does,
// decodes the pictures close to Pillow's pixels, and loaderx-qa reports formats, sizes and the
// undecodable records (exit 1), as `loaderx verify --images` lists them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { Store, decodeImage, imageHeader, imageProblem } from '../src/node.js';
import { JS_DIR, removeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PY_CODE = `
import base64, importlib.util, json, sys
import numpy as np
from pathlib import Path
from PIL import Image, ImageOps
import io
from loaderx import _loaderx
from loaderx.converter import from_images, from_iterator
spec = importlib.util.spec_from_file_location("image_set", Path(${JSON.stringify(join(JS_DIR, '..', 'scripts', 'image_set.py'))}))
image_set = importlib.util.module_from_spec(spec); spec.loader.exec_module(image_set)
args = json.load(sys.stdin)
odd = image_set.oddities()
names = sorted(odd)
from_images(args["good"], [odd[n] for n in names])
bad = [odd["rgb.jpg"], odd["rgb.jpg"][:300], b"text, not an image", odd["rgb.png"]]
from_iterator(args["bad"], bad)
def pillow(b):
    with Image.open(io.BytesIO(b)) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
print(json.dumps({
    "names": names,
    "headers": [list(_loaderx.image_header(odd[n])) for n in names],
    "pixels": {n: base64.b64encode(pillow(odd[n]).tobytes()).decode() for n in ("rgb.png", "palette.png", "lossless.webp", "rgb.jpg")},
}))
`;

/** Runs qa.mjs; resolves to `{code, stdout, stderr}`. */
function qa(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(JS_DIR, 'examples/qa.mjs'), ...args], { encoding: 'utf8', timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

describe('image stores in Node', () => {
  let dir, py;
  before(() => {
    dir = tempDir('lx-images-');
    py = pythonJson(PY_CODE, { good: join(dir, 'good'), bad: join(dir, 'bad') });
  });
  after(() => removeDir(dir));

  test('headers equal the native engine\'s, and the schema names the formats', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const store = await Store.open(join(dir, 'good'));
    try {
      assert.equal(store.schema?.media, 'mixed');
      const records = await store.gatherBytes(Array.from({ length: store.length }, (_, k) => k));
      const got = records.map((b) => { const h = imageHeader(b); return [h.media, h.width, h.height, h.orientation]; });
      assert.deepEqual(got, py.value.headers);
    } finally {
      await store.close();
    }
  });

  test('lossless pictures decode to Pillow\'s pixels exactly, JPEG within rounding', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const store = await Store.open(join(dir, 'good'));
    try {
      for (const [name, b64] of Object.entries(py.value.pixels)) {
        const bytes = await store.gatherBytes([py.value.names.indexOf(name)]);
        const pic = decodeImage(bytes[0]);
        const want = Buffer.from(b64, 'base64');
        assert.equal(pic.rgb.length, want.length, name);
        let worst = 0, sum = 0;
        for (let k = 0; k < want.length; k++) { const d = Math.abs(pic.rgb[k] - want[k]); worst = Math.max(worst, d); sum += d; }
        if (name.endsWith('.jpg')) assert.ok(worst <= 4 && sum / want.length < 0.5, `${name}: max ${worst}`);
        else assert.equal(worst, 0, name);
      }
    } finally {
      await store.close();
    }
  });

  test('bad bytes are typed errors, and the pixel limit holds', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    assert.throws(() => imageHeader(new Uint8Array([1, 2, 3])), { code: 'LOADERX_CORRUPT' });
    assert.throws(() => decodeImage(new Uint8Array(0)), { code: 'LOADERX_CORRUPT' });
    assert.throws(() => decodeImage(/** @type {any} */ ('not bytes')), { code: 'LOADERX_ARGUMENT' });
    const store = await Store.open(join(dir, 'good'));
    try {
      const [png] = await store.gatherBytes([py.value.names.indexOf('rgb.png')]);
      assert.throws(() => decodeImage(png, { maxPixels: 100 }), { code: 'LOADERX_TOO_LARGE' });
      assert.match(imageProblem(png, { maxPixels: 100 }) ?? '', /more than the limit of 100/);
      assert.equal(imageProblem(png), undefined);
    } finally {
      await store.close();
    }
  });

  test('loaderx-qa reports formats and sizes, and exits 1 naming undecodable records', async (t) => {
    if (py.missing) return skipUnlessRequired(t, py.missing, ['LOADERX_REQUIRE_PY']);
    const good = await qa(join(dir, 'good'));
    assert.equal(good.code, 0, good.stderr + good.stdout);
    assert.match(good.stdout, /^images\s+16 decode \(.*jpeg 8.*\), 0 undecodable$/m);
    assert.match(good.stdout, /^width\s+min 80\s+max 120/m);
    const json = JSON.parse((await qa(join(dir, 'good'), '--json')).stdout);
    assert.deepEqual(json.images.formats, { png: 6, jpeg: 8, webp: 2 });
    const bad = await qa(join(dir, 'bad'), '--images');
    assert.equal(bad.code, 1, bad.stdout);
    const listed = bad.stdout.split('\n').filter((l) => l.includes('undecodable image')).map((l) => Number(l.trim().split(' ')[2].replace(':', '')));
    assert.deepEqual(listed, [1, 2]);
    const limited = JSON.parse((await qa(join(dir, 'bad'), '--images', '--json', '--max-pixels', '5000')).stdout);
    assert.equal(limited.images.undecodable.length, 4);
    assert.equal(limited.ok, false);
  });
});
