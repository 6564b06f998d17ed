// Shared test helpers: where things are, the fixture manifest and expected files, store copies,
// a plain reader of meta.zr, hashing.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readNpy, npyNumbers } from './npy.mjs';

export const JS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const REPO = resolve(JS_DIR, '..');
/** Fixture directory (tests/fixtures/v3), or $LOADERX_FIXTURES. */
export const FIXTURES = resolve(process.env.LOADERX_FIXTURES || join(REPO, 'tests/fixtures/v3'));

let manifest;
/** The fixture manifest (tests/fixtures/v3/manifest.json). */
export function loadManifest() {
  manifest ??= JSON.parse(readFileSync(join(FIXTURES, 'manifest.json'), 'utf8'));
  return manifest;
}

/** A manifest store entry by name. */
export function fixture(name) {
  const s = loadManifest().stores.find((e) => e.name === name);
  if (!s) throw new Error(`no fixture ${name} in ${FIXTURES}/manifest.json`);
  return s;
}

/** Directory of a fixture's store. */
export const storeDir = (entry) => join(FIXTURES, entry.store);

/** A fixture's expected arrays: `{values, lengths, rowSplits, comp}` (npy objects or numbers). */
export function expectedOf(entry) {
  const e = entry.expected;
  const out = {};
  if (e.values) out.values = readNpy(join(FIXTURES, e.values));
  if (e.lengths) out.lengths = npyNumbers(readNpy(join(FIXTURES, e.lengths)));
  if (e.row_splits) out.rowSplits = npyNumbers(readNpy(join(FIXTURES, e.row_splits)));
  if (e.comp) out.comp = npyNumbers(readNpy(join(FIXTURES, e.comp)));
  return out;
}

/** Bytes of record `k` of a fixture, in the order its values.npy holds them (= as stored). */
export function expectedRecordBytes(entry, exp, k) {
  const { values } = exp;
  if (entry.kind === 'dense' || !exp.rowSplits) {
    const n = exp.lengths[k];
    if (entry.kind === 'dense') return values.data.subarray(k * n, (k + 1) * n);
    const start = exp.lengths.slice(0, k).reduce((a, b) => a + b, 0);
    return values.data.subarray(start, start + n);
  }
  const rowBytes = values.itemsize * (entry.item_shape ?? []).reduce((a, b) => a * b, 1);
  return values.data.subarray(exp.rowSplits[k] * rowBytes, exp.rowSplits[k + 1] * rowBytes);
}

/** A fresh temporary directory; remove it with `removeDir`. */
export const tempDir = (prefix = 'loaderx-js-') => mkdtempSync(join(tmpdir(), prefix));
export const removeDir = (dir) => rmSync(dir, { recursive: true, force: true });

/** Copies a store directory (fixtures are read-only) and makes the copy writable. */
export function copyStore(src, dst) {
  cpSync(src, dst, { recursive: true });
  chmodSync(dst, 0o755);
  for (const name of readdirSync(dst)) chmodSync(join(dst, name), 0o644);
  return dst;
}

/**
 * Every file of a store directory as `{name: Uint8Array}` (for MemorySource).
 * @param {string} dir
 * @returns {Record<string, Uint8Array<ArrayBuffer>>}
 */
export function readStoreFiles(dir) {
  /** @type {Record<string, Uint8Array<ArrayBuffer>>} */
  const out = {};
  for (const name of readdirSync(dir)) {
    if (statSync(join(dir, name)).isFile()) out[name] = new Uint8Array(readFileSync(join(dir, name)));
  }
  return out;
}

/** Header and live table entries of a store, read straight from meta.zr (docs/format.md). */
export function readTable(dir) {
  const meta = readFileSync(join(dir, 'meta.zr'));
  const header = {
    magic: meta.subarray(0, 4).toString('latin1'),
    version: meta.readUInt16LE(4),
    tailChunk: meta.readUInt16LE(6),
    tailOffset: meta.readUInt32LE(8),
    length: meta.readUInt32LE(12),
  };
  const entries = [];
  for (let i = 0; i < header.length; i++) {
    const at = 16 + 16 * i;
    const e = {
      offset: meta.readUInt32LE(at),
      phys: meta.readUInt32LE(at + 4),
      logic: meta.readUInt32LE(at + 8),
      chunk: meta.readUInt16LE(at + 12),
      compress: meta[at + 14],
    };
    e.stored = e.compress === 0 ? e.logic : e.phys;
    e.end = e.offset + e.stored;
    entries.push(e);
  }
  return { header, entries };
}

/** sha256 hex of bytes. */
export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** [0, 1, ..., n-1]. */
export const range = (n, start = 0) => Array.from({ length: Math.max(0, n - start) }, (_, k) => start + k);

/** Splits `0..n` into consecutive batches whose total `lengths` stay under `cap` bytes. */
export function byteBatches(lengths, cap = 64 << 20) {
  const out = [];
  let start = 0;
  while (start < lengths.length) {
    let stop = start + 1;
    let sum = lengths[start];
    while (stop < lengths.length && sum + lengths[stop] <= cap) sum += lengths[stop++];
    out.push(range(stop, start));
    start = stop;
  }
  return out;
}

/** The rejection of `promise` (fails the test when it resolves). */
export async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}
