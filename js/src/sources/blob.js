// Stores picked in a browser: Files or Blobs by name (from an <input webkitdirectory>, dropped
// files or a FileSystemDirectoryHandle), read with Blob.slice.
import { loaderxError } from '../errors.js';
import { NAMES } from '../../pkg/names.js';
import { A_BLOB, NamedFileSource } from './named.js';

const parent = (p) => p.slice(0, Math.max(0, p.lastIndexOf('/')));

/** Reads from a name -> Blob map. */
export class BlobSource extends NamedFileSource {
  /** @param {Map<string, Blob>|Record<string, Blob>} files */
  constructor(files, label = 'files') {
    super(A_BLOB, label);
    this.files = files instanceof Map ? files : new Map(Object.entries(files));
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
    const metas = files.filter((f) => f.name === NAMES.meta).sort((a, b) => path(a).split('/').length - path(b).split('/').length);
    if (!metas.length) throw loaderxError('LOADERX_NOT_FOUND', `no ${NAMES.meta} among the chosen files: pick a store directory`);
    const dir = parent(path(metas[0]));
    const map = new Map(files.filter((f) => parent(path(f)) === dir).map((f) => [f.name, f]));
    return new BlobSource(map, dir || 'files');
  }

  file(name) {
    return this.files.get(name);
  }
  descriptor() {
    return { kind: 'blobs', files: this.files, label: this.label };
  }
}

/** Reads from a FileSystemDirectoryHandle (showDirectoryPicker, Chromium). */
export class DirectoryHandleSource extends NamedFileSource {
  constructor(handle) {
    super(A_BLOB, handle.name);
    this.handle = handle;
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
  descriptor() {
    return { kind: 'dir', handle: this.handle };
  }
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
