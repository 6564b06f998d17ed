// Opening stores: from a URL, a directory handle (showDirectoryPicker), picked files
// (<input webkitdirectory>) or a drop. A manifest (a folder holding manifest.json, or its URL)
// opens as one dataset over its stores. Every store is hosted in the package's Web Worker, with the
// threaded build when the page is cross-origin isolated; readable messages for every failure.
import { Store, filesFromDataTransfer, BlobSource } from '../src/browser.js';
import { redactUrl } from '../src/redact.js';
import { pickedFiles } from '../src/manifest.js';
import { NAMES } from '../pkg/names.js';

/**
 * What the viewer opens: a URL, a directory handle, picked files, or the store of a drop.
 * @typedef {string | FileSystemDirectoryHandle | FileList | File[] | BlobSource} Openable
 */
/**
 * An open store: `label` for people, `short` its own name; for URL stores `shown`, the URL as
 * shown (secrets redacted), and `url`, what the address bar keeps (null for local files and for
 * URLs with secrets, which stay out of the address bar); `href`, the URL read (never shown).
 * @typedef {{store: Store, label: string, short: string, url: string | null, shown: string | null, href: string | null}} Opened
 */
/**
 * An open store as the views show it: with an id (for caches) and the reader of its values.
 * @typedef {Opened & {id: number, interp: import('./render.js').Interp}} Stream
 */
/**
 * The window with the File System Access API's directory picker (Chromium; not in lib.dom).
 * @typedef {Window & {showDirectoryPicker?: (options?: {id?: string, mode?: 'read' | 'readwrite'}) => Promise<FileSystemDirectoryHandle>}} PickerWindow
 */
/** @typedef {{code: string, context: string, title: string, message: string, hint: string}} Described */

/** Options for Store.open: always in the worker; threads when the page is isolated. */
export const openOptions = () => ({ worker: true, threads: Boolean(globalThis.crossOriginIsolated) });

/**
 * Opens a store. `what` is a URL string, a FileSystemDirectoryHandle, a FileList/File[] or a
 * BlobSource. Resolves to `{store, label, url}`; `url` is set for URL stores (for the address bar).
 * @param {Openable} what
 * @returns {Promise<Opened>}
 */
export async function openStore(what) {
  /** @type {string} */
  let label;
  /** @type {string | null} */
  let url = null;
  /** @type {Openable} */
  let source = what;
  /** @type {string | null} */
  let shown = null;
  if (typeof what === 'string') {
    const text = what.trim();
    if (!text) throw Object.assign(new Error('enter the URL of a store directory'), { code: 'VIEWER_INPUT' });
    const abs = new URL(await fromCommandLine(text), location.href);
    shown = redactUrl(abs.href);
    url = shown === abs.href || CLI.test(text) ? text : null;
    label = abs.origin === location.origin ? decodePath(abs.pathname) : shown;
    source = abs.href;
  } else if (globalThis.FileSystemDirectoryHandle && what instanceof FileSystemDirectoryHandle) {
    label = what.name;
    // A folder holding a manifest and no store of its own: its files by relative path.
    const files = await manifestFiles(what);
    if (files) source = /** @type {any} */ (files);
  } else if (what instanceof BlobSource) {
    label = what.label;
  } else {
    // Files from an input: a manifest above every store is opened as one dataset; else the
    // store among them is found here, so the label is the store folder.
    const picked = pickedFiles(/** @type {FileList | File[]} */ (what));
    if (picked) {
      source = /** @type {FileList | File[]} */ (what);
      label = picked.dir;
    } else {
      const found = BlobSource.fromFiles(/** @type {FileList | File[]} */ (what));
      source = found;
      label = found.label;
    }
  }
  const store = await Store.open(source, openOptions());
  return { store, label: prettyLabel(label), short: shortLabel(label), url, shown, href: typeof source === 'string' ? source : null };
}

/**
 * The files under a directory handle by relative path, when it holds `manifest.json` and no
 * `meta.zr` (a manifest); else null.
 * @param {FileSystemDirectoryHandle} handle
 * @returns {Promise<Map<string, File> | null>}
 */
async function manifestFiles(handle) {
  const has = async (name) => handle.getFileHandle(name).then(() => true, () => false);
  if ((await has(NAMES.meta)) || !(await has(NAMES.manifest))) return null;
  const files = new Map();
  const walk = async (/** @type {any} */ dir, /** @type {string} */ prefix) => {
    for await (const entry of dir.values()) {
      if (entry.kind === 'file') files.set(prefix + entry.name, await entry.getFile());
      else await walk(entry, `${prefix}${entry.name}/`);
    }
  };
  await walk(handle, '');
  return files;
}

/** A store named by `loaderx-view` (a URL with secrets it keeps out of the address bar). */
const CLI = /^cli:(\w+)$/;

/**
 * The URL behind `cli:NAME` (asked from the loaderx-view server), or `text` itself.
 * @param {string} text
 */
async function fromCommandLine(text) {
  const m = CLI.exec(text);
  if (!m) return text;
  const res = await fetch(new URL('cli-stores.json', location.href), { cache: 'no-store' });
  const known = res.ok ? await res.json() : {};
  if (typeof known[m[1]] !== 'string') {
    throw Object.assign(new Error(`${text} names a store given to loaderx-view, and this server does not know it (was loaderx-view restarted?)`), { code: 'LOADERX_NOT_FOUND' });
  }
  return known[m[1]];
}

