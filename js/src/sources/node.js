// A store directory on a local disk, read with positional reads, and what the Node entry point
// opens: paths, URLs, `{name: bytes}` and sources. A call's reads are either all queued at once
// on libuv's thread pool (readInto), so they proceed while the event loop decodes another batch,
// or made on the calling thread (readIntoSync: no thread-pool round trip per read), which the
// store does for a call of at most `syncLimit` bytes when no other call is waiting on the source.
import { close, openSync, read, readSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HttpSource } from './http.js';
import { MemorySource } from './memory.js';
import { BlobSource } from './blob.js';
import { loaderxError, describe } from '../errors.js';
import { redactUrl } from '../redact.js';
import { NAMES } from '../../pkg/names.js';

/**
 * A directory path (or file: URL, string or URL), an http(s) URL (string or URL), a source (kept
 * as it is), `{name: Blob}` or `{name: bytes}` (an object or a Map) as a source. `options`:
 * `timeout` and `signal` for a URL's HttpSource. Anything else (undefined, null, numbers, a
 * Promise, other URL schemes, a path to a file such as meta.zr) is LOADERX_ARGUMENT with a hint.
 * @param {unknown} value
 * @param {{timeout?: number, signal?: AbortSignal}} [options]
 */
export function nodeSource(value, options = {}) {
  const v = /** @type {any} */ (value);
  if (typeof value === 'string' || value instanceof URL) {
    const text = String(value);
    const scheme = value instanceof URL ? value.protocol.slice(0, -1) : /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1];
    if (scheme == null) return new NodeSource(directory(text, text));
    const s = scheme.toLowerCase();
    if (s === 'file') {
      let path;
      try {
        path = fileURLToPath(value);
      } catch (e) {
        throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${redactUrl(text)}: ${e.message}`);
      }
      return new NodeSource(directory(path, text));
    }
    if (s === 'http' || s === 'https') {
      const last = new URL(text).pathname.replace(/\/+$/, '').split('/').pop() ?? '';
      if (last.toLowerCase() === NAMES.meta) throw metaFile(redactUrl(text));
      const { timeout, signal } = options ?? {};
      return new HttpSource(value, { ...(timeout != null && { timeout }), ...(signal != null && { signal }) });
    }
    const hint = ['s3', 'gs', 'gcs', 'az', 'abfs', 'abfss'].includes(s)
      ? ': the JS package reads object storage over https (a public or presigned URL of the store directory)'
      : ': pass a directory path, a file: URL or an http(s) URL';
    throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${redactUrl(text)}: ${scheme}:// URLs are not supported${hint}`);
  }
  if (v != null && typeof v === 'object') {
    if (typeof v.then === 'function') {
      throw loaderxError('LOADERX_ARGUMENT', 'cannot open a store from a Promise: did you forget an `await`?');
    }
    if (typeof v.read === 'function' && typeof v.size === 'function') return v;
    const values = v instanceof Map ? [...v.values()] : Object.values(v);
    if (values.length && values.every((x) => x instanceof Blob)) return new BlobSource(v);
    return new MemorySource(v);
  }
  if (typeof value === 'function') {
    throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from a function: pass a directory path, an http(s) URL, {name: bytes} or a source`);
  }
  throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${describe(value)}: pass a directory path, an http(s) URL, {name: bytes} or a source`);
}

/** The path of a store directory, as given; a path to a file (meta.zr, say) is LOADERX_ARGUMENT
 *  naming the directory to open instead. A missing path is left to the open (LOADERX_NOT_FOUND). */
function directory(path, shown) {
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    // Missing or unreadable: the open says so.
  }
  if (isFile) {
    if (basename(path) === NAMES.meta) throw metaFile(shown, dirname(path));
    throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${shown}: it is a file; a store is a directory (the one that holds meta.zr)`);
  }
  return path;
}

/** LOADERX_ARGUMENT for a path or URL of meta.zr itself. */
function metaFile(shown, dir) {
  const where = dir == null ? 'the directory that holds it' : `the directory that holds it (${dir})`;
  return loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${shown}: that is the store's meta.zr; open ${where}`);
}

export class NodeSource {
  constructor(dir) {
    this.dir = String(dir);
    this.label = this.dir;
    this.maxGap = 1 << 14;
    /** Largest call read on the calling thread (bytes); larger ones go to the thread pool. */
    this.syncLimit = 16 << 20;
    /** Smallest call (decoded bytes) a Store shares with its worker thread (Infinity: none). */
    this.workerMin = 1 << 20;
    /** Reads of one call in flight at once (all of them: libuv queues what its threads cannot take). */
    this.readConcurrency = Infinity;
    /** @type {Map<string, number>} open descriptors */
    this.fds = new Map();
    /** Reads on the thread pool not yet done: close() waits for them before it closes their
     *  descriptors (a number closed under a read could name another file by then). */
    this.pending = 0;
    /** @type {(() => void) | null} */
    this.drained = null;
    this.closed = false;
  }

  async size(name) {
    try {
      return (await stat(join(this.dir, name))).size;
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
  }

  /** The descriptor of `name`, opened once; null when it is missing (looked for again next time). */
  fd(name) {
    if (this.closed) throw Object.assign(new Error(`${this.label} is closed`), { code: 'EBADF' });
    let fd = this.fds.get(name);
    if (fd == null) {
      try {
        fd = openSync(join(this.dir, name), 'r');
      } catch (e) {
        if (e.code === 'ENOENT') return null;
        throw e;
      }
      this.fds.set(name, fd);
    }
    return fd;
  }

  async read(name, start, end) {
    const buf = new Uint8Array(Math.max(0, end - start));
    const n = await this.readInto(name, start, end, buf, 0);
    if (n == null) return null;
    return n === buf.length ? buf : buf.subarray(0, n);
  }

  /** Positional reads of [start, end) into `target` at `offset` on libuv's thread pool; resolves
   *  to the bytes read (fewer at the end of the file), or null when the file is missing. */
  async readInto(name, start, end, target, offset) {
    const fd = this.fd(name);
    if (fd == null) return null;
    const want = Math.max(0, end - start);
    let filled = 0;
    while (filled < want) {
      this.pending++;
      const n = await /** @type {Promise<number>} */ (new Promise((resolve, reject) => {
        read(fd, target, offset + filled, want - filled, start + filled, (e, got) => {
          if (--this.pending === 0) this.drained?.();
          return e ? reject(e) : resolve(got);
        });
      }));
      if (n === 0) break;
      filled += n;
    }
    return filled;
  }

  /** `readInto` on the calling thread (returns the count, or null when the file is missing). */
  readIntoSync(name, start, end, target, offset) {
    const fd = this.fd(name);
    if (fd == null) return null;
    const want = Math.max(0, end - start);
    let filled = 0;
    while (filled < want) {
      const n = readSync(fd, target, offset + filled, want - filled, start + filled);
      if (n === 0) break;
      filled += n;
    }
    return filled;
  }

  async close() {
    this.closed = true;
    if (this.pending > 0) await /** @type {Promise<void>} */ (new Promise((resolve) => { this.drained = () => resolve(); }));
    const fds = [...this.fds.values()];
    this.fds.clear();
    await Promise.all(fds.map((fd) => new Promise((resolve, reject) => close(fd, (e) => (e ? reject(e) : resolve(undefined))))));
  }
}
