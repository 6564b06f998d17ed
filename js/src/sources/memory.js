// A store held in memory: `{ 'meta.zr': Uint8Array, '0.zr': Uint8Array, ... }`.
import { loaderxError, describe } from '../errors.js';
import { asBytes } from '../bytes.js';
import { IN_MEMORY, NamedFileSource } from './named.js';

export class MemorySource extends NamedFileSource {
  /**
   * @param {Record<string, Uint8Array|ArrayBuffer>|Map<string, Uint8Array|ArrayBuffer>} files
   *   Any ArrayBufferView is taken as its bytes; a null or undefined file is a missing one, and
   *   any other value is LOADERX_ARGUMENT.
   */
  constructor(files, label = 'memory') {
    if (files == null || typeof files !== 'object') {
      throw loaderxError('LOADERX_ARGUMENT', `a memory store is {name: bytes}, got ${describe(files)}`);
    }
    super(IN_MEMORY, label);
    /** @type {Map<string, Uint8Array>} */
    this.files = new Map();
    for (const [name, v] of files instanceof Map ? files : Object.entries(files)) {
      if (v == null) continue;
      const bytes = asBytes(v);
      if (!bytes) throw loaderxError('LOADERX_ARGUMENT', `a memory store is {name: bytes}, but ${describe(String(name))} is ${describe(v)}`);
      this.files.set(String(name), bytes);
    }
  }
  file(name) {
    return this.files.get(name);
  }
  /** Copies [start, end) into `target` at `offset`; returns the bytes copied (0 if missing). */
  async readInto(name, start, end, target, offset) {
    return this.readIntoSync(name, start, end, target, offset);
  }
  readIntoSync(name, start, end, target, offset) {
    const f = this.files.get(name);
    if (!f) return 0;
    const part = f.subarray(Math.min(start, f.byteLength), Math.min(end, f.byteLength));
    target.set(part, offset);
    return part.byteLength;
  }
  descriptor() {
    return { kind: 'memory', files: Object.fromEntries(this.files), label: this.label };
  }
}
