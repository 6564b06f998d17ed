// A corrupt store never crashes the wasm reader: for every truncation length and every
// single-byte flip of meta.zr, and for random flips in a chunk and in dict.zr, opening, reading
// and verifying either succeed or reject with a LoaderxError carrying a known code. No wasm trap,
// no other exception, and the module still reads a good store afterwards. Each input is classed
// as detected (an error or a bad record), identical or different (read back as other bytes);
// with LOADERX_RELIABILITY_OUT set the counts go to js_corruption.json there.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Store, MemorySource } from '../src/node.js';
import { FIXTURES } from './helpers/common.mjs';

const CODES = new Set(['LOADERX_NOT_FOUND', 'LOADERX_NOT_A_STORE', 'LOADERX_CORRUPT', 'LOADERX_INDEX', 'LOADERX_TOO_LARGE', 'LOADERX_IO']);

function filesOf(name) {
  const dir = join(FIXTURES, name, 'store');
  return Object.fromEntries(readdirSync(dir).map((f) => [f, new Uint8Array(readFileSync(join(dir, f)))]));
}

/** Every record of a good store, as bytes. */
async function readAll(files) {
  const store = await Store.open(new MemorySource(files));
  try {
    return await store.gatherBytes(Array.from({ length: store.length }, (_, k) => k));
  } finally {
    await store.close();
  }
}

const same = (a, b) => a.length === b.length && a.every((x, k) => Buffer.compare(x, b[k]) === 0);

/**
 * Opens, reads every record, verifies and measures; returns 'identical' or 'different' (compared
 * with `good`), or the error code. Throws on anything else.
 */
async function exercise(files, good) {
  let store;
  try {
    store = await Store.open(new MemorySource(files));
    const all = Array.from({ length: store.length }, (_, k) => k);
    const got = await store.gatherBytes(all);
    const report = await store.verify();
    await store.stats();
    if (!report.ok) return 'LOADERX_CORRUPT';
    return same(got, good) ? 'identical' : 'different';
  } catch (e) {
    if (e?.name === 'LoaderxError' && CODES.has(e.code)) return e.code;
    throw e;
  } finally {
    await store?.close();
  }
}

/** Outcome counts per store and input kind, for the reliability report. */
const tally = {};
function count(store, kind, outcome) {
  const cls = outcome === 'identical' || outcome === 'different' ? outcome : 'detected';
  tally[store] ??= {};
  tally[store][kind] ??= {};
  const t = tally[store][kind];
  t[cls] = (t[cls] ?? 0) + 1;
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
    const data = await readAll(good);
    const meta = good['meta.zr'];
    const seen = new Map();
    const note = (kind, r) => {
      seen.set(r, (seen.get(r) ?? 0) + 1);
      count(name, kind, r);
    };
    for (let n = 0; n < meta.length; n++) {
      const r = await exercise({ ...good, 'meta.zr': meta.subarray(0, n) }, data);
      // A cut that keeps every live entry changes nothing; any other is detected.
      assert.equal(r === 'identical', n >= 16 + 16 * data.length, `meta.zr cut to ${n} bytes: ${r}`);
      assert.notEqual(r, 'different', `meta.zr cut to ${n} bytes`);
      // Shorter than the header: damaged, not some other file (see helpers/pending.mjs).
      if (n < 16) assert.equal(r, 'LOADERX_CORRUPT', `meta.zr cut to ${n} bytes: ${r}, not LOADERX_CORRUPT`);
      note('meta.zr truncation', r);
    }
    for (let i = 0; i < meta.length; i++) {
      const flipped = meta.slice();
      flipped[i] ^= 0xff;
      note(i < 16 ? 'meta.zr header flip' : 'meta.zr entry flip', await exercise({ ...good, 'meta.zr': flipped }, data));
    }
    assert.ok([...seen.keys()].some((k) => k !== 'identical' && k !== 'different'), 'corruptions are detected');
    assert.equal(await exercise(good, data), 'identical', 'the good store reads afterwards');
  });
}

test('random flips in chunks and dict.zr are handled', async () => {
  const good = filesOf('zrecord_mixed_codecs');
  const data = await readAll(good);
  const next = rng(7);
  for (const file of ['0.zr', 'dict.zr']) {
    const bytes = good[file];
    for (let k = 0; k < 600; k++) {
      const flipped = bytes.slice();
      for (let f = 0; f <= k % 3; f++) flipped[next() % bytes.length] ^= 1 << (next() % 8);
      count('zrecord_mixed_codecs', `${file} bit flips`, await exercise({ ...good, [file]: flipped }, data));
    }
  }
  assert.equal(await exercise(good, data), 'identical');
});

after(() => {
  const out = process.env.LOADERX_RELIABILITY_OUT;
  if (!out) return;
  mkdirSync(out, { recursive: true });
  const inputs = Object.values(tally).flatMap(Object.values).flatMap(Object.values).reduce((a, b) => a + b, 0);
  writeFileSync(join(out, 'js_corruption.json'), JSON.stringify({ inputs, stores: tally }, null, 2));
});
