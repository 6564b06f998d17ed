// Bytes as loaderx takes them from callers and sources: a Uint8Array as it is, an ArrayBuffer or
// another ArrayBufferView (Buffer, DataView, Uint16Array, ...) as a view of its bytes. Anything
// else (numbers, strings, arrays, array-likes with a made-up length) is not bytes.

/** `v` as a Uint8Array over the same memory, or undefined when it is not bytes. */
export function asBytes(v) {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && v instanceof SharedArrayBuffer)) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  return undefined;
}
