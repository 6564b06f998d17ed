// A small reader for NumPy .npy files (format versions 1-3), enough for the fixtures' expected
// files: simple dtypes only ('<f2', '>i4', '|b1', '|V12', '<c8', ...); no object arrays, no
// structured (list) descriptors. The data comes back as raw bytes in the file's byte order.
import { readFileSync } from 'node:fs';

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY

/** Parses the header dict, e.g. `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`. */
function parseHeader(text, where) {
  const descr = /'descr':\s*'([^']*)'/.exec(text);
  const fortran = /'fortran_order':\s*(True|False)/.exec(text);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(text);
  if (!descr) throw new Error(`${where}: unsupported or missing descr in npy header ${text.trim()}`);
  if (!fortran || !shape) throw new Error(`${where}: malformed npy header ${text.trim()}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
    const n = Number(s.replace(/L$/, ''));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${where}: bad dimension ${s}`);
    return n;
  });
  return { descr: descr[1], fortranOrder: fortran[1] === 'True', shape: dims };
}

/** Item size of a simple descr such as '<f4', '|V12', '<U3' (4 bytes per character). */
export function descrItemsize(descr) {
  const m = /^[<>|=]?([a-zA-Z])(\d*)/.exec(descr);
  if (!m) throw new Error(`unsupported dtype ${descr}`);
  const [, kind, n] = m;
  if (kind === 'b' && n === '') return 1;
  if (kind === 'O') throw new Error('object arrays are not supported');
  if (n === '') throw new Error(`dtype ${descr} has no size`);
  return kind === 'U' ? 4 * Number(n) : Number(n);
}

/**
 * Reads an .npy file: `{descr, shape, fortranOrder, itemsize, count, data}`, where `data` is a
 * Uint8Array of `count * itemsize` bytes (C order).
 */
export function readNpy(path) {
  const buf = new Uint8Array(readFileSync(path));
  if (!MAGIC.every((b, k) => buf[k] === b)) throw new Error(`${path}: not an .npy file`);
  const major = buf[6];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let headerLen, start;
  if (major === 1) { headerLen = dv.getUint16(8, true); start = 10; }
  else if (major === 2 || major === 3) { headerLen = dv.getUint32(8, true); start = 12; }
  else throw new Error(`${path}: unsupported npy version ${major}`);
  const text = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(buf.subarray(start, start + headerLen));
  const h = parseHeader(text, path);
  if (h.fortranOrder && h.shape.length > 1) throw new Error(`${path}: Fortran-order arrays are not supported`);
  const itemsize = descrItemsize(h.descr);
  const count = h.shape.reduce((a, b) => a * b, 1);
  const data = buf.subarray(start + headerLen);
  if (data.byteLength !== count * itemsize) {
    throw new Error(`${path}: ${data.byteLength} data bytes, expected ${count} x ${itemsize}`);
  }
  return { ...h, itemsize, count, data };
}

/** The elements of an integer .npy array as JS numbers (exact up to 2^53). */
export function npyNumbers(npy) {
  const { descr, data, count, itemsize } = npy;
  const m = /^([<>|=]?)([iub])(\d*)$/.exec(descr);
  if (!m) throw new Error(`npyNumbers: ${descr} is not an integer dtype`);
  const little = m[1] !== '>';
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const out = new Array(count);
  for (let k = 0; k < count; k++) {
    const at = k * itemsize;
    switch (itemsize) {
      case 1: out[k] = m[2] === 'i' ? dv.getInt8(at) : dv.getUint8(at); break;
      case 2: out[k] = m[2] === 'i' ? dv.getInt16(at, little) : dv.getUint16(at, little); break;
      case 4: out[k] = m[2] === 'i' ? dv.getInt32(at, little) : dv.getUint32(at, little); break;
      case 8: {
        const v = m[2] === 'i' ? dv.getBigInt64(at, little) : dv.getBigUint64(at, little);
        if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`npyNumbers: ${v} is not exact as a number`);
        out[k] = Number(v);
        break;
      }
      default: throw new Error(`npyNumbers: itemsize ${itemsize}`);
    }
  }
  return out;
}
