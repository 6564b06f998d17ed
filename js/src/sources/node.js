// A store directory on a local disk, read with positional reads (fs/promises), and what the
// Node entry point opens: paths, URLs, `{name: bytes}` and sources.
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HttpSource } from './http.js';
import { MemorySource } from './memory.js';
import { loaderxError, describe } from '../errors.js';

/**
 * A directory path (or file: URL), an http(s) URL (string or URL), a source (kept as it is) or `{name: bytes}`
 * as a source. Anything else (undefined, null, numbers, ...) is LOADERX_ARGUMENT.
 * @param {unknown} value
 */
export function nodeSource(value) {
  if (value instanceof URL && value.protocol === 'file:') return new NodeSource(fileURLToPath(value));
  if (value instanceof URL || (typeof value === 'string' && /^https?:\/\//i.test(value))) return new HttpSource(value);
  if (typeof value === 'string') return new NodeSource(value);
  const v = /** @type {any} */ (value);
  if (v != null && typeof v === 'object') {
    if (typeof v.read === 'function' && typeof v.size === 'function') return v;
    return new MemorySource(v);
  }
  throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${describe(value)}: pass a directory path, an http(s) URL, {name: bytes} or a source`);
}

export class NodeSource {
  constructor(dir) {
    this.dir = String(dir);
    this.label = this.dir;
    this.maxGap = 1 << 14;
    this.handles = new Map();
  }

  async size(name) {
    try {
      return (await stat(join(this.dir, name))).size;
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
  }

  handle(name) {
    if (!this.handles.has(name)) {
      const h = open(join(this.dir, name), 'r').catch((e) => {
        this.handles.delete(name);
        if (e.code === 'ENOENT') return null;
        throw e;
      });
      this.handles.set(name, h);
    }
    return this.handles.get(name);
  }

  async read(name, start, end) {
    const buf = new Uint8Array(Math.max(0, end - start));
    const n = await this.readInto(name, start, end, buf, 0);
    if (n == null) return null;
    return n === buf.length ? buf : buf.subarray(0, n);
  }

  /** Positional reads of [start, end) into `target` at `offset`; returns the bytes read (fewer
   *  at the end of the file), or null when the file is missing. */
  async readInto(name, start, end, target, offset) {
    const fh = await this.handle(name);
    if (!fh) return null;
    const want = Math.max(0, end - start);
    let filled = 0;
    while (filled < want) {
      const { bytesRead } = await fh.read(target, offset + filled, want - filled, start + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return filled;
  }

  async close() {
    const hs = [...this.handles.values()];
    this.handles.clear();
    await Promise.all(hs.map(async (h) => (await h.catch(() => null))?.close()));
  }
}
