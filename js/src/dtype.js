// What a store's values are, for display (the viewer): wasm's typed-array mapping (`arrayType`,
// `extraDim`, `itemBytes`) plus the three things only the NumPy dtype string says (the kind
// letter, the byte order and a datetime unit).

const NAMES = { u: 'uint', i: 'int', f: 'float', c: 'complex', b: 'bool', S: 'bytes', U: 'str', V: 'void', M: 'datetime64', m: 'timedelta64' };
const DTYPE = /^([<>|=]?)([a-zA-Z])\d*(?:\[(\w+)\])?$/;

/**
 * `{kind, bytes, name, bigEndian, unit, arrayType, extraDim, numeric}` of a schema (null: a store
 * without schema.msgpack, plain bytes, kind 'raw'). `kind` is the NumPy kind letter (u i f c b S
 * U V M m); `bytes` is the size of one element as stored; `numeric` says whether the values are
 * plain numbers (integers, floats, bool), one per element of the typed array.
 * @param {import('./common.js').Schema | null} schema
 * @returns {import('./common.js').DtypeInfo}
 */
export function dtypeInfo(schema) {
  if (!schema) {
    return { kind: 'raw', bytes: 1, name: 'bytes (no schema)', bigEndian: false, unit: null, arrayType: 'Uint8Array', extraDim: null, numeric: true };
  }
  const { arrayType, extraDim, itemBytes, itemShape } = schema;
  const count = itemShape.reduce((a, b) => a * b, 1);
  const m = DTYPE.exec(schema.dtype);
  const kind = m ? m[2] : 'V';
  const unit = m?.[3] ?? null;
  const bytes = count ? itemBytes / count : 0;
  const bigEndian = m?.[1] === '>' && bytes > 1;
  let name = NAMES[kind] ?? schema.dtype;
  if ('uifc'.includes(kind)) name += bytes * 8;
  else if (kind === 'S' || kind === 'V') name += bytes;
  else if (kind === 'U') name = `str (up to ${extraDim} characters)`;
  else if (unit) name += `[${unit}]`;
  if (bigEndian) name += ', big-endian';
  const numeric = extraDim == null && 'uifb'.includes(kind);
  return { kind, bytes, name, bigEndian, unit, arrayType, extraDim, numeric };
}
