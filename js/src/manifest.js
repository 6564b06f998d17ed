// Manifests: many stores read as one dataset. `Store.open` takes a manifest wherever it takes a
// store (a path, a file: or http(s) URL, `{name: bytes}`, Blobs or picked files) and returns a
// ManifestStore, which has a store's read API over the stores the manifest lists.
//
// Invariants:
// - What a location holds is core's answer (wasm `identify`), from what the entry point sees
//   there; the manifest's rules (parsing, the check of each store against its entry, the split
//   of a request's indices over the stores) are core's, through wasm `Manifest`.
// - A location that holds a store opens as one exactly as before (same requests, same errors).
// - Each listed store is opened with the same `Store.open` (a relative path resolved against the
//   manifest's location, a URL as it is given) and checked against its entry: a store whose
//   length or layout changed since it was listed fails the open, naming it, as in Python.
// - A gather splits its indices by store, gathers each store's share, and puts every record at
//   its place in the request: the result is what one store holding the same records in the same
//   order gives.
import { loaderxError, isLoaderxError, wasmCall, ioError, argumentError } from './errors.js';
import { profileOf, mergeCodecBytes } from './profile.js';
import { identityBytes, identityText } from './store.js';
import { toIndexArray, verifyOptions } from './args.js';
import { batches } from './batches.js';
import { redactUrl } from './redact.js';
import { HttpSource } from './sources/http.js';
import { NAMES } from '../pkg/names.js';

/** Stores opened at once. */
const OPEN_CONCURRENCY = 8;

/**
 * Where a manifest is: its bytes, a label for messages, and how a listed store is reached
 * (`storeValue(path)`: what to hand `Store.open` for it).
 * @typedef {{bytes: Uint8Array, label: string, storeValue: (path: string) => unknown}} Place
 */

/** Whether `path` is a URL (`scheme://...`). */
export const isUrl = (path) => /^[a-z][a-z0-9+.-]*:\/\//i.test(path);

/**
 * `Store` (the entry point's) taking manifests too: `locate(value, options, identify)` resolves
 * to a Place when the value is a manifest, null to open it as a store, or a function giving the
 * Place (or null) that is asked only when the store's open finds no `meta.zr` there.
 * @param {any} Inner
 * @param {any} wasm
 * @param {(value: unknown, options: any, identify: (seen: string, name: string, store: boolean, manifest: boolean) => string) => Promise<Place | null | (() => Promise<Place | null>)>} locate
 */
export function withManifests(Inner, wasm, locate) {
  const identify = (seen, name, store, manifest) => wasmCall(() => wasm.identify(seen, name, store, manifest));

  class Store extends Inner {
    /** A store or, when `value` is a manifest, a ManifestStore over its stores. */
    static async open(value, options) {
      let place;
      try {
        place = await locate(value, options, identify);
      } catch (e) {
        throw argumentError(e, 'cannot open a store from this value');
      }
      const openStore = (v) => Inner.open(v, options);
      if (typeof place === 'function') {
        // Asked only when the location holds no store (a URL cannot be listed).
        try {
          return await openStore(value);
        } catch (e) {
          if (!isLoaderxError(e) || e.code !== 'LOADERX_NOT_FOUND') throw e;
          const found = await place().catch(() => null);
          if (!found) throw e;
          return openManifest(found, openStore, wasm);
        }
      }
      if (!place) return openStore(value);
      return openManifest(place, openStore, wasm);
    }

    /** Stores and manifests alike. */
    static [Symbol.hasInstance](x) {
      return x instanceof Inner || x instanceof ManifestStore;
    }
  }
  return Store;
}

