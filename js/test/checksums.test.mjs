// Per-record checksums (checksums.lx) in the wasm reader: every flipped stored byte of a raw,
// zstd or zstd_dict record is caught under verify 'always', from files, memory and HTTP; over
// HTTP (through a proxy that damages answers), 'fetched' (the default) fetches a damaged range
// once more, then rejects; the digest is the one Python computes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, openSync, readSync, writeSync, closeSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { serve } from '../scripts/serve.mjs';
import { Store, HttpSource } from '../src/node.js';
import { REPO, tempDir, removeDir } from './helpers/common.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const PYTHON = process.env.LOADERX_PYTHON || join(REPO, '.venv/bin/python');

/** Writes a dense store per codec with Python; returns `{codec: digest}`. */
function pythonStores(root) {
  const code = `
import json, sys, numpy as np
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset
out = {}
for codec, n in (("raw", 24), ("zstd", 24), ("zstd_dict", 128)):
    rows = ((np.arange(n * 16, dtype=np.int32).reshape(n, 16) * 7) % 23).astype(np.int32)
    from_numpy(sys.argv[1] + "/" + codec, rows, codec=codec, progress=False)
    out[codec] = DenseDataset(sys.argv[1] + "/" + codec).digest
print(json.dumps(out))
`;
  const env = { ...process.env };
  delete env.PYTHONPATH;
  return JSON.parse(execFileSync(PYTHON, ['-c', code, root], { env, encoding: 'utf8', timeout: 120000 }).trim().split('\n').at(-1) ?? '{}');
}

/** `[offset, stored]` of every live record, from meta.zr. */
function records(dir) {
  const meta = readFileSync(join(dir, 'meta.zr')).subarray(0, 1 << 20);
  const length = meta.readUInt32LE(12);
  return Array.from({ length }, (_, i) => {
    const e = 16 + 16 * i;
    const codec = meta[e + 14];
    return [meta.readUInt32LE(e), codec === 0 ? meta.readUInt32LE(e + 8) : meta.readUInt32LE(e + 4)];
  });
}

/** A store's files cut to what they hold, for memory and HTTP. */
function memoryFiles(dir) {
  /** @type {Record<string, Uint8Array>} */
  const out = {};
  for (const name of ['meta.zr', '0.zr', 'schema.msgpack', 'dict.zr', 'checksums.lx']) {
    const p = join(dir, name);
    if (!existsSync(p)) continue;
    const fd = openSync(p, 'r');
    const n = Math.min(statSync(p).size, 1 << 22);
    const bytes = new Uint8Array(n);
    readSync(fd, bytes, 0, n, 0);
    closeSync(fd);
    out[name] = bytes;
  }
  return out;
}

const available = existsSync(PYTHON);

test('every flipped stored byte is caught, from files and from memory', async (t) => {
  if (!available) return skipUnlessRequired(t, `no Python with loaderx at ${PYTHON} (make py-build)`, ['LOADERX_REQUIRE_PY']);
  const root = tempDir();
  try {
    const digests = pythonStores(root);
    for (const codec of ['raw', 'zstd', 'zstd_dict']) {
      const dir = join(root, codec);
      const files = await Store.open(dir, { verify: 'always' });
      assert.equal(await files.digest(), digests[codec], `${codec}: the digest is Python's`);
      const memory = memoryFiles(dir);
      let flips = 0;
      let caught = 0;
      const fd = openSync(join(dir, '0.zr'), 'r+');
      try {
        for (const [index, [offset, stored]] of records(dir).entries()) {
          for (let k = 0; k < stored; k++) {
            const at = offset + k;
            const b = Buffer.alloc(1);
            readSync(fd, b, 0, 1, at);
            writeSync(fd, Buffer.from([b[0] ^ 0x5a]), 0, 1, at);
            memory['0.zr'][at] ^= 0x5a;
            flips += 2;
            for (const store of [files, await Store.open(memory, { verify: 'always' })]) {
              const e = await store.gather([index]).then(() => null, (err) => err);
              assert.ok(e, `${codec} record ${index} byte ${k}: not caught`);
              assert.equal(e.code, 'LOADERX_CORRUPT');
              assert.equal(e.checksum, true);
              assert.equal(e.index, index);
              assert.equal(e.offset, offset);
              caught++;
            }
            writeSync(fd, b, 0, 1, at);
            memory['0.zr'][at] ^= 0x5a;
          }
        }
      } finally {
        closeSync(fd);
      }
      assert.equal(caught, flips);
      assert.ok(flips > 0);
      const report = await files.verify();
      assert.equal(report.ok, true);
      assert.deepEqual(report.checksums, { verified: files.length, mismatched: 0, uncovered: 0, unverified: 0 });
      await files.close();
    }
  } finally {
    removeDir(root);
  }
});

