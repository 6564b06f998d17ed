#!/usr/bin/env node
// The dataset viewer for one store (and optionally a second stream): serves js/ (the viewer page
// and the package it imports) with the store directory mounted at /store/ (and /store2/), with
// byte ranges and cross-origin isolation headers (so the threaded build decodes in a worker), on
// 127.0.0.1. Prints the viewer URL.
//
//   loaderx-view STORE [--store2 PATH] [--port N] [--no-open]      (or: make viewer STORE=PATH)
//
// A directory is mounted under its own name (/store/NAME/, /store2/NAME/; PARENT/NAME when the
// folder has a generic name such as "store"), so the page titles it by its folder.
//
// STORE may also be an http(s) URL of a store; it is then passed to the page as is (that server
// must allow the cross-origin reads: CORS with Range, and CORP or CORS under COEP). A URL that
// carries secrets (user:password@, or a query string such as a presigned URL's signature) is
// never printed or put in the page's address: the page gets `cli:store` and asks this server
// for the URL (GET /viewer/cli-stores.json, 127.0.0.1 only), and what is printed is redacted.
import { spawn } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../scripts/serve.mjs';
import { redactUrl } from '../src/redact.js';
import { NAMES } from '../pkg/names.js';

const JS_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_PORT = 8765;
const USAGE = `usage: loaderx-view STORE [--store2 PATH] [--port N] [--no-open]
  STORE    a store directory (the one holding meta.zr) or an http(s) URL of one
  --store2 a second store of the same length shown beside the first (e.g. labels)
  --port   port on 127.0.0.1 (default ${DEFAULT_PORT}, or any free port when that one is taken)
  --no-open  only print the URL; do not start a browser`;

const isUrl = (s) => /^https?:\/\//i.test(s);
/** Whether showing `url` would show a secret (userinfo or query values). */
const hasSecrets = (url) => redactUrl(url) !== url;
/** A folder name that says nothing about the store (the viewer's label rule in viewer/open.js). */
const GENERIC = /^(store|data|records)$/i;

/**
 * Where a store directory is mounted: `/store/NAME/` (`/store/PARENT/NAME/` when NAME is generic).
 * @param {string} prefix  '/store/' or '/store2/'
 * @param {string} dir  an absolute path
 */
function mountPath(prefix, dir) {
  const name = basename(dir) || 'root';
  const parent = basename(dirname(dir));
  return GENERIC.test(name) && parent ? `${prefix}${parent}/${name}/` : `${prefix}${name}/`;
}

/** The query value for a mount path or URL (slashes and colons kept readable). */
const readable = (/** @type {string} */ q) => q.replace(/%2F/g, '/').replace(/%3A/g, ':');

/** Checks a store argument; returns the mount directory (null for URLs). */
function storeDir(arg, what) {
  if (isUrl(arg)) return null;
  const dir = resolve(arg);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${what} ${arg} is not a directory`);
  if (!existsSync(join(dir, NAMES.meta))) console.warn(`loaderx-view: warning: ${dir} has no ${NAMES.meta}; the viewer will say so`);
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
  const at1 = dir1 ? mountPath('/store/', dir1) : null;
  const at2 = dir2 ? mountPath('/store2/', dir2) : null;
  const all = { ...mounts, ...(dir1 && at1 ? { [at1]: dir1 } : {}), ...(dir2 && at2 ? { [at2]: dir2 } : {}) };
  let server;
  try {
    server = await serve({ root: JS_ROOT, mounts: all, port, range, isolate });
  } catch (e) {
    if (e.code !== 'EADDRINUSE' || strictPort) throw e;
    server = await serve({ root: JS_ROOT, mounts: all, port: 0, range, isolate });
  }
  /** URLs with secrets, handed to the page by name (never in its address). */
  const secret = {};
  const q = new URLSearchParams();
  /** @type {[string, string | null, string | null][]} */
  const given = [['store', store, at1], ['store2', store2, at2]];
  for (const [key, arg, at] of given) {
    if (!arg) continue;
    if (at) q.set(key, at);
    else if (hasSecrets(arg)) {
      secret[key] = arg;
      q.set(key, `cli:${key}`);
    } else q.set(key, arg);
  }
  if (Object.keys(secret).length) answer(server.server, '/viewer/cli-stores.json', JSON.stringify(secret), isolate);
  const query = readable(q.toString());
  const viewerUrl = `${server.url}viewer/${query ? `?${query}` : ''}`;
  return { url: server.url, viewerUrl, close: server.close, server: server.server };
}

/**
 * Makes `server` answer GET `path` with the JSON `body` (before its file handler sees it).
 * @param {import('node:http').Server} server
 * @param {string} path
 * @param {string} body
 * @param {boolean} isolate  send the cross-origin isolation headers the page's files get
 */
function answer(server, path, body, isolate) {
  const files = server.listeners('request');
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    if (req.method === 'GET' && (req.url ?? '').split('?')[0] === path) {
      res.writeHead(200, {
        'Content-Type': 'application/json', 'Cache-Control': 'no-store',
        ...(isolate ? { 'Cross-Origin-Resource-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {}),
      });
      res.end(body);
      return;
    }
    for (const f of files) f.call(server, req, res);
  });
}

/**
 * What the command prints about its stores: directories as resolved paths, URLs redacted.
 * @param {string} store
 * @param {string | null} store2
 */
function describeStores(store, store2) {
  const one = (/** @type {string} */ s) => (isUrl(s) ? redactUrl(s) : resolve(s));
  return `loaderx viewer for ${one(store)}${store2 ? ` and ${one(store2)}` : ''}`;
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
    console.error(`loaderx-view: ${redactUrl(e.message)}\n${USAGE}`);
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
    console.error(`loaderx-view: ${redactUrl(e.message)}`);
    return 2;
  }
  console.log(describeStores(o.store, o.store2));
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
