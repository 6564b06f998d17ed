// Errors the JS side raises. wasm raises the data errors (LOADERX_CORRUPT, LOADERX_INDEX, ...)
// with the same shape: an Error named "LoaderxError" with a stable `code`.

/** Builds a LoaderxError. */
export function loaderxError(code, message, extra = {}) {
  const err = new Error(message, extra.cause ? { cause: extra.cause } : undefined);
  err.name = 'LoaderxError';
  err.code = code;
  for (const [k, v] of Object.entries(extra)) if (k !== 'cause') err[k] = v;
  return err;
}

/** Whether `e` is already a LoaderxError. */
export function isLoaderxError(e) {
  try {
    return e instanceof Error && e.name === 'LoaderxError' && typeof e.code === 'string';
  } catch {
    return false; // a revoked Proxy, say
  }
}

/** Passes LoaderxErrors through and wraps anything else as an I/O error about `what`. */
export function ioError(e, what) {
  return wrap('LOADERX_IO', e, what);
}

/** Passes LoaderxErrors through and wraps anything else as a bad argument (`what` failed). */
export function argumentError(e, what) {
  return wrap('LOADERX_ARGUMENT', e, what);
}

function wrap(code, e, what) {
  if (isLoaderxError(e)) return e;
  return loaderxError(code, `${what}: ${messageOf(e)}`, { cause: e });
}

/** What a thrown value says: its message, the string thrown, or what it is. */
function messageOf(e) {
  try {
    if (typeof e === 'string') return e;
    if (e instanceof Error) return e.message || String(e.name);
    if (e && typeof e.message === 'string' && e.message) return e.message;
  } catch { /* a getter that throws: describe it instead */ }
  return describe(e);
}

/** A value for an error message; never throws (Symbols, null-prototype objects, Proxies). */
export function describe(v) {
  try {
    if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
    if (typeof v === 'bigint') return `${v}n`;
    if (typeof v === 'function') return 'a function';
    if (v === null || typeof v !== 'object') return String(v);
    if (Array.isArray(v)) return `an array of ${v.length}`;
    const name = Object.getPrototypeOf(v)?.constructor?.name;
    if (typeof name !== 'string' || !name || name === 'Object') return 'an object';
    return `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}`;
  } catch {
    return `a ${typeof v}`;
  }
}

/** A source's label for messages, whatever the source set it to. */
export function labelOf(source) {
  try {
    const label = source?.label;
    return label == null ? 'the source' : String(label);
  } catch {
    return 'the source';
  }
}
