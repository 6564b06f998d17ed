// Runs in the test page (read_browser.mjs imports it there): reads every golden store over HTTP
// (Range) and from in-memory Files, with the build the page calls for, and runs the sampler cases.
import { readStore, readSamplers } from './golden_read.mjs';
import { makeApi } from '/js/src/store.js';

async function readVia(open, wantThreaded) {
  let store;
  try {
    store = await open();
    const host = 'threaded' in store ? 'worker' : 'main';
    if (wantThreaded && store.threaded !== true) throw new Error(`the store was not threaded (host ${host}, threaded ${store.threaded})`);
    if (!wantThreaded && store.threaded) throw new Error('the store was threaded where the plain build was asked for');
    return { ...(await readStore(store)), host, threaded: Boolean(store.threaded) };
  } catch (e) {
    return { error: `${e.code || e.name}: ${e.message}` };
  } finally {
    await store?.close();
  }
}

/** The same in-memory File objects a user would pick, with every byte fetched first. */
async function filesOf(base, entry) {
  return Promise.all(Object.keys(entry.files).map(async (f) => {
    const res = await fetch(`${base}${entry.path}/${f}`);
    if (res.status !== 200) throw new Error(`fetching ${f}: HTTP ${res.status}`);
    return new File([await res.arrayBuffer()], f);
  }));
}

/** The sampler of the threaded build, loaded on this thread (no pool needed for sampling). */
async function threadedSampler() {
  const mod = await import('/js/pkg/threads/loaderx_wasm.js');
  await mod.default({ module_or_path: new URL('/js/pkg/threads/loaderx_wasm_bg.wasm', location.href) });
  return makeApi(mod).Sampler;
}

/**
 * @param {{base: string, threaded: boolean, concurrency?: number}} o `base` is the URL of the
 *   golden directory (ending in /); `threaded` opens with `{worker: true, threads: true}`, else
 *   with the page defaults (plain build on this thread in a page that is not isolated).
 */
export async function run({ base, threaded, concurrency = 3 }) {
  const t0 = performance.now();
  const api = await import('/js/src/browser.js');
  const manifest = await (await fetch(`${base}manifest.json`)).json();
  const opts = threaded ? { worker: true, threads: true } : undefined;
  const http = {};
  const files = {};
  const names = Object.keys(manifest.stores);
  let next = 0;
  const work = async () => {
    while (next < names.length) {
      const name = names[next++];
      const entry = manifest.stores[name];
      http[name] = await readVia(() => api.Store.open(`${base}${entry.path}/`, opts), threaded);
      let picked;
      try {
        picked = await filesOf(base, entry);
      } catch (e) {
        files[name] = { error: `fetching the files: ${e.message}` };
        continue;
      }
      files[name] = await readVia(() => api.Store.open(picked, opts), threaded);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, work));
  const Sampler = threaded ? await threadedSampler() : api.Sampler;
  const sampler = readSamplers(Sampler, manifest.sampler.cases);
  return {
    env: { crossOriginIsolated: globalThis.crossOriginIsolated, hardwareConcurrency: navigator.hardwareConcurrency, userAgent: navigator.userAgent },
    http,
    files,
    sampler,
    ms: Math.round(performance.now() - t0),
  };
}
