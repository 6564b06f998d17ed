// The typed-array conversion the js package documents (src/index.d.ts, Schema), written out
// independently of the Rust code so the tests can catch it doing something else:
// * native-order numbers as they are; big-endian ones byte-swapped per component;
// * float16 widened to Float32Array (exactly: every half is a float32);
// * bool as Uint8Array 0/1; int64/datetime64/timedelta64 as BigInt64Array;
// * complex as two floats (trailing dimension 2), UCS-4 text as Uint32Array code points
//   (trailing dimension = characters), bytes/void and anything JS cannot hold as their bytes
//   (trailing dimension = itemsize).
import assert from 'node:assert/strict';

/** `{order, kind, itemsize}` of a NumPy dtype string such as '<f4', '|V12', '<M8[s]'. */
export function parseDtype(str) {
  const m = /^([<>|=]?)([a-zA-Z])(\d*)(\[[A-Za-z0-9]+\])?$/.exec(str);
  if (!m) throw new Error(`unsupported dtype ${str}`);
  const [, order, kind, n] = m;
  let itemsize = n === '' ? (kind === 'b' || kind === '?' ? 1 : NaN) : Number(n);
  if (kind === 'U') itemsize *= 4;
  if (!Number.isInteger(itemsize)) throw new Error(`dtype ${str} has no item size`);
  return { order: order || '=', kind, itemsize };
}

/** What the API should give for a dtype: `{arrayType, extraDim, itemsize, swap, half, big}`. */
export function viewOf(dtypeStr) {
  const { order, kind, itemsize } = parseDtype(dtypeStr);
  const big = order === '>';
  const plain = (arrayType) => ({ arrayType, extraDim: null, itemsize, swap: big && itemsize > 1 ? itemsize : 0, half: false, big });
  const ints = { 1: 'Int8Array', 2: 'Int16Array', 4: 'Int32Array', 8: 'BigInt64Array' };
  const uints = { 1: 'Uint8Array', 2: 'Uint16Array', 4: 'Uint32Array', 8: 'BigUint64Array' };
  if (kind === 'b' || kind === '?') return plain('Uint8Array');
  if (kind === 'i' && ints[itemsize]) return plain(ints[itemsize]);
  if (kind === 'u' && uints[itemsize]) return plain(uints[itemsize]);
  if ((kind === 'M' || kind === 'm') && itemsize === 8) return plain('BigInt64Array');
  if (kind === 'f' && itemsize === 2) return { arrayType: 'Float32Array', extraDim: null, itemsize, swap: 0, half: true, big };
  if (kind === 'f' && itemsize === 4) return plain('Float32Array');
  if (kind === 'f' && itemsize === 8) return plain('Float64Array');
  if (kind === 'c' && (itemsize === 8 || itemsize === 16)) {
    return { arrayType: itemsize === 8 ? 'Float32Array' : 'Float64Array', extraDim: 2, itemsize, swap: big ? itemsize / 2 : 0, half: false, big };
  }
  if (kind === 'U' && itemsize > 0) return { arrayType: 'Uint32Array', extraDim: itemsize / 4, itemsize, swap: big ? 4 : 0, half: false, big };
  return { arrayType: 'Uint8Array', extraDim: itemsize, itemsize, swap: 0, half: false, big: false };
}

/** IEEE 754 half-precision bits to a number (exact). */
export function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Record bytes (in the dtype's own byte order) as the typed array the API documents. */
export function toTyped(bytes, dtypeStr) {
  const v = viewOf(dtypeStr);
  const C = globalThis[v.arrayType];
  if (v.half) {
    const out = new Float32Array(bytes.byteLength / 2);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let k = 0; k < out.length; k++) out[k] = halfToNumber(dv.getUint16(2 * k, !v.big));
    return out;
  }
  const copy = new Uint8Array(bytes); // fresh, aligned buffer
  if (v.swap) {
    for (let at = 0; at < copy.length; at += v.swap) copy.subarray(at, at + v.swap).reverse();
  }
  return new C(copy.buffer, 0, copy.byteLength / C.BYTES_PER_ELEMENT);
}

/** The trailing dimensions of one element: `itemShape` plus the extra dimension, if any. */
export function tailShape(dtypeStr, itemShape) {
  const { extraDim } = viewOf(dtypeStr);
  return extraDim == null ? [...itemShape] : [...itemShape, extraDim];
}

const isFloat = (a) => a instanceof Float32Array || a instanceof Float64Array;

/** Asserts two typed arrays have the same type and the same elements (floats by Object.is, so
 *  NaN equals NaN and -0 differs from 0). */
export function assertSameArray(actual, expected, what) {
  assert.equal(actual?.constructor?.name, expected.constructor.name, `${what}: array type`);
  assert.equal(actual.length, expected.length, `${what}: element count`);
  if (isFloat(expected)) {
    for (let k = 0; k < expected.length; k++) {
      if (!Object.is(actual[k], expected[k])) assert.fail(`${what}: element ${k} is ${actual[k]}, expected ${expected[k]}`);
    }
    return;
  }
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  const e = Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength);
  if (!a.equals(e)) {
    let k = 0;
    while (k < expected.length && actual[k] === expected[k]) k++;
    assert.fail(`${what}: element ${k} is ${actual[k]}, expected ${expected[k]}`);
  }
}
