// A request to a server that accepts and never answers, or answers and never sends the body,
// ends after the HttpSource's `timeout` (default 30 s), and an AbortSignal ends it at once:
// either way the call rejects with LOADERX_IO naming the URL (redacted), and nothing is left
// waiting. Real servers on 127.0.0.1; small timeouts keep the test short.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createNetServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { Store, HttpSource, LoaderxError } from '../src/node.js';
import { HTTP_TIMEOUT } from '../src/sources/http.js';
import { rejection } from './helpers/common.mjs';

/** Listens on 127.0.0.1; resolves to `{url, close}`. Open sockets are destroyed on close. */
async function listen(server) {
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve(undefined)); }),
  };
}


function assertIo(e, pattern) {
  assert.ok(e instanceof LoaderxError, String(e?.stack ?? e));
  assert.equal(e.code, 'LOADERX_IO', e.message);
  assert.match(e.message, pattern);
}

describe('HTTP requests that never finish', () => {
  let silent; // accepts connections, reads the request, never answers
  let stalled; // answers a range request's headers, never sends its body
  let accepted = 0;
  before(async () => {
    silent = await listen(createNetServer((socket) => { accepted++; socket.on('data', () => {}); }));
    stalled = await listen(createHttpServer((_req, res) => {
      res.writeHead(206, { 'Content-Range': 'bytes 0-15/1000', 'Content-Length': '16' });
      res.flushHeaders();
    }));
  });
  after(async () => {
    await silent.close();
    await stalled.close();
  });

  test('the default timeout is 30 s, and the option is checked', () => {
    assert.equal(HTTP_TIMEOUT, 30_000);
    assert.equal(new HttpSource('http://127.0.0.1:9/s/').timeout, HTTP_TIMEOUT);
    assert.equal(new HttpSource('http://127.0.0.1:9/s/', { timeout: Infinity }).timeout, Infinity);
    for (const timeout of [0, -1, NaN, '100', null]) {
      assert.throws(() => new HttpSource('http://127.0.0.1:9/s/', { timeout: /** @type {any} */ (timeout) }), (/** @type {any} */ e) => e.code === 'LOADERX_ARGUMENT');
    }
    assert.throws(() => new HttpSource('http://127.0.0.1:9/s/', { signal: /** @type {any} */ ({}) }), (/** @type {any} */ e) => e.code === 'LOADERX_ARGUMENT');
  });

  test('a timeout too long for a timer (past 2^31 ms) is no limit, not an instant one', async () => {
    const controller = new AbortController();
    const opening = rejection(Store.open(`${silent.url}store/`, { signal: controller.signal, timeout: 2 ** 40 }));
    setTimeout(() => controller.abort(), 300);
    assertIo(await opening, /aborted by the signal/);
  });

  test('a server that never answers: Store.open rejects after the timeout, naming the URL', async () => {
    const before = accepted;
    const e = await rejection(Store.open(new HttpSource(`${silent.url}store/`, { timeout: 300 })));
    assertIo(e, /no answer within 300 ms/);
    assert.ok(e.message.includes(`${silent.url}store/`), e.message);
    assert.ok(accepted > before, 'the server saw the connection');
  });

  test('Store.open(url, {timeout}) passes the timeout to the URL\'s source', async () => {
    const e = await rejection(Store.open(`${silent.url}store/`, { timeout: 200 }));
    assertIo(e, /no answer within 200 ms/);
  });

  test('a body that never comes is cut by the same timeout', async () => {
    const e = await rejection(new HttpSource(`${stalled.url}store/`, { timeout: 300 }).read('meta.zr', 0, 16));
    assertIo(e, /no answer within 300 ms/);
    assert.ok(e.message.includes(`${stalled.url}store/meta.zr`), e.message);
  });

  test('an AbortSignal ends a waiting open, and an aborted one fails at once', async () => {
    const controller = new AbortController();
    const opening = rejection(Store.open(`${silent.url}store/`, { signal: controller.signal, timeout: Infinity }));
    setTimeout(() => controller.abort(), 100);
    assertIo(await opening, /aborted by the signal/);

    const e = await rejection(Store.open(new HttpSource(`${silent.url}store/`, { signal: AbortSignal.abort() })));
    assertIo(e, /aborted by the signal/);
  });

  test('secrets in the URL are not in the timeout error', async () => {
    const url = `http://user:pa55word@${silent.url.slice('http://'.length)}store/?sig=SECRET`;
    const e = await rejection(Store.open(url, { timeout: 200 }));
    assertIo(e, /no answer within 200 ms/);
    assert.ok(!/pa55word|SECRET|user:/.test(e.message), e.message);
    assert.ok(e.message.includes('http://***@127.0.0.1'), e.message);
    assert.ok(e.message.includes('meta.zr?sig=***'), e.message);
  });
});
