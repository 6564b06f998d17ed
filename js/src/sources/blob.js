// Stores picked in a browser: Files or Blobs by name (from an <input webkitdirectory>, dropped
// files or a FileSystemDirectoryHandle), read with Blob.slice.
import { loaderxError } from '../errors.js';

const parent = (p) => p.slice(0, Math.max(0, p.lastIndexOf('/')));

/** Reads from a name -> Blob map. */
export class BlobSource {
  /** @param {Map<string, Blob>|Record<string, Blob>} files */
  constructor(files, label = 'files') {
    this.files = files instanceof Map ? files : new Map(Object.entries(files));
    this.label = label;
    this.maxGap = 1 << 16;
    /** A Blob's size may have wrapped at 2^32 (Node's fs.openAsBlob): the store checks that no
     *  chunk it has written to shows as empty (store.js). */
    this.sizeWraps = true;
  }

  /**
   * The store among picked files: the directory holding the shallowest `meta.zr`
   * (paths from `webkitRelativePath`, or `relativePath` on dropped files).
   */
  static fromFiles(fileList) {
    const files = Array.from(fileList);
    const path = (f) => f.webkitRelativePath || f.relativePath || f.name;
    const metas = files.filter((f) => f.name === 'meta.zr').sort((a, b) => path(a).split('/').length - path(b).split('/').length);
    if (!metas.length) throw loaderxError('LOADERX_NOT_FOUND', 'no meta.zr among the chosen files: pick a store directory');
    const dir = parent(path(metas[0]));
    const map = new Map(files.filter((f) => parent(path(f)) === dir).map((f) => [f.name, f]));
    return new BlobSource(map, dir || 'files');
  }

  async size(name) {
    const f = this.files.get(name);
    return f ? f.size : null;
  }
  async read(name, start, end) {
    const f = this.files.get(name);
    if (!f) return null;
    return new Uint8Array(await f.slice(start, end).arrayBuffer());
  }
  descriptor() {
    return { kind: 'blobs', files: this.files, label: this.label };
  }
  close() {}
}

/** Reads from a FileSystemDirectoryHandle (showDirectoryPicker, Chromium). */
export class DirectoryHandleSource {
  constructor(handle) {
    this.handle = handle;
    this.label = handle.name;
    this.maxGap = 1 << 16;
    this.cache = new Map();
  }
  async file(name) {
    if (!this.cache.has(name)) {
      this.cache.set(name, this.handle.getFileHandle(name).then((h) => h.getFile(), (e) => {
        if (e && (e.name === 'NotFoundError' || e.name === 'TypeMismatchError')) return null;
        throw e;
      }));
    }
    return this.cache.get(name);
  }
  async size(name) {
    const f = await this.file(name);
    return f ? f.size : null;
  }
  async read(name, start, end) {
    const f = await this.file(name);
    return f ? new Uint8Array(await f.slice(start, end).arrayBuffer()) : null;
  }
  descriptor() {
    return { kind: 'dir', handle: this.handle };
  }
  close() {}
}

/** Collects the Files of a drop (directories included) and finds the store among them. */
export async function filesFromDataTransfer(dataTransfer) {
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((res, rej) => entry.file(res, rej));
      Object.defineProperty(file, 'relativePath', { value: prefix + file.name });
      out.push(file);
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walk(e, `${prefix}${entry.name}/`);
      }
    }
  };
  const entries = Array.from(dataTransfer.items || [], (i) => i.webkitGetAsEntry?.()).filter(Boolean);
  if (entries.length) for (const e of entries) await walk(e, '');
  else out.push(...Array.from(dataTransfer.files || []));
  return BlobSource.fromFiles(out);
}