/** @param {string} path  a URL's path, %-encoded */
function decodePath(path) {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/**
 * `text` as the viewer may show it: a URL (absolute or relative to the page) with its secrets
 * redacted; other text as it is, with any URL in it redacted.
 * @param {string} text
 */
export function shownUrl(text) {
  try {
    return redactUrl(new URL(text, location.href).href);
  } catch {
    return redactUrl(text);
  }
}

/**
 * Whether showing the URL `text` would show a secret (userinfo, or a query's values).
 * @param {string} text
 */
export function hasSecrets(text) {
  try {
    const abs = new URL(text, location.href).href;
    return redactUrl(abs) !== abs;
  } catch {
    return false;
  }
}

const parts = (/** @type {string} */ label) => String(label).replace(/[?#].*$/, '').replace(/\/+$/, '').split('/').filter(Boolean);
const GENERIC = /^(store|data|records)$/i;

/**
 * The store's folder name, with the folder above when the name says nothing:
 * "/store/images_64x64x3/" -> "images_64x64x3", "/fixtures/u8img_zstd/store/" -> "u8img_zstd/store".
 * @param {string} label
 */
function prettyLabel(label) {
  const p = parts(label);
  return p.slice(p.length > 1 && GENERIC.test(p[p.length - 1]) ? -2 : -1).join('/') || String(label);
}

/**
 * The store's own name: its directory, or the one above when that is called "store".
 * @param {string} label
 */
function shortLabel(label) {
  const p = parts(label);
  const last = p[p.length - 1] ?? String(label);
  return GENERIC.test(last) && p.length > 1 ? p[p.length - 2] : last;
}

/**
 * Asks for a directory with the File System Access API; null when the user cancels.
 * @returns {Promise<FileSystemDirectoryHandle | null>}
 */
export async function pickDirectory() {
  const w = /** @type {PickerWindow} */ (window);
  // Only called when canPickDirectory().
  if (!w.showDirectoryPicker) throw new TypeError('this browser has no showDirectoryPicker');
  try {
    return await w.showDirectoryPicker({ id: 'loaderx-store', mode: 'read' });
  } catch (e) {
    if (e && e.name === 'AbortError') return null;
    throw e;
  }
}

export const canPickDirectory = () => typeof /** @type {PickerWindow} */ (window).showDirectoryPicker === 'function';

/**
 * The store in a drop (must be called while the drop event is being handled).
 * @param {DataTransfer} dataTransfer
 */
export function sourceFromDrop(dataTransfer) {
  return filesFromDataTransfer(dataTransfer);
}

/** @type {Record<string, string>} */
const TITLES = {
  LOADERX_NOT_FOUND: 'No store there',
  LOADERX_NOT_A_STORE: 'Not a loaderx store',
  LOADERX_CORRUPT: 'The store is corrupt',
  LOADERX_INDEX: 'No such record',
  LOADERX_ARGUMENT: 'Invalid request',
  LOADERX_TOO_LARGE: 'Too much data at once',
  LOADERX_IO: 'The store could not be read',
  LOADERX_NO_RANGE: 'The server does not support byte ranges',
  LOADERX_CLOSED: 'The store was closed',
  VIEWER_LENGTH: 'The streams have different lengths',
  VIEWER_INPUT: 'Nothing to open',
};

/** @type {Record<string, string>} */
const HINTS = {
  LOADERX_NOT_FOUND: 'A store is a directory holding meta.zr (and 0.zr, schema.msgpack, ...); a manifest is a manifest.json listing stores. Check the URL or pick the store (or manifest) directory itself.',
  LOADERX_NOT_A_STORE: 'meta.zr does not start like a loaderx store. The directory may hold something else, or the file is damaged.',
  LOADERX_CORRUPT: 'Some bytes of the store are missing or damaged. Records that still read are shown; "Verify" in the overview lists every bad record.',
  LOADERX_NO_RANGE: 'The viewer reads stores with HTTP Range requests, so a 4 GiB chunk is never downloaded whole. Serve the store with `npx loaderx-view PATH` (or `make viewer STORE=PATH`), or any server with byte-range support.',
  LOADERX_IO: 'A read failed. If the store is on a server, check that it is running and reachable, and allows this page to read it (CORS).',
  LOADERX_TOO_LARGE: 'Records are large: choose a smaller page size.',
  LOADERX_CLOSED: 'Open the store again.',
};

/**
 * `{title, message, hint, code, context}` for any error the viewer meets (`context`: what was being done).
 * @param {any} e  anything thrown: a LoaderxError, an Error with a viewer `code`, a DOMException, ...
 * @param {string} [context]
 * @returns {Described}
 */
export function describeError(e, context = '') {
  const code = e?.code || (e && e.name === 'SecurityError' ? 'LOADERX_IO' : 'VIEWER_ERROR');
  // Messages name URLs (the browser's own do too): never with their secrets.
  let message = redactUrl(e?.message || String(e));
  if (code === 'LOADERX_CORRUPT' && e.index != null && !/record \d+/.test(message)) message = `record ${e.index}: ${message}`;
  return {
    code,
    context: redactUrl(context),
    title: TITLES[code] ?? 'Something went wrong',
    message,
    hint: HINTS[code] ?? '',
  };
}
