// A URL's secrets (userinfo, query values such as a presigned signature) go into the requests
// and nowhere else: error messages (and their causes), a source's label, String(store),
// util.inspect(store) and the QA report show `***@` and `?name=***` instead. Real servers on
// 127.0.0.1: one that lets through only requests carrying the credentials, in front of the
// fixture server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { serve } from '../scripts/serve.mjs';
import { Store, HttpSource, LoaderxError } from '../src/node.js';
import { FIXTURES, JS_DIR, expectedOf, expectedRecordBytes, fixture, rejection } from './helpers/common.mjs';

const GOOD = fixture('u8img_zstd');
const SECRETS = /pa55word|SECRET|AKIDSECRET|user:/;
const BASIC = `Basic ${Buffer.from('user:pa55word').toString('base64')}`;


/** Everything an error shows: message, stack and causes, as util.inspect prints them. */
const shown = (e) => inspect(e, { depth: 5 });

function qa(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(JS_DIR, 'examples/qa.mjs'), ...args], { encoding: 'utf8', timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

describe('secrets in URLs', () => {
  let files;
  let gate;
  let host = '';
  /** Each request the gate saw: its path and query, and its Authorization header. */
  const seen = [];
  before(async () => {
    files = await serve({ root: FIXTURES });
    gate = createServer(async (req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      seen.push({ url: req.url, auth: req.headers.authorization });
      if (req.headers.authorization !== BASIC || u.searchParams.get('sig') !== 'SECRET' || u.searchParams.get('key') !== 'AKIDSECRET') {
        res.writeHead(403);
        res.end();
        return;
      }
      const r = await fetch(new URL(u.pathname.slice(1), files.url), { headers: req.headers.range ? { Range: req.headers.range } : {} });
      const body = Buffer.from(await r.arrayBuffer());
      res.writeHead(r.status, { 'Content-Range': r.headers.get('Content-Range') ?? '', 'Content-Length': String(body.length) });
      res.end(body);
    });
    await new Promise((resolve) => gate.listen(0, '127.0.0.1', resolve));
    host = `127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (gate.address()).port}`;
  });
  after(async () => {
    gate.closeAllConnections();
    await new Promise((resolve) => gate.close(resolve));
    await files.close();
  });

  const url = (path) => `http://user:pa55word@${host}/${path}?sig=SECRET&key=AKIDSECRET`;
  const redacted = (path) => `http://***@${host}/${path}?sig=***&key=***`;

  test('the requests carry the credentials and the query; reads are right', async () => {
    seen.length = 0;
    const store = await Store.open(url(`${GOOD.store}/`));
    try {
      const exp = expectedOf(GOOD);
      assert.deepEqual([...(await store.gatherBytes([5]))[0]], [...expectedRecordBytes(GOOD, exp, 5)]);
      assert.ok(seen.length > 0);
      for (const r of seen) {
        assert.equal(r.auth, BASIC, r.url);
        assert.match(r.url, /\?sig=SECRET&key=AKIDSECRET$/);
      }
    } finally {
      await store.close();
    }
  });

  test('String(store), util.inspect(store) and the source label show the URL redacted', async () => {
    const source = new HttpSource(url(`${GOOD.store}/`));
    assert.equal(source.label, redacted(`${GOOD.store}/`));
    assert.ok(!SECRETS.test(inspect(source)), inspect(source));
    const store = await Store.open(url(`${GOOD.store}/`));
    try {
      for (const text of [String(store), inspect(store), `${store}`]) {
        assert.ok(!SECRETS.test(text), text);
        assert.ok(text.includes(redacted(`${GOOD.store}/`)), text);
        assert.ok(text.includes(`${GOOD.length} records`), text);
      }
    } finally {
      await store.close();
    }
    assert.ok(String(store).endsWith(', closed)'), String(store));
  });

  test('errors name the URL redacted: not found, refused credentials, no server', async () => {
    const missing = await rejection(Store.open(url('no/such/store/')));
    assert.equal(missing.code, 'LOADERX_NOT_FOUND', missing.message);
    assert.ok(missing.message.includes(redacted('no/such/store/')), missing.message);

    const denied = await rejection(Store.open(`http://user:wrong-pa55word@${host}/${GOOD.store}/?sig=SECRET&key=AKIDSECRET`));
    assert.equal(denied.code, 'LOADERX_IO', denied.message);
    assert.match(denied.message, /HTTP 403/);
    assert.ok(denied.message.includes(`http://***@${host}/${GOOD.store}/meta.zr?sig=***&key=***`), denied.message);

    // Nothing listens on port 9 (discard) here: the connection is refused.
    const refused = await rejection(Store.open('http://user:pa55word@127.0.0.1:9/s/?sig=SECRET&key=AKIDSECRET'));
    assert.equal(refused.code, 'LOADERX_IO', refused.message);
    assert.ok(refused.message.includes('http://***@127.0.0.1:9/s/meta.zr?sig=***&key=***'), refused.message);

    for (const e of [missing, denied, refused]) {
      assert.ok(e instanceof LoaderxError);
      assert.ok(!SECRETS.test(shown(e)), shown(e));
    }
  });

  test('the QA report (text and --json) and its errors show the URL redacted', async () => {
    const [text, json, bad] = await Promise.all([
      qa(url(`${GOOD.store}/`)),
      qa(url(`${GOOD.store}/`), '--json'),
      qa(url('no/such/store/')),
    ]);
    assert.equal(text.code, 0, text.stderr + text.stdout);
    assert.match(text.stdout, new RegExp(`^store\\s+${redacted(`${GOOD.store}/`).replace(/[?*]/g, '\\$&')}$`, 'm'));
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).store, redacted(`${GOOD.store}/`));
    assert.equal(bad.code, 2);
    assert.ok(bad.stderr.includes(redacted('no/such/store/')), bad.stderr);
    for (const out of [text, json, bad]) assert.ok(!SECRETS.test(out.stdout + out.stderr), out.stdout + out.stderr);
  });
});
