// Runs in the test page (run.mjs imports it with page.evaluate): describes stores read over
// HTTP (Range requests) and from in-memory File objects, and checks the error paths.
import { describeStore } from './describe.mjs';

// Loaded on first use, so that importing this file outside a page (node --test walks js/test/)
// does nothing.
// The package as the test server serves it (a URL, not a path: typed as ../../src/browser.js).
const BROWSER_JS = '/js/src/browser.js';
/** @type {typeof import('../../src/browser.js')} */
let api;
const load = async () => { api ??= await import(BROWSER_JS); };

/** The Files a user would pick for a store, with every byte fetched first. */
async function filesOf(url, names) {
  return Promise.all(names.map(async (f) => {
    const res = await fetch(`${url}${f}`);
    if (res.status !== 200) throw new Error(`fetching ${url}${f}: HTTP ${res.status}`);
    return new File([await res.arrayBuffer()], f);
  }));
}

/**
 * A FileSystemDirectoryHandle holding the store's files, in the origin-private file system:
 * the same kind of handle showDirectoryPicker gives, without a dialog.
 */
async function dirOf(url, names, id) {
  const root = await navigator.storage.getDirectory();
  const dir = await root.getDirectoryHandle(`store-${id.replace(/[^\w.-]+/g, '_')}`, { create: true });
  for (const file of await filesOf(url, names)) {
    const w = await (await dir.getFileHandle(file.name, { create: true })).createWritable();
    await w.write(file);
    await w.close();
  }
  return dir;
}

/** Opens with `opts` and checks the store runs where asked: `threaded` true, false or any. */
function opener(open, threaded) {
  return async () => {
    const store = await open();
    if (threaded != null && Boolean(store.threaded) !== threaded) {
      await store.close();
      throw new Error(`threaded is ${store.threaded}, expected ${threaded}`);
    }
    return store;
  };
}

export const env = () => ({
  crossOriginIsolated: globalThis.crossOriginIsolated,
  hardwareConcurrency: navigator.hardwareConcurrency,
  chrome: navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0],
});

/**
 * Describes every store through each source in `sources` ('http', 'files').
 * @param {{stores: {id: string, url: string, files: string[] | null}[], sources: string[],
 *   opts?: import('../../src/browser.js').OpenOptions, threaded?: boolean | null, concurrency?: number}} o
 *   `files` null skips the Files source; `threaded` null: either.
 */
export async function describeAll({ stores, sources, opts, threaded = null, concurrency = 3 }) {
  await load();
  const t0 = performance.now();
  /** @typedef {{http?: unknown, files?: unknown, dir?: unknown}} BySource */
  /** @type {Record<string, BySource>} */
  const out = {};
  let next = 0;
  const work = async () => {
    while (next < stores.length) {
      const s = stores[next++];
      const r = /** @type {BySource} */ ({});
      out[s.id] = r;
      if (sources.includes('http')) r.http = await describeStore(opener(() => api.Store.open(s.url, opts), threaded));
      if (sources.includes('files') && s.files) {
        let files;
        try {
          files = await filesOf(s.url, s.files);
        } catch (e) {
          r.files = { fetch: String(e.message) };
          continue;
        }
        r.files = await describeStore(opener(() => api.Store.open(files, opts), threaded));
      }
      if (sources.includes('dir') && s.files) {
        const dir = await dirOf(s.url, s.files, s.id);
        r.dir = await describeStore(opener(() => api.Store.open(dir, opts), threaded));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, work));
  return { env: env(), results: out, ms: Math.round(performance.now() - t0) };
}

async function codeOf(fn) {
  try {
    await fn();
    return 'resolved';
  } catch (e) {
    return e?.code ? e.code : `${e?.name}: ${e?.message}`;
  }
}

/**
 * The error paths, with `opts`: a store whose meta.zr magic is wrong, one with a truncated chunk
 * (over HTTP and from Files), then a good store, which must still read as Node read it.
 * Returns what happened; run.mjs judges it.
 */
export async function errorPaths({ magicUrl, truncUrl, truncFiles, goodUrl, opts }) {
  await load();
  /** @type {Record<string, unknown>} */
  const out = {};
  out.magicHttp = await codeOf(() => api.Store.open(magicUrl, opts));
  out.magicFiles = await codeOf(async () => api.Store.open(await filesOf(magicUrl, ['meta.zr', '0.zr', 'schema.msgpack']), opts));
  /** @type {[string, () => string | Promise<File[]>][]} */
  const truncSources = [['truncHttp', () => truncUrl], ['truncFiles', () => filesOf(truncUrl, truncFiles)]];
  for (const [key, source] of truncSources) {
    let store;
    try {
      store = await api.Store.open(await source(), opts);
      const n = store.length;
      const all = Array.from({ length: n }, (_, k) => k);
      out[key] = {
        open: 'resolved',
        gather: await codeOf(() => store.gather(all)),
        gatherBytes: await codeOf(() => store.gatherBytes(all)),
        firstRecord: await codeOf(() => store.gatherBytes([0])),
        verify: await store.verify().then((v) => ({ ok: v.ok, codes: [...new Set(v.bad.map((b) => b.code))], bad: v.bad.length }),
          (e) => ({ error: e.code })),
      };
    } catch (e) {
      out[key] = { open: e.code || String(e) };
    } finally {
      await store?.close();
    }
  }
  out.afterwards = await describeStore(() => api.Store.open(goodUrl, opts));
  return out;
}

/** On a server without Range support: opening must reject with LOADERX_NO_RANGE. */
export async function noRange({ url, opts }) {
  await load();
  return codeOf(() => api.Store.open(url, opts));
}

/** sha256 hex of bytes (crypto.subtle; Node's side uses node:crypto). */
async function hex(bytes) {
  return [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Every batch gathered with all calls in flight at once on one store (as `batches()` keeps
 * them, and as a worker decodes on its pool while it takes the next call): each batch's records
 * as sha256 hex, or the call's error code. Then the same calls again, closed while in flight:
 * how each settled ('resolved' or an error code).
 * @param {{url: string, opts: import('../../src/browser.js').OpenOptions, batches: number[][]}} o
 */
export async function inFlight({ url, opts, batches }) {
  await load();
  const store = await api.Store.open(url, opts);
  const threaded = Boolean(store.threaded);
  const settled = await Promise.allSettled(batches.map((b) => store.gatherBytes(b)));
  const out = [];
  for (const s of settled) out.push(s.status === 'fulfilled' ? await Promise.all(s.value.map(hex)) : s.reason?.code ?? String(s.reason));
  const pending = Promise.allSettled(batches.map((b) => store.gatherBytes(b)));
  await store.close();
  const late = (await pending).map((s) => (s.status === 'fulfilled' ? 'resolved' : s.reason?.code ?? String(s.reason)));
  return { out, late, threaded };
}
