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
  return e instanceof Error && e.name === 'LoaderxError' && typeof e.code === 'string';
}

/** Passes LoaderxErrors through and wraps anything else as an I/O error about `what`. */
export function ioError(e, what) {
  if (isLoaderxError(e)) return e;
  const detail = e && e.message ? e.message : String(e);
  return loaderxError('LOADERX_IO', `${what}: ${detail}`, { cause: e });
}
