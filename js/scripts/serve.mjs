#!/usr/bin/env node
// A small static file server for tests, benchmarks and the viewer: byte ranges (single range,
// 206/416), HEAD, and cross-origin isolation headers (COOP/COEP/CORP) so threaded wasm works.
// Listens on 127.0.0.1 only.
//
//   node js/scripts/serve.mjs ROOT [--port N] [--no-range]
//   import { serve } from './serve.mjs'; const s = await serve({ root }); ... await s.close();
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm', '.json': 'application/json', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png',
};
const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/**
 * Serves `root` (and each `mounts[prefix] = dir`) until `close()`.
 * @param {{root: string, mounts?: Record<string,string>, port?: number, range?: boolean, isolate?: boolean, log?: boolean}} o
 */
export async function serve({ root, mounts = {}, port = 0, range = true, isolate = true, log = false }) {
  const bases = Object.entries({ ...mounts, '/': root }).map(([p, d]) => [p.endsWith('/') ? p : `${p}/`, resolve(d)]);
  bases.sort((a, b) => b[0].length - a[0].length);
  const server = createServer(async (req, res) => {
    const headers = { 'Accept-Ranges': range ? 'bytes' : 'none', 'Cache-Control': 'no-store', ...(isolate ? ISOLATION : {}) };
    const done = (status, body = '') => { res.writeHead(status, { ...headers, 'Content-Type': 'text/plain' }); res.end(body); };
    if (req.method !== 'GET' && req.method !== 'HEAD') return done(405, 'method not allowed');
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      return done(400, 'bad path');
    }
    const [prefix, dir] = bases.find(([p]) => pathname.startsWith(p) || `${pathname}/` === p) ?? [];
    if (!dir) return done(404, 'not found');
    let file = normalize(join(dir, pathname.slice(prefix.length)));
    if (file !== dir && !file.startsWith(dir + sep)) return done(403, 'forbidden');
    let st;
    try {
      st = await stat(file);
      if (st.isDirectory()) { file = join(file, 'index.html'); st = await stat(file); }
    } catch {
      return done(404, 'not found');
    }
    headers['Content-Type'] = TYPES[extname(file)] || 'application/octet-stream';
    let start = 0, end = st.size - 1, status = 200;
    const want = range && req.headers.range;
    if (want) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(want.trim());
      if (!m || (m[1] === '' && m[2] === '')) return done(416, 'bad range');
      if (m[1] === '') { start = Math.max(0, st.size - Number(m[2])); }
      else { start = Number(m[1]); if (m[2] !== '') end = Math.min(end, Number(m[2])); }
      if (start >= st.size || start > end) {
        res.writeHead(416, { ...headers, 'Content-Range': `bytes */${st.size}` });
        return res.end();
      }
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
    }
    headers['Content-Length'] = String(Math.max(0, end - start + 1));
    if (log) console.log(`${req.method} ${pathname} ${want || ''} -> ${status}`);
    res.writeHead(status, headers);
    if (req.method === 'HEAD' || end < start) return res.end();
    const stream = createReadStream(file, { start, end });
    stream.on('error', () => res.destroy());
    res.on('close', () => stream.destroy());
    stream.pipe(res);
  });
  await new Promise((ok, fail) => { server.once('error', fail); server.listen(port, '127.0.0.1', () => ok(undefined)); });
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}/`;
  return {
    url,
    server,
    close: () => new Promise((ok) => { server.closeAllConnections?.(); server.close(() => ok(undefined)); }),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] || '').href) {
  const args = process.argv.slice(2);
  const root = args.find((a) => !a.startsWith('--')) || '.';
  const port = args.includes('--port') ? Number(args[args.indexOf('--port') + 1]) : 8000;
  const s = await serve({ root, port, range: !args.includes('--no-range'), log: args.includes('--log') });
  console.log(`serving ${resolve(root)} at ${s.url}`);
}