/** Opens every store of the manifest at `place` with `open` and checks each against its entry. */
async function openManifest(place, open, wasm) {
  const manifest = wasmCall(() => new wasm.Manifest(place.bytes));
  const stores = [];
  try {
    const paths = manifest.paths();
    let next = 0;
    const failed = [];
    const worker = async () => {
      while (next < paths.length && failed.length === 0) {
        const k = next++;
        try {
          stores[k] = await open(place.storeValue(paths[k]));
        } catch (e) {
          failed.push(isLoaderxError(e) ? loaderxError(e.code, `${place.label}: store ${redactUrl(paths[k])}: ${e.message}`) : e);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, paths.length) }, worker));
    if (failed.length) throw failed[0];
    stores.forEach((s, k) => {
      const schema = s.schema;
      wasmCall(() => manifest.checkStore(k, s.length, schema?.kind ?? undefined, schema?.dtype ?? undefined, schema ? Float64Array.from(schema.itemShape) : undefined));
    });
    return new ManifestStore(KEY, place.label, manifest, stores, (digests) => wasmCall(() => wasm.combinedDigest(digests)), wasm);
  } catch (e) {
    await Promise.allSettled(stores.filter(Boolean).map((s) => s.close()));
    manifest.free();
    throw ioError(e, `opening ${place.label}`);
  }
}

/** Calls `put(position, results, j)` for the `j`-th record of each store's share (`got[k]` are
 *  part `k`'s results), `position` being its place in the request. */
function scatter(parts, got, put) {
  parts.forEach((p, k) => {
    p.positions.forEach((pos, j) => { put(pos, got[k], j); });
  });
}

/** Only `Store.open` constructs a ManifestStore. */
const KEY = Symbol('loaderx manifest');

/** A manifest's stores, read as one store of their records in order. */
export class ManifestStore {
  #label;
  #manifest;
  #stores;
  #offsets;
  #combine;
  #wasm;
  #closed = false;

  /** Use `Store.open`. */
  constructor(key, label, manifest, stores, combine, wasm) {
    if (key !== KEY) throw loaderxError('LOADERX_ARGUMENT', 'use Store.open to open a manifest');
    this.#wasm = wasm;
    this.#label = label;
    this.#manifest = manifest;
    this.#stores = stores;
    this.#combine = combine;
    this.#offsets = manifest.offsets();
    const paths = manifest.paths();
    /** The stores as listed: `[{path, length}]`. */
    this.stores = paths.map((path, k) => ({ path, length: stores[k].length }));
  }

  #check() {
    if (this.#closed) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
  }

  /** Records over all stores. */
  get length() {
    this.#check();
    return this.#offsets[this.#offsets.length - 1];
  }

  /** The first store's schema (every store has its layout), or null. */
  get schema() {
    return this.#stores[0]?.schema ?? null;
  }

