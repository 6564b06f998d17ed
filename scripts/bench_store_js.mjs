// What the wasm benchmarks (bench_js.mjs, bench_wasm_codec.mjs) share: the zstd store of 12 KiB
// records that `bench_store make` writes, the seeded batches every contender gathers, and the
// store's files trimmed to their used bytes (meta.zr and 0.zr are sparse at full size), as an
// in-memory source holds them.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Bytes per record of the benchmark store. */
export const BATCH_REC = 12 * 1024;

/** Runs `native/examples/bench_store.rs` with `argv`; returns its stdout. */
export const benchStore = (argv, { jobs = 2, nice = false } = {}) => {
  const cargo = ['cargo', 'run', '-q', '--release', `-j${jobs}`, '-p', 'loaderx-native', '--example', 'bench_store', '--', ...argv];
  const [cmd, ...rest] = nice ? ['nice', '-n', '10', ...cargo] : cargo;
  return execFileSync(cmd, rest, { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
};

/**
 * The store of `n` records under `work` (written once), `count` batches of `batch` sorted distinct
 * indices from a seeded xorshift (the same for every contender), and `batchFile`, those batches
 * as JSON for `bench_store gather`.
 */
export function setup(work, { n, count, batch, jobs, nice }) {
  mkdirSync(work, { recursive: true });
  const store = path.join(work, `zstd_${n}x12k`);
  if (!existsSync(path.join(store, 'meta.zr'))) benchStore(['make', store, String(n), String(BATCH_REC)], { jobs, nice });
  let s = 0x2545f4914f6cdd1dn;
  const rand = () => {
    s ^= (s << 13n) & 0xffffffffffffffffn;
    s ^= s >> 7n;
    s ^= (s << 17n) & 0xffffffffffffffffn;
    return Number(s % BigInt(n));
  };
  const batches = Array.from({ length: count }, () => {
    const set = new Set();
    while (set.size < batch) set.add(rand());
    return [...set].sort((a, b) => a - b);
  });
  const batchFile = path.join(work, 'batches.json');
  writeFileSync(batchFile, JSON.stringify(batches));
  return { store, batches, batchFile, bytesPerRound: count * batch * BATCH_REC };
}

/** The store's files trimmed to their used bytes: `{ 'meta.zr', '0.zr', 'schema.msgpack'? }`. */
export function trimmed(store) {
  const part = (name, n) => {
    const buf = Buffer.alloc(n);
    const fd = openSync(path.join(store, name), 'r');
    readSync(fd, buf, 0, n, 0);
    closeSync(fd);
    return new Uint8Array(buf.buffer, buf.byteOffset, n);
  };
  const head = Buffer.from(part('meta.zr', 16));
  const files = { 'meta.zr': part('meta.zr', 16 + 16 * head.readUInt32LE(12)), '0.zr': part('0.zr', head.readUInt32LE(8)) };
  const schema = path.join(store, 'schema.msgpack');
  if (existsSync(schema)) files['schema.msgpack'] = new Uint8Array(readFileSync(schema));
  return files;
}
