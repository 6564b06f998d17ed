// The QA command line (examples/qa.mjs): exit 0 and a full report on every fixture, the same as
// JSON with --json, exit 1 naming the bad record on a damaged copy, exit 2 when the store cannot
// be opened or the arguments are wrong.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { closeSync, openSync, writeSync } from 'node:fs';
import { JS_DIR, copyStore, expectedOf, fixture, loadManifest, readTable, removeDir, storeDir, tempDir } from './helpers/common.mjs';

const QA = join(JS_DIR, 'examples/qa.mjs');

/** Runs qa.mjs; resolves to `{code, stdout, stderr}`. */
function qa(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [QA, ...args], { encoding: 'utf8', timeout: 30000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

const manifest = loadManifest();

describe('qa.mjs on every fixture', { concurrency: 3 }, () => {
  for (const entry of manifest.stores) {
    test(entry.name, async () => {
      const dir = storeDir(entry);
      const { lengths } = expectedOf(entry);
      const [text, json] = await Promise.all([qa(dir), qa(dir, '--json', '--bins', '4')]);

      assert.equal(text.code, 0, text.stderr + text.stdout);
      const out = text.stdout;
      assert.match(out, new RegExp(`^records\\s+${entry.length}$`, 'm'));
      if (entry.schema) {
        const schema = `schema    ${entry.kind} ${entry.dtype} item_shape [${entry.item_shape.join(', ')}] codec ${entry.codec}`;
        assert.ok(out.includes(schema), `${schema} in\n${out}`);
      } else {
        assert.match(out, /^schema\s+none/m);
      }
      assert.match(out, new RegExp(`^stored\\s+${entry.stats.live_bytes} bytes live, ${lengths.reduce((a, b) => a + b, 0)} decoded`, 'm'));
      assert.match(out, new RegExp(`, ${entry.stats.reclaimable} reclaimable, dictionary: ${entry.dict ? 'yes' : 'no'}$`, 'm'));
      if (entry.length) {
        assert.match(out, new RegExp(`^lengths\\s+min ${Math.min(...lengths)}\\s+max ${Math.max(...lengths)}\\s`, 'm'));
        const bars = out.split('\n').filter((l) => /^\s+\d+\.\.\d+\s+\d+ #*$/.test(l));
        assert.ok(bars.length > 0, `a histogram in\n${out}`);
        assert.equal(bars.reduce((a, l) => a + Number(l.trim().split(/\s+/)[1]), 0), entry.length, 'histogram counts');
      }
      assert.match(out, new RegExp(`^verify\\s+ok: all ${entry.length} records decode$`, 'm'));

      assert.equal(json.code, 0, json.stderr);
      const r = JSON.parse(json.stdout);
      assert.equal(r.ok, true);
      assert.equal(r.length, entry.length);
      assert.deepEqual(r.bad, []);
      assert.equal(r.schema?.dtype ?? null, entry.schema ? entry.dtype : null);
      assert.equal(r.stats.liveBytes, entry.stats.live_bytes);
      assert.equal(r.stats.reclaimable, entry.stats.reclaimable);
      assert.equal(r.header.tailOffset, entry.header.tail_offset);
      const h = r.lengthHistogram;
      if (entry.length) {
        assert.equal(h.min, Math.min(...lengths));
        assert.equal(h.max, Math.max(...lengths));
        assert.ok(h.bins.length >= 1 && h.bins.length <= 4, `${h.bins.length} bins for --bins 4`);
        assert.equal(h.bins.reduce((a, b) => a + b.count, 0), entry.length);
      } else {
        assert.deepEqual(h.bins, []);
      }
    });
  }
});

describe('qa.mjs on bad stores and arguments', () => {
  let tmp;
  before(() => { tmp = tempDir('loaderx-qa-'); });
  after(() => removeDir(tmp));

  test('a damaged record: exit 1, the record listed', async () => {
    const dir = copyStore(storeDir(fixture('u8img_zstd')), join(tmp, 'damaged'));
    const e = readTable(dir).entries[13];
    const fd = openSync(join(dir, '0.zr'), 'r+');
    writeSync(fd, Buffer.alloc(e.stored, 0x5a), 0, e.stored, e.offset);
    closeSync(fd);
    const text = await qa(dir);
    assert.equal(text.code, 1, text.stderr);
    assert.match(text.stdout, /^verify\s+FAILED: 1 bad record\(s\)$/m);
    assert.match(text.stdout, /^\s+record 13: \[LOADERX_CORRUPT\]/m);
    const json = await qa(dir, '--json');
    assert.equal(json.code, 1);
    const r = JSON.parse(json.stdout);
    assert.equal(r.ok, false);
    assert.deepEqual(r.bad.map((b) => [b.index, b.code]), [[13, 'LOADERX_CORRUPT']]);
  });

  test('a missing directory: exit 2', async () => {
    const r = await qa(join(tmp, 'no-such-store'));
    assert.equal(r.code, 2);
    assert.match(r.stderr, /cannot open .*\[LOADERX_NOT_FOUND\]/);
    assert.equal(r.stdout, '');
  });

  test('bad usage: exit 2; --help: exit 0', async () => {
    assert.equal((await qa()).code, 2);
    assert.equal((await qa(storeDir(fixture('u8img_raw')), '--bins', '0')).code, 2);
    assert.equal((await qa(storeDir(fixture('u8img_raw')), '--frobnicate')).code, 2);
    const help = await qa('--help');
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^usage: loaderx-qa/);
  });
});