/**
 * A proxy on 127.0.0.1 in front of `upstream` that inverts one byte in the middle of the next
 * `plan.flips` answers to ranged GETs of chunk files (a transfer that damages data); every other
 * request passes as is.
 */
async function flippingProxy(upstream, plan) {
  const server = createServer(async (req, res) => {
    const answer = await fetch(new URL(req.url ?? '/', upstream), { method: req.method, headers: req.headers.range ? { Range: req.headers.range } : {} });
    const body = new Uint8Array(await answer.arrayBuffer());
    const name = (req.url ?? '').split('?')[0].split('/').at(-1) ?? '';
    if (/^\d+\.zr$/.test(name) && req.headers.range && plan.flips > 0 && body.length) {
      plan.flips--;
      body[body.length >> 1] ^= 0xff;
    }
    const headers = Object.fromEntries([...answer.headers].filter(([k]) => !['content-encoding', 'transfer-encoding', 'connection'].includes(k)));
    res.writeHead(answer.status, headers);
    res.end(body);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((ok) => server.close(() => ok(null))) };
}

test('over HTTP a damaged range is fetched again, then rejected, and never cached', async (t) => {
  if (!available) return skipUnlessRequired(t, `no Python with loaderx at ${PYTHON} (make py-build)`, ['LOADERX_REQUIRE_PY']);
  const root = tempDir();
  const server = await serve({ root });
  const plan = { flips: 0 };
  const proxy = await flippingProxy(server.url, plan);
  try {
    pythonStores(root);
    const local = await Store.open(join(root, 'zstd'));
    const want = await local.gather([0, 1, 2, 3]);
    const want45 = await local.gather([4, 5]);
    await local.close();
    const open = (verify) => Store.open(new HttpSource(`${proxy.url}zstd/`), verify ? { verify } : {});
    const store = await open();
    assert.equal(store.verifyMode, 'fetched');
    plan.flips = 1;
    assert.deepEqual(await store.gather([0, 1, 2, 3]), want, 'the refetch gives the stored bytes');
    assert.equal(plan.flips, 0);
    plan.flips = 2;
    const e = await store.gather([4, 5]).then(() => null, (err) => err);
    assert.ok(e?.checksum, `a twice-damaged range rejects: ${e}`);
    assert.match(e.message, /zstd/);
    assert.ok(e.message.includes(new URL(proxy.url).host), e.message);
    assert.equal(plan.flips, 0);
    // Nothing damaged was cached: the same batch reads right now.
    assert.deepEqual(await store.gather([4, 5]), want45);
    const off = await open('off');
    plan.flips = 1;
    const got = await off.gather([0, 1, 2, 3]).then((v) => v, (err) => err);
    assert.ok(got instanceof Error ? !(/** @type {any} */ (got).checksum) : JSON.stringify(got) !== JSON.stringify(want), 'unchecked, the damage goes through');
    plan.flips = 0;
    await store.close();
    await off.close();
  } finally {
    await proxy.close();
    await server.close();
    removeDir(root);
  }
});
