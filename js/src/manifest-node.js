// Where a manifest is, for the Node entry point: a path (or file: URL) of a manifest file or of
// a directory holding manifest.json, an http(s) URL, or files by relative path. What the path
// holds is core's answer (wasm `identify`) from what the file system shows.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filesPlace, httpPlace, isUrl } from './manifest.js';
import { NAMES } from '../pkg/names.js';

/**
 * The Place of a manifest at `value`, null for anything else (a store, or what Store.open
 * refuses with its own message), or a function asked when a URL holds no store.
 * @param {any} wasm
 */
export const nodeLocate = (wasm) => async (value, options, identify) => {
  if (typeof value === 'string' || value instanceof URL) {
    const text = String(value);
    const scheme = value instanceof URL ? value.protocol.slice(0, -1) : /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1];
    const s = scheme?.toLowerCase();
    if (s === 'http' || s === 'https') return httpPlace(value, options, identify, wasm);
    if (s != null && s !== 'file') return null;
    let path = text;
    if (s === 'file') {
      try {
        path = fileURLToPath(value);
      } catch {
        return null;
      }
    }
    return pathPlace(path, identify, wasm.manifestFile());
  }
  if (value != null && typeof value === 'object' && !(typeof value.read === 'function' && typeof value.size === 'function') && typeof value.then !== 'function') {
    const files = value instanceof Map ? value : new Map(Object.entries(value));
    return filesPlace(files, 'files', identify, wasm.manifestFile(), (sub) => sub);
  }
  return null;
};

/** A manifest file's Place, or a directory's holding one; null for a store or nothing. */
function pathPlace(path, identify, manifestFile) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return null; // missing or unreadable: the store's open says so
  }
  let file;
  try {
    const holds = stat.isDirectory()
      ? identify('directory', '', existsSync(join(path, NAMES.meta)), existsSync(join(path, manifestFile)))
      : identify('file', basename(path), false, false);
    if (holds === 'store') return null;
    file = holds === 'manifestFile' ? path : join(path, manifestFile);
  } catch {
    return null; // neither: the store's open gives its error, as before
  }
  const dir = dirname(file);
  return {
    bytes: new Uint8Array(readFileSync(file)),
    label: file,
    storeValue: (p) => (isUrl(p) || isAbsolute(p) ? p : join(dir, p)),
  };
}