  /** A manifest has no header of its own: `{version, length}` (its stores' format version). */
  get header() {
    return { version: this.#stores[0]?.header.version ?? 3, length: this.length };
  }

  /** Whether its stores decode on a wasm thread pool (stores hosted in a threaded worker). */
  get threaded() {
    return this.#stores.length > 0 && this.#stores.every((s) => s.threaded === true);
  }

  /** Whether any store has a zstd dictionary. */
  get hasDict() {
    return this.#stores.some((s) => s.hasDict);
  }

  /** `fn(store, part)` for each store's share of `indices`, with the split (checked by core). */
  async #parts(indices, fn) {
    this.#check();
    const idx = toIndexArray(indices);
    const parts = wasmCall(() => this.#manifest.split(idx));
    const got = await Promise.all(parts.map((p) => fn(this.#stores[p.store], p.local)));
    this.#check();
    return { idx, parts, got };
  }

  /** Each store's per-record results (`method` giving a list) placed in request order. */
  async #each(method, indices) {
    const { idx, parts, got } = await this.#parts(indices, (s, local) => s[method](local));
    const out = new Array(idx.length);
    scatter(parts, got, (pos, mine, j) => { out[pos] = mine[j]; });
    return out;
  }

  /** Logical lengths in bytes (Float64Array). */
  async lengths(indices) {
    const { idx, parts, got } = await this.#parts(indices, (s, local) => s.lengths(local));
    const out = new Float64Array(idx.length);
    scatter(parts, got, (pos, mine, j) => { out[pos] = mine[j]; });
    return out;
  }

  /** Records as typed arrays, as a store gives them (dense: one array `[n, ...itemShape]`). */
  async gather(indices) {
    const s = this.schema;
    if (s?.kind !== 'dense') return this.#each('gather', indices);
    const { idx, parts, got } = await this.#parts(indices, (st, local) => st.gather(local));
    const tail = s.extraDim == null ? s.itemShape : [...s.itemShape, s.extraDim];
    const per = tail.reduce((a, b) => a * b, 1);
    const C = globalThis[s.arrayType];
    const out = new C(idx.length * per);
    scatter(parts, got, (pos, mine, j) => { out.set(mine.subarray(j * per, (j + 1) * per), pos * per); });
    out.shape = [idx.length, ...tail];
    return out;
  }

  /** Records as their decoded bytes (Uint8Array each). */
  async gatherBytes(indices) {
    return this.#each('gatherBytes', indices);
  }

  /** One record: like `gather([i])`, unwrapped. */
  async get(i) {
    const r = await this.gather([i]);
    if (Array.isArray(r)) return r[0];
    r.shape = r.shape.slice(1);
    return r;
  }

  /** Gathered batches in order, for `for await` (see batches.js). */
  batches(options) {
    return batches(this, options);
  }

  /** Verifies each store in turn; bad records by their index in the manifest. */
  async verify(options) {
    const { onProgress, batchSize } = verifyOptions(options);
    this.#check();
    const total = this.length;
    const bad = [];
    let unlisted = 0;
    const checksums = { verified: 0, mismatched: 0, uncovered: 0, unverified: 0 };
    for (const [k, store] of this.#stores.entries()) {
      const first = this.#offsets[k];
      const one = await store.verify({ batchSize, onProgress: onProgress && ((done) => onProgress(first + done, total)) });
      for (const b of one.bad) bad.push({ ...b, index: first + b.index });
      unlisted += one.unlisted;
      for (const key of Object.keys(checksums)) checksums[key] += one.checksums[key];
    }
    onProgress?.(total, total);
    return { ok: bad.length === 0, checked: total, length: total, bad, unlisted, checksums };
  }

  /** The stores' content digests combined in order (core's rule), or null unless every store
   *  has one. */
  async digest() {
    return (await this.checksums()).digest;
  }

  /** Its stores' checksum coverage added up; the digest combines theirs (null unless all have one). */
  async checksums() {
    this.#check();
    const all = await Promise.all(this.#stores.map((s) => s.checksums()));
    const digests = all.map((c) => c.digest);
    return {
      present: all.some((c) => c.present),
      covered: all.reduce((a, c) => a + c.covered, 0),
      total: all.reduce((a, c) => a + c.total, 0),
      digest: digests.every((d) => typeof d === 'string') ? this.#combine(digests) : null,
    };
  }

  /** Which reads of its stores are checked: their mode when they share one. */
  get verifyMode() {
    const modes = new Set(this.#stores.map((s) => s.verifyMode));
    return modes.size === 1 ? [...modes][0] : 'mixed';
  }

  /** Sets every store's verify mode. */
  setVerify(mode) {
    this.#check();
    for (const s of this.#stores) s.setVerify(mode);
  }

  /** The stores' usage added up; `fileBytes` names each file `<store>/<file>`. */
  async stats() {
    this.#check();
    const all = await Promise.all(this.#stores.map((s) => s.stats()));
    const sum = (key) => all.reduce((a, s) => a + s[key], 0);
    /** @type {Record<string, number>} */
    const fileBytes = {};
    /** @type {Record<string, number>} */
    const usedFileBytes = {};
    all.forEach((s, k) => {
      for (const [name, n] of Object.entries(s.fileBytes)) fileBytes[`${this.stores[k].path}/${name}`] = n;
      for (const [name, n] of Object.entries(s.usedFileBytes)) usedFileBytes[`${this.stores[k].path}/${name}`] = n;
    });
    const liveBytes = sum('liveBytes');
    const logicalBytes = sum('logicalBytes');
    return {
      records: sum('records'),
      liveBytes,
      logicalBytes,
      chunkBytes: sum('chunkBytes'),
      reclaimable: sum('reclaimable'),
      compressionRatio: liveBytes ? logicalBytes / liveBytes : 1,
      usedBytes: sum('usedBytes'),
      usedFileBytes,
      fileBytes,
      apparentBytes: sum('apparentBytes'),
      hasDict: all.some((s) => s.hasDict),
    };
  }

  /** Whole-store statistics over the stores' records in order (see profile.js). */
  async profile(options) {
    this.#check();
    return profileOf(this.#wasm, this, options);
  }

  /** The identity exclusion masks are made for: the stores' combined in order (core's rule). */
  async maskIdentity() {
    this.#check();
    const parts = await Promise.all(this.#stores.map((s) => s.maskIdentity()));
    const all = new Uint8Array(32 * parts.length);
    parts.forEach((p, k) => { all.set(identityBytes(p), 32 * k); });
    return identityText(wasmCall(() => this.#wasm.combinedMaskIdentity(all)));
  }

  /** Records, stored and decoded bytes per codec, summed over the stores. */
  async codecBytes() {
    this.#check();
    return mergeCodecBytes(await Promise.all(this.#stores.map((s) => s.codecBytes())));
  }

  /** `Manifest(<where>, <k> stores, <n> records)`. */
  toString() {
    const n = this.#stores.length;
    return `Manifest(${redactUrl(this.#label)}, ${n} store${n === 1 ? '' : 's'}, ${this.#closed ? 'closed' : `${this.length} records`})`;
  }
  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }

  /** Closes every store. Later calls reject with LOADERX_CLOSED. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    const results = await Promise.allSettled(this.#stores.map((s) => s.close()));
    this.#manifest.free();
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw /** @type {PromiseRejectedResult} */ (failed).reason;
  }
}

// Places: how each kind of value reaches a manifest and its stores.

/** A manifest's directory part of `path` ('' for none) and `path` under a prefix. */
const dirOf = (p) => p.slice(0, Math.max(0, p.lastIndexOf('/')));
const joinRel = (dir, p) => (dir ? `${dir}/${p}` : p);

/**
 * A Place over files by relative path (`{name: bytes}`, `{name: Blob}`, a Map, or picked Files
 * mapped by relative path), when `files` holds a manifest as core decides; else null. The
 * manifest is `manifest.json` at the top, and a listed store `p` is the files under `p/`.
 * @param {Map<string, any>} files
 * @param {string} label
 * @param {(sub: Map<string, any>, label: string) => unknown} storeOf a store value of a sub-map
 */
export async function filesPlace(files, label, identify, manifestFile, storeOf) {
  const holds = tryIdentify(identify, 'directory', '', files.has(NAMES.meta), files.has(manifestFile));
  if (holds !== 'manifestInside') return null;
  const bytes = await bytesOf(files.get(manifestFile));
  return {
    bytes,
    label: `${label}/${manifestFile}`,
    storeValue(path) {
      if (isUrl(path)) return path;
      const prefix = `${path.replace(/\/+$/, '')}/`;
      const sub = new Map();
      for (const [name, v] of files) if (name.startsWith(prefix) && !name.slice(prefix.length).includes('/')) sub.set(name.slice(prefix.length), v);
      return storeOf(sub, joinRel(label, path));
    },
  };
}

/** Picked Files (browser): a manifest when a `manifest.json` sits above every `meta.zr`. */
export function pickedFiles(fileList) {
  const files = Array.from(fileList);
  const path = (f) => f.webkitRelativePath || f.relativePath || f.name;
  const depth = (f) => path(f).split('/').length;
  const manifests = files.filter((f) => f.name === NAMES.manifest).sort((a, b) => depth(a) - depth(b));
  const metas = files.filter((f) => f.name === NAMES.meta).sort((a, b) => depth(a) - depth(b));
  if (!manifests.length || (metas.length && depth(metas[0]) <= depth(manifests[0]))) return null;
  const dir = dirOf(path(manifests[0]));
  const prefix = dir ? `${dir}/` : '';
  return { dir: dir || 'files', files: new Map(files.filter((f) => path(f).startsWith(prefix)).map((f) => [path(f).slice(prefix.length), f])) };
}

/** `identify`'s answer, or null when the location is neither (its open gives the error). */
function tryIdentify(identify, seen, name, store, manifest) {
  try {
    return identify(seen, name, store, manifest);
  } catch {
    return null;
  }
}

/** The bytes of a Blob, ArrayBuffer or view. */
async function bytesOf(v) {
  if (v instanceof Blob) return new Uint8Array(await v.arrayBuffer());
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw loaderxError('LOADERX_ARGUMENT', `${NAMES.manifest} is not bytes or a Blob`);
}

/**
 * A Place over HTTP, read with an HttpSource (same headers, userinfo, timeout and signal as a
 * store's): for the URL of a `.json` file (core: a file named so is a manifest), the Place;
 * for a directory URL, a function to call only when opening it as a store found no `meta.zr`
 * (so a store's open costs no request more), which resolves to the Place when `manifest.json`
 * is there, else null.
 * @param {string | URL} value
 * @param {{timeout?: number, signal?: AbortSignal}} options
 */
export function httpPlace(value, options, identify, wasm) {
  const url = new URL(String(value), globalThis.location?.href);
  const last = decodeURIComponent(url.pathname.split('/').pop() ?? '');
  const { timeout, signal } = options ?? {};
  const sourceAt = (dir) => new HttpSource(dir, { ...(timeout != null && { timeout }), ...(signal != null && { signal }) });
  const placeOf = async (dir, name) => {
    const source = sourceAt(dir);
    try {
      const size = await source.size(name);
      if (size == null) return null;
      const bytes = await source.read(name, 0, size);
      if (bytes == null) return null;
      const file = new URL(name, source.base);
      return {
        bytes,
        label: redactUrl(file.href),
        storeValue: (path) => (isUrl(path) ? path : new URL(`${path.replace(/\/+$/, '')}/`, file).href + url.search),
      };
    } finally {
      source.close();
    }
  };
  if (last && wasm.namesAFile(last)) {
    if (tryIdentify(identify, 'file', last, false, false) !== 'manifestFile') return null;
    const dir = new URL(url.href);
    dir.pathname = dir.pathname.slice(0, dir.pathname.lastIndexOf('/') + 1);
    return placeOf(dir.href, last).then((place) => place ?? Promise.reject(loaderxError('LOADERX_NOT_FOUND', `no manifest at ${redactUrl(url.href)}: the server answers 404`)));
  }
  return async () => {
    const place = await placeOf(url.href, wasm.manifestFile());
    return place && tryIdentify(identify, 'directory', '', false, true) === 'manifestInside' ? place : null;
  };
}

/**
 * The browser entry's locate: a URL (httpPlace), picked Files with a `manifest.json` above
 * every `meta.zr` (their relative paths), or `{name: Blob|bytes}` holding `manifest.json`.
 * Sources and directory handles open as stores.
 * @param {any} wasm
 */
export const browserLocate = (wasm) => async (value, options, identify) => {
  if (typeof value === 'string' || value instanceof URL) return httpPlace(value, options, identify, wasm);
  const v = /** @type {any} */ (value);
  if (v == null || typeof v !== 'object' || typeof v.then === 'function' || (typeof v.read === 'function' && typeof v.size === 'function')) return null;
  if (globalThis.FileSystemDirectoryHandle && v instanceof globalThis.FileSystemDirectoryHandle) return null;
  if ((globalThis.FileList && v instanceof globalThis.FileList) || (Array.isArray(v) && v.every((f) => f instanceof Blob))) {
    const picked = pickedFiles(v);
    return picked && filesPlace(picked.files, picked.dir, identify, wasm.manifestFile(), (sub) => sub);
  }
  const files = v instanceof Map ? v : new Map(Object.entries(v));
  return filesPlace(files, 'files', identify, wasm.manifestFile(), (sub) => sub);
};
