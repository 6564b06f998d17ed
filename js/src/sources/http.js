// A store served over HTTP(S), read with single-range GETs. A server that ignores Range (answers
// 200) is refused before its body is read, so a 4 GiB chunk is never downloaded by accident.
// Each request, body included, has `timeout` ms to finish, and the caller's `signal` aborts it:
// either is LOADERX_IO naming the URL. URLs in messages and labels are redacted (redact.js);
// the requests use them whole.
import { loaderxError, ioError, isLoaderxError, describe } from '../errors.js';
import { redactUrl } from '../redact.js';

/** Milliseconds a request (answer and body) may take, by default. */
export const HTTP_TIMEOUT = 30_000;

const TOTAL = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i;
const UNSATISFIED = /^bytes\s+\*\/(\d+)$/i;

/**
 * The store's URL as a directory (`base`, ending in `/`, without userinfo, query or fragment;
 * `shownBase`: the same with its userinfo, for messages once redacted), its query (`search`,
 * '' or `?...`), and the Basic Authorization header that carries its userinfo (or null).
 */
function splitUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    const base = url.endsWith('/') ? url : `${url}/`;
    return { base, shownBase: base, search: '', authorization: null };
  }
  parsed.hash = '';
  if (!parsed.pathname.endsWith('/')) parsed.pathname += '/';
  const search = parsed.search;
  parsed.search = '';
  const shownBase = parsed.href;
  let authorization = null;
  if (parsed.username || parsed.password) {
    const bytes = new TextEncoder().encode(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`);
    authorization = `Basic ${btoa(String.fromCharCode(...bytes))}`;
    parsed.username = '';
    parsed.password = '';
  }
  return { base: parsed.href, shownBase, search, authorization };
}

/** A fetch that failed as LOADERX_IO naming `shown` (a redacted URL), with the reason fetch
 *  gave and its cause (Node: "fetch failed", cause "connect ECONNREFUSED ..."). The original
 *  error is kept as the cause only when it shows no URL secret. */
function fetchFailure(e, shown) {
  if (isLoaderxError(e)) return e;
  let why;
  let clean = false;
  try {
    const inner = e?.cause?.message;
    why = `${e?.message ?? e}${inner ? ` (${inner})` : ''}`;
    clean = redactUrl(why) === why && redactUrl(String(e?.stack ?? '')) === String(e?.stack ?? '');
  } catch {
    why = describe(e);
  }
  return loaderxError('LOADERX_IO', `fetching ${shown} failed: ${redactUrl(why)}`, clean ? { cause: e } : {});
}

export class HttpSource {
  /** The store's URL with its userinfo (never shown unredacted). */
  #shownBase;

  /**
   * @param {string|URL} base URL of the store directory.
   * @param {{fetch?: typeof fetch, headers?: Record<string,string>, cacheBytes?: number, timeout?: number, signal?: AbortSignal}} [options]
   *   A custom `fetch` or a `signal` cannot be sent to a worker: such a source opens on the
   *   calling thread only (see `descriptor`). `timeout`: ms per request (default HTTP_TIMEOUT;
   *   Infinity waits for ever).
   */
  constructor(base, options = {}) {
    const url = String(base);
    this.label = redactUrl(url);
    const { base: plain, shownBase, search, authorization } = splitUrl(url);
    this.base = plain;
    this.#shownBase = shownBase;
    /** The query of the URL given (a shared access token, say), sent with every file's URL. */
    this.search = search;
    const { timeout = HTTP_TIMEOUT, signal = null } = options;
    if (typeof timeout !== 'number' || !(timeout > 0)) {
      throw loaderxError('LOADERX_ARGUMENT', `HttpSource timeout must be a positive number of milliseconds (or Infinity), got ${describe(timeout)}`);
    }
    if (signal != null && !(typeof signal === 'object' && typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
      throw loaderxError('LOADERX_ARGUMENT', `HttpSource signal must be an AbortSignal, got ${describe(signal)}`);
    }
    this.timeout = timeout;
    /** @type {AbortSignal | null} */
    this.signal = signal;
    /** Whether `fetch` is the caller's own (then the source cannot move to a worker). */
    this.customFetch = Boolean(options.fetch);
    this.fetch = options.fetch || globalThis.fetch.bind(globalThis);
    this.headers = options.headers || {};
    // fetch refuses a URL with credentials in it: they go in an Authorization header instead
    // (as a browser or curl sends them), unless the caller set one.
    if (authorization && !Object.keys(this.headers).some((k) => k.toLowerCase() === 'authorization')) {
      this.headers = { ...this.headers, Authorization: authorization };
    }
    this.maxGap = 1 << 18;
    /** Its bytes come over the network: reads are checked against checksums by default. */
    this.fetched = true;
    /** Recently read record ranges kept in memory (see RangeCache in store.js). */
    this.cacheBytes = options.cacheBytes ?? 64 << 20;
    this.sizes = new Map();
    /** Requests in flight, each as the function that aborts it with a reason (close() and
     *  interrupt() call them). */
    this.inFlight = new Set();
  }

  /** The URL a file is requested from: the store's URL, its query kept. */
  url(name) {
    return new URL(name, this.base).href + this.search;
  }

  /** `url(name)` as messages show it: redacted, with `***@` where the URL had credentials. */
  shown(name) {
    return redactUrl(new URL(name, this.#shownBase).href + this.search);
  }

  /**
   * GETs bytes [first, last] of `name` and hands the response to `use`, all within `timeout`
   * and until `signal` aborts; either ending it early is LOADERX_IO naming the URL.
   * @template T
   * @param {string} name @param {number} first @param {number} last
   * @param {(res: Response) => Promise<T>} use
   * @returns {Promise<T>}
   */
  async get(name, first, last, use) {
    const url = this.url(name);
    const controller = new AbortController();
    /** Why the request was cut short, once it was. @type {string | null} */
    let cut = null;
    const stop = (why) => {
      cut ??= why;
      controller.abort();
    };
    const closing = (why = 'the source is closed') => stop(why);
    this.inFlight.add(closing);
    const signal = this.signal;
    const onAbort = () => stop('aborted by the signal');
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    // (A delay past 2^31 - 1 ms would fire at once: longer than 24 days is no limit.)
    const timer = this.timeout < 2 ** 31 ? setTimeout(() => stop(`no answer within ${this.timeout} ms (the HttpSource timeout)`), this.timeout) : null;
    try {
      let res;
      try {
        if (cut) throw new Error(cut);
        res = await this.fetch(url, { headers: { ...this.headers, Range: `bytes=${first}-${last}` }, cache: 'no-store', signal: controller.signal });
      } catch (e) {
        throw cut ? loaderxError('LOADERX_IO', `fetching ${this.shown(name)} failed: ${cut}`) : fetchFailure(e, this.shown(name));
      }
      if (res.status === 200 && res.headers.get('Content-Length') !== '0') {
        // (An empty file has no byte to range over, and some servers answer that with a
        // bodiless 200 rather than 416: nothing to download, so it is just an empty file.)
        try { await res.body?.cancel(); } catch { /* already closed */ }
        throw loaderxError('LOADERX_NO_RANGE', `${this.shown(name)}: the server ignored the Range header (HTTP 200); loaderx needs a server with byte-range support`);
      }
      try {
        return await use(res);
      } catch (e) {
        if (cut) throw loaderxError('LOADERX_IO', `reading ${this.shown(name)} failed: ${cut}`, { cause: e });
        throw e;
      }
    } finally {
      if (timer != null) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      this.inFlight.delete(closing);
    }
  }

  async size(name) {
    if (this.sizes.has(name)) return this.sizes.get(name);
    const size = await this.get(name, 0, 0, (res) => this.#sizeOf(name, res));
    this.sizes.set(name, size);
    return size;
  }

  /** @param {string} name @param {Response} res */
  async #sizeOf(name, res) {
    let size;
    if (res.status === 404 || res.status === 410) size = null;
    else if (res.status === 416) size = Number((res.headers.get('Content-Range') || '').match(UNSATISFIED)?.[1] ?? 0);
    else if (res.status === 200) size = 0; // an empty file (see get)
    else if (res.status === 206) {
      const m = (res.headers.get('Content-Range') || '').match(TOTAL);
      if (!m || m[3] === '*') throw loaderxError('LOADERX_IO', `${this.shown(name)}: no file size in Content-Range`);
      size = Number(m[3]);
    } else {
      throw loaderxError('LOADERX_IO', `${this.shown(name)}: HTTP ${res.status}`);
    }
    if (res.status !== 206) await res.body?.cancel().catch(() => {});
    else await res.arrayBuffer();
    return size;
  }

  async read(name, start, end) {
    if (end <= start) return new Uint8Array(0);
    return this.get(name, start, end - 1, (res) => this.#bytesOf(name, start, end, res));
  }

  /** @param {string} name @param {number} start @param {number} end @param {Response} res */
  async #bytesOf(name, start, end, res) {
    if (res.status === 404 || res.status === 410) {
      await res.body?.cancel().catch(() => {});
      return null;
    }
    if (res.status === 416 || res.status === 200) {
      // Past the end of the file, or an empty file (see get).
      await res.body?.cancel().catch(() => {});
      return new Uint8Array(0);
    }
    if (res.status !== 206) throw loaderxError('LOADERX_IO', `${this.shown(name)}: HTTP ${res.status}`);
    const m = (res.headers.get('Content-Range') || '').match(TOTAL);
    if (!m || Number(m[1]) !== start) {
      await res.body?.cancel().catch(() => {});
      throw loaderxError('LOADERX_IO', `${this.shown(name)}: the server answered a different range (${res.headers.get('Content-Range')})`);
    }
    let body;
    try {
      body = new Uint8Array(await res.arrayBuffer());
    } catch (e) {
      throw ioError(e, `reading ${this.shown(name)} failed`);
    }
    return body.byteLength > end - start ? body.subarray(0, end - start) : body;
  }

  /** What rebuilds this source in a worker; LOADERX_ARGUMENT with a custom fetch or a signal
   *  (neither can be cloned to a worker). */
  descriptor() {
    if (this.customFetch || this.signal) {
      throw loaderxError('LOADERX_ARGUMENT', `${this.label}: an HttpSource with a custom fetch or a signal cannot be opened in a worker (neither can be sent there); `
        + 'open it with {worker: false, threads: false}');
    }
    return { kind: 'http', base: this.base + this.search, headers: this.headers, cacheBytes: this.cacheBytes, timeout: this.timeout };
  }

  /** How the source shows in `console.log` and `util.inspect`: its redacted URL. */
  toString() {
    return `HttpSource(${this.label})`;
  }
  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }
  /** Aborts the requests in flight (a failed open leaves none waiting for their timeout). */
  /** Cuts the requests in flight short (each fails with LOADERX_IO); later requests go ahead. */
  interrupt() {
    for (const abort of [...this.inFlight]) abort('interrupted (another store is opening)');
  }

  close() {
    for (const abort of [...this.inFlight]) abort();
  }
}
