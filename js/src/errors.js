// The one error type of the package. wasm raises the data errors (LOADERX_CORRUPT, LOADERX_INDEX,
// ...) as plain Errors named "LoaderxError" with a `code`; `toLoaderxError` makes them instances
// of LoaderxError where they cross into JS, so `e instanceof LoaderxError` holds for every error
// the package gives (worker errors are rebuilt as LoaderxErrors too).
import { redactUrl } from './redact.js';

/** Every rejection (and synchronous throw) of the package: a stable `code`, and `index` when
 *  one record is at fault. */
export class LoaderxError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{cause?: unknown, index?: number, file?: string, offset?: number}} [options]
   */
  constructor(code, message, options = {}) {
    // A URL in the message is shown without its secrets (redact.js), whoever built the message.
    super(redactUrl(message), 'cause' in options ? { cause: options.cause } : undefined);
    this.code = code;
    if (options.index != null) this.index = options.index;
    if (options.file != null) this.file = options.file;
    if (options.offset != null) this.offset = options.offset;
  }
}
Object.defineProperty(LoaderxError.prototype, 'name', { value: 'LoaderxError', writable: true, configurable: true });

/** Builds a LoaderxError (`extra`: `cause`, `index`, `file`, `offset`). */
export function loaderxError(code, message, extra = {}) {
  return new LoaderxError(code, message, extra);
}

/** Whether `e` is a LoaderxError, or the shape wasm throws (an Error named LoaderxError with a
 *  string `code`) that `toLoaderxError` turns into one. */
export function isLoaderxError(e) {
  try {
    return e instanceof LoaderxError || (e instanceof Error && e.name === 'LoaderxError' && typeof /** @type {any} */ (e).code === 'string');
  } catch {
    return false; // a revoked Proxy, say
  }
}

/** A wasm error as a LoaderxError (the same object, its prototype set; message, stack, code and
 *  index kept). Anything else is returned as it is. */
export function toLoaderxError(e) {
  if (e instanceof LoaderxError || !isLoaderxError(e)) return e;
  Object.setPrototypeOf(e, LoaderxError.prototype);
  return e;
}

/** Runs a synchronous wasm call; its error comes out as a LoaderxError. */
export function wasmCall(fn) {
  try {
    return fn();
  } catch (e) {
    throw toLoaderxError(e);
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
  if (isLoaderxError(e)) return toLoaderxError(e);
  return new LoaderxError(code, `${what}: ${messageOf(e)}`, { cause: e });
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
