// A store held in memory: `{ 'meta.zr': Uint8Array, '0.zr': Uint8Array, ... }`.
export class MemorySource {
  /** @param {Record<string, Uint8Array|ArrayBuffer>} files */
  constructor(files, label = 'memory') {
    this.files = new Map(Object.entries(files).map(([k, v]) => [k, v instanceof Uint8Array ? v : new Uint8Array(v)]));
    this.label = label;
    this.maxGap = 1 << 16;
  }
  async size(name) {
    const f = this.files.get(name);
    return f ? f.byteLength : null;
  }
  async read(name, start, end) {
    const f = this.files.get(name);
    if (!f) return null;
    return f.slice(Math.min(start, f.byteLength), Math.min(end, f.byteLength));
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
  close() {}
}
