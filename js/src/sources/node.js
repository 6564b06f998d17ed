// A store directory on a local disk, read with positional reads (fs/promises).
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';

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
    const fh = await this.handle(name);
    if (!fh) return null;
    const buf = new Uint8Array(Math.max(0, end - start));
    let filled = 0;
    while (filled < buf.length) {
      const { bytesRead } = await fh.read(buf, filled, buf.length - filled, start + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return filled === buf.length ? buf : buf.subarray(0, filled);
  }

  async close() {
    const hs = [...this.handles.values()];
    this.handles.clear();
    await Promise.all(hs.map(async (h) => (await h.catch(() => null))?.close()));
  }
}
