// A corrupt store never crashes the wasm reader: for every truncation length and every
// single-byte flip of meta.zr, and for random flips in a chunk and in dict.zr, opening, reading
// and verifying either succeed or reject with a LoaderxError carrying a known code. No wasm trap,
// no other exception, and the module still reads a good store afterwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Store, MemorySource } from '../src/node.js';
import { FIXTURES } from './helpers/common.mjs';

const CODES = new Set(['LOADERX_NOT_FOUND', 'LOADERX_NOT_A_STORE', 'LOADERX_CORRUPT', 'LOADERX_INDEX', 'LOADERX_TOO_LARGE', 'LOADERX_IO']);

function filesOf(name) {
  const dir = join(FIXTURES, name, 'store');
  return Object.fromEntries(readdirSync(dir).map((f) => [f, new Uint8Array(readFileSync(join(dir, f)))]));
}

/** Opens, reads every record and verifies; returns 'ok' or the error code. Throws on anything else. */
async function exercise(files) {
  let store;
  try {
    store = await Store.open(new MemorySource(files));
    const all = Array.from({ length: Math.min(store.length, 64) }, (_, k) => k);
    await store.gatherBytes(all).catch((e) => { if (!CODES.has(e.code)) throw e; });
    await store.verify();
    await store.stats();
    return 'ok';
  } catch (e) {
    if (e?.name === 'LoaderxError' && CODES.has(e.code)) return e.code;
    throw e;
  } finally {
    await store?.close();
  }
}

/** xorshift, for reproducible flips. */
function rng(seed) {
  let s = BigInt(seed);
  return () => {
    s ^= (s << 13n) & 0xffffffffffffffffn; s ^= s >> 7n; s ^= (s << 17n) & 0xffffffffffffffffn;
    return Number(s % 0x7fffffffn);
  };
}

for (const name of ['tokens_i32_ragged_zstd_dict', 'zrecord_mixed_codecs', 'be_i4_raw']) {
  test(`${name}: every meta.zr truncation and byte flip is handled`, async () => {
    const good = filesOf(name);
    const meta = good['meta.zr'];
    const seen = new Map();
    const note = (r) => seen.set(r, (seen.get(r) ?? 0) + 1);
    for (let n = 0; n <= meta.length; n++) note(await exercise({ ...good, 'meta.zr': meta.subarray(0, n) }));
    for (let i = 0; i < meta.length; i++) {
      const flipped = meta.slice();
      flipped[i] ^= 0xff;
      note(await exercise({ ...good, 'meta.zr': flipped }));
    }
    assert.ok(seen.get('ok') >= 1, 'the untouched lengths still read');
    assert.ok([...seen.keys()].some((k) => k !== 'ok'), 'corruptions are detected');
    assert.equal(await exercise(good), 'ok', 'the good store reads afterwards');
  });
}

test('random flips in chunks and dict.zr are handled', async () => {
  const good = filesOf('zrecord_mixed_codecs');
  const next = rng(7);
  for (const file of ['0.zr', 'dict.zr']) {
    const bytes = good[file];
    for (let k = 0; k < 600; k++) {
      const flipped = bytes.slice();
      for (let f = 0; f <= k % 3; f++) flipped[next() % bytes.length] ^= 1 << (next() % 8);
      await exercise({ ...good, [file]: flipped });
    }
  }
  assert.equal(await exercise(good), 'ok');
});
