#!/usr/bin/env node
// The dataset viewer for one store (and optionally a second stream): serves js/ (the viewer page
// and the package it imports) with the store directory mounted at /store/ (and /store2/), with
// byte ranges and cross-origin isolation headers (so the threaded build decodes in a worker), on
// 127.0.0.1. Prints the viewer URL.
//
//   loaderx-view STORE [--store2 PATH] [--port N] [--no-open]      (or: make viewer STORE=PATH)
//
// STORE may also be an http(s) URL of a store; it is then passed to the page as is (that server
// must allow the cross-origin reads: CORS with Range, and CORP or CORS under COEP).
import { spawn } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../scripts/serve.mjs';

const JS_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_PORT = 8765;
const USAGE = `usage: loaderx-view STORE [--store2 PATH] [--port N] [--no-open]
  STORE    a store directory (the one holding meta.zr) or an http(s) URL of one
  --store2 a second store of the same length shown beside the first (e.g. labels)
  --port   port on 127.0.0.1 (default ${DEFAULT_PORT}, or any free port when that one is taken)
  --no-open  only print the URL; do not start a browser`;

const isUrl = (s) => /^https?:\/\//i.test(s);

/** Checks a store argument; returns the mount directory (null for URLs). */
function storeDir(arg, what) {
  if (isUrl(arg)) return null;
  const dir = resolve(arg);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${what} ${arg} is not a directory`);
  if (!existsSync(join(dir, 'meta.zr'))) console.warn(`loaderx-view: warning: ${dir} has no meta.zr; the viewer will say so`);
  return dir;
}

/**
 * Starts the viewer server. `store` and `store2` are directories or URLs; `mounts` adds more
 * directories (tests). Resolves to `{url, viewerUrl, close}`; `viewerUrl` opens the store(s).
 * @param {{store?: string | null, store2?: string | null, port?: number, mounts?: Record<string, string>,
 *   range?: boolean, isolate?: boolean, strictPort?: boolean}} [options]
 */
export async function startViewer({ store = null, store2 = null, port = DEFAULT_PORT, mounts = {}, range = true, isolate = true, strictPort = false } = {}) {
  const dir1 = store ? storeDir(store, 'STORE') : null;
  const dir2 = store2 ? storeDir(store2, '--store2') : null;
  const all = { ...mounts, ...(dir1 ? { '/store/': dir1 } : {}), ...(dir2 ? { '/store2/': dir2 } : {}) };
  let server;
  try {
    server = await serve({ root: JS_ROOT, mounts: all, port, range, isolate });
  } catch (e) {
    if (e.code !== 'EADDRINUSE' || strictPort) throw e;
    server = await serve({ root: JS_ROOT, mounts: all, port: 0, range, isolate });
  }
  const q = new URLSearchParams();
  if (store) q.set('store', dir1 ? '/store/' : store);
  if (store2) q.set('store2', dir2 ? '/store2/' : store2);
  const query = q.toString().replace(/%2F/g, '/').replace(/%3A/g, ':');
  const viewerUrl = `${server.url}viewer/${query ? `?${query}` : ''}`;
  return { url: server.url, viewerUrl, close: server.close, server: server.server };
}

/** Starts a browser on `url` where one can be shown; failures are ignored (the URL is printed). */
function openBrowser(url) {
  const graphical = process.platform === 'darwin' || process.platform === 'win32' || process.env.DISPLAY || process.env.WAYLAND_DISPLAY;
  if (!graphical) return;
  const [cmd, args] = process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', url]] : ['xdg-open', [url]];
  try {
    const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch { /* the URL is printed anyway */ }
}

/** @param {string[]} argv */
function parseArgs(argv) {
  /** @type {{store: string | null, store2: string | null, port: number, strictPort: boolean, open: boolean}} */
  const o = { store: null, store2: null, port: DEFAULT_PORT, strictPort: false, open: true };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    const value = () => {
      if (k + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++k];
    };
    if (a === '-h' || a === '--help') return null;
    else if (a === '--no-open') o.open = false;
    else if (a === '--port') {
      o.port = Number(value());
      o.strictPort = true;
      if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) throw new Error('--port needs a port number');
    } else if (a === '--store2') o.store2 = value();
    else if (!a.startsWith('-') && !o.store) o.store = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!o.store) throw new Error('a STORE is needed');
  return { ...o, store: o.store };
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`loaderx-view: ${e.message}\n${USAGE}`);
    return 2;
  }
  if (!o) {
    console.log(USAGE);
    return 0;
  }
  let v;
  try {
    v = await startViewer(o);
  } catch (e) {
    console.error(`loaderx-view: ${e.message}`);
    return 2;
  }
  console.log(`loaderx viewer for ${isUrl(o.store) ? o.store : resolve(o.store)}${o.store2 ? ` and ${isUrl(o.store2) ? o.store2 : resolve(o.store2)}` : ''}`);
  console.log('serving on 127.0.0.1 with byte ranges and COOP/COEP (threaded decoding); Ctrl-C stops it');
  console.log(`\n  ${v.viewerUrl}\n`);
  if (o.open) openBrowser(v.viewerUrl);
  const stop = async () => {
    await v.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return null;
}

/** Run as a command (also through npm's bin symlink), not imported. */
function isMain() {
  try {
    return realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (isMain()) {
  const code = await main();
  if (code != null) process.exit(code);
}
