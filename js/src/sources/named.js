// What the sources over files found by name share (bytes in memory, Blobs and Files, a directory
// handle): `file(name)` finds a file; a missing one has no size and no bytes (null), which
// store.js takes as a file the store does not hold. Each subclass says how it finds a file; the
// file's kind says how big it is and how a range of it is read.

/**
 * How a kind of file gives its size and the bytes of [start, end).
 * @typedef {{size: (f: any) => number, bytes: (f: any, start: number, end: number) => Uint8Array | Promise<Uint8Array>}} FileKind
 */

/** @type {FileKind} Bytes in memory (a Uint8Array); a range past the end is cut at the end. */
export const IN_MEMORY = {
  size: (f) => f.byteLength,
  bytes: (f, start, end) => f.slice(Math.min(start, f.byteLength), Math.min(end, f.byteLength)),
};

/** @type {FileKind} A Blob or File, read with Blob.slice. */
export const A_BLOB = {
  size: (f) => f.size,
  bytes: async (f, start, end) => new Uint8Array(await f.slice(start, end).arrayBuffer()),
};

export class NamedFileSource {
  #kind;
  /** @param {FileKind} kind @param {string} label */
  constructor(kind, label) {
    this.#kind = kind;
    this.label = label;
    this.maxGap = 1 << 16;
  }
  /**
   * The file called `name`, or null when there is none (a subclass finds its files).
   * @param {string} _name @returns {any}
   */
  file(_name) {
    return null;
  }
  /** @param {string} name */
  async size(name) {
    const f = await this.file(name);
    return f ? this.#kind.size(f) : null;
  }
  /** @param {string} name @param {number} start @param {number} end */
  async read(name, start, end) {
    const f = await this.file(name);
    return f ? this.#kind.bytes(f, start, end) : null;
  }
  close() {}
}
