// A store served over HTTP(S), read with single-range GETs. A server that ignores Range (answers
// 200) is refused before its body is read, so a 4 GiB chunk is never downloaded by accident.
import { loaderxError, ioError } from '../errors.js';

const TOTAL = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i;
const UNSATISFIED = /^bytes\s+\*\/(\d+)$/i;

export class HttpSource {
  /**
   * @param {string|URL} base URL of the store directory.
   * @param {{fetch?: typeof fetch, headers?: Record<string,string>, cacheBytes?: number}} [options]
   *   A custom `fetch` is a function, which cannot be sent to a worker: such a source opens on
   *   the calling thread only (see `descriptor`).
   */
  constructor(base, options = {}) {
    const url = String(base);
    this.base = url.endsWith('/') ? url : `${url}/`;
    this.label = url;
    /** Whether `fetch` is the caller's own (then the source cannot move to a worker). */
    this.customFetch = Boolean(options.fetch);
    this.fetch = options.fetch || globalThis.fetch.bind(globalThis);
    this.headers = options.headers || {};
    this.maxGap = 1 << 18;
    /** No probe for delete.journal: it would cost a request per open (see store.js). */
    this.probesJournal = false;
    /** Recently read record ranges kept in memory (see RangeCache in store.js). */
    this.cacheBytes = options.cacheBytes ?? 64 << 20;
    this.sizes = new Map();
  }

  url(name) {
    return new URL(name, this.base).href;
  }

  async get(name, first, last) {
    const url = this.url(name);
    let res;
    try {
      res = await this.fetch(url, { headers: { ...this.headers, Range: `bytes=${first}-${last}` }, cache: 'no-store' });
    } catch (e) {
      throw ioError(e, `fetching ${url} failed`);
    }
    if (res.status === 200) {
      // An empty file has no byte to range over, and some servers answer that with a bodiless
      // 200 rather than 416: nothing to download, so it is just an empty file.
      if (res.headers.get('Content-Length') === '0') return res;
      try { await res.body?.cancel(); } catch { /* already closed */ }
      throw loaderxError('LOADERX_NO_RANGE', `${url}: the server ignored the Range header (HTTP 200); loaderx needs a server with byte-range support`);
    }
    return res;
  }

  async size(name) {
    if (this.sizes.has(name)) return this.sizes.get(name);
    const res = await this.get(name, 0, 0);
    let size;
    if (res.status === 404 || res.status === 410) size = null;
    else if (res.status === 416) size = Number((res.headers.get('Content-Range') || '').match(UNSATISFIED)?.[1] ?? 0);
    else if (res.status === 200) size = 0; // an empty file (see get)
    else if (res.status === 206) {
      const m = (res.headers.get('Content-Range') || '').match(TOTAL);
      if (!m || m[3] === '*') throw loaderxError('LOADERX_IO', `${this.url(name)}: no file size in Content-Range`);
      size = Number(m[3]);
    } else {
      throw loaderxError('LOADERX_IO', `${this.url(name)}: HTTP ${res.status}`);
    }
    if (res.status !== 206) await res.body?.cancel().catch(() => {});
    else await res.arrayBuffer();
    this.sizes.set(name, size);
    return size;
  }

  async read(name, start, end) {
    if (end <= start) return new Uint8Array(0);
    const res = await this.get(name, start, end - 1);
    if (res.status === 404 || res.status === 410) {
      await res.body?.cancel().catch(() => {});
      return null;
    }
    if (res.status === 416 || res.status === 200) {
      // Past the end of the file, or an empty file (see get).
      await res.body?.cancel().catch(() => {});
      return new Uint8Array(0);
    }
    if (res.status !== 206) throw loaderxError('LOADERX_IO', `${this.url(name)}: HTTP ${res.status}`);
    const m = (res.headers.get('Content-Range') || '').match(TOTAL);
    if (!m || Number(m[1]) !== start) {
      await res.body?.cancel().catch(() => {});
      throw loaderxError('LOADERX_IO', `${this.url(name)}: the server answered a different range (${res.headers.get('Content-Range')})`);
    }
    let body;
    try {
      body = new Uint8Array(await res.arrayBuffer());
    } catch (e) {
      throw ioError(e, `reading ${this.url(name)} failed`);
    }
    return body.byteLength > end - start ? body.subarray(0, end - start) : body;
  }

  /** What rebuilds this source in a worker; LOADERX_ARGUMENT with a custom fetch (a function
   *  cannot be cloned to a worker). */
  descriptor() {
    if (this.customFetch) {
      throw loaderxError('LOADERX_ARGUMENT', `${this.label}: an HttpSource with a custom fetch cannot be opened in a worker (a function cannot be sent there); `
        + 'open it with {worker: false, threads: false}');
    }
    return { kind: 'http', base: this.base, headers: this.headers, cacheBytes: this.cacheBytes };
  }
  close() {}
}
