// A store whose native delete was stopped after its delete.journal became durable (tests/journal,
// made by native/tests/journal_every_reader.rs) reads in the wasm reader as the finished
// deletion, from a directory and over HTTP, whether the table was rewritten yet or not; a damaged
// journal is LOADERX_CORRUPT naming delete.journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '../scripts/serve.mjs';
import { Store, HttpSource } from '../src/node.js';
import { REPO, copyStore, tempDir } from './helpers/common.mjs';

const JOURNAL_FIXTURES = join(REPO, 'tests/journal');
const KILLED = ['before_table', 'after_table'];

/** Every record's bytes, in index order. */
async function records(store) {
  const all = Array.from({ length: store.length }, (_, i) => i);
  return (await store.gatherBytes(all)).map((r) => Array.from(r));
}

async function recordsAt(source) {
  const store = await Store.open(source);
  try {
    return { length: store.length, records: await records(store), stats: await store.stats() };
  } finally {
    await store.close();
  }
}

const finished = () => recordsAt(join(JOURNAL_FIXTURES, 'finished'));

/** A copy of `case` with its journal damaged by `damage(bytes)`. */
function damaged(kase, damage) {
  const dir = tempDir();
  copyStore(join(JOURNAL_FIXTURES, kase), dir);
  const path = join(dir, 'delete.journal');
  writeFileSync(path, damage(new Uint8Array(readFileSync(path))));
  return dir;
}

const DAMAGES = {
  'a flipped byte': (b) => { b[10] ^= 0x20; return b; },
  'a cut': (b) => b.subarray(0, b.length - 3),
};

const isJournalCorrupt = (/** @type {any} */ e) => e.code === 'LOADERX_CORRUPT' && e.file === 'delete.journal' && /delete\.journal/.test(e.message);

test('a killed delete reads as the finished deletion from a directory', async () => {
  const want = await finished();
  assert.equal(want.length, 35);
  for (const kase of KILLED) {
    const got = await recordsAt(join(JOURNAL_FIXTURES, kase));
    assert.equal(got.length, want.length, kase);
    assert.deepEqual(got.records, want.records, kase);
    assert.equal(got.stats.records, want.stats.records, kase);
  }
});

test('a killed delete reads as the finished deletion over HTTP', async () => {
  const server = await serve({ root: JOURNAL_FIXTURES });
  try {
    const want = await finished();
    for (const kase of KILLED) {
      const got = await recordsAt(new HttpSource(`${server.url}${kase}/`));
      assert.deepEqual(got.records, want.records, kase);
    }
  } finally {
    await server.close();
  }
});

test('a damaged journal is LOADERX_CORRUPT naming delete.journal, from a directory and over HTTP', async () => {
  for (const [what, damage] of Object.entries(DAMAGES)) {
    const dir = damaged('before_table', damage);
    await assert.rejects(Store.open(dir), isJournalCorrupt, what);
    const server = await serve({ root: dir });
    try {
      await assert.rejects(Store.open(new HttpSource(`${server.url}`)), isJournalCorrupt, `${what} over HTTP`);
    } finally {
      await server.close();
    }
  }
  // A whole journal beside a table it does not apply to: the finished table with the journal of
  // the delete from 40 to 35 applies (35 is its new length), one with a record fewer does not.
  const dir = tempDir();
  copyStore(join(JOURNAL_FIXTURES, 'finished'), dir);
  writeFileSync(join(dir, 'delete.journal'), readFileSync(join(JOURNAL_FIXTURES, 'before_table', 'delete.journal')));
  assert.deepEqual((await recordsAt(dir)).records, (await finished()).records);
  const meta = new Uint8Array(readFileSync(join(dir, 'meta.zr')));
  new DataView(meta.buffer).setUint32(12, 34, true);
  writeFileSync(join(dir, 'meta.zr'), meta.subarray(0, 16 + 16 * 34));
  await assert.rejects(Store.open(dir), isJournalCorrupt, 'a journal that does not apply');
});
