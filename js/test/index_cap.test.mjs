// A call takes at most MAX_INDICES (2^24) indices, from any kind of list: a longer array, typed
// array or array-like, or an endless generator, is LOADERX_TOO_LARGE, found before anything
// that large is allocated, and a generator is read no further than its MAX_INDICES + 1st
// element (and closed). The store goes on working after.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, LoaderxError } from '../src/node.js';
import { MAX_INDICES, toIndexArray } from '../src/args.js';
import { fixture, storeDir, rejection } from './helpers/common.mjs';

const GOOD = fixture('u8img_zstd');


function assertTooLarge(e) {
  assert.ok(e instanceof LoaderxError, String(e));
  assert.equal(e.code, 'LOADERX_TOO_LARGE', e.message);
  assert.match(e.message, new RegExp(`at most ${MAX_INDICES} indices`));
}

describe('index lists longer than a call takes', () => {
  /** @type {import('../src/node.js').Store} */
  let store;
  before(async () => { store = await Store.open(storeDir(GOOD)); });
  after(async () => { await store.close(); });

  test('the cap is the most records a store holds', () => {
    assert.equal(MAX_INDICES, 2 ** 24);
  });

  // gather goes through the Node Store's own conversion, lengths through the shared Store's.
  for (const method of ['gather', 'lengths']) {
    test(`${method}: an endless generator rejects, read to MAX_INDICES + 1 elements and closed`, async () => {
      let yielded = 0;
      let closed = false;
      function* endless() {
        try {
          while (true) {
            yielded++;
            yield 0;
          }
        } finally {
          closed = true;
        }
      }
      assertTooLarge(await rejection(store[method](endless())));
      assert.equal(yielded, MAX_INDICES + 1);
      assert.ok(closed, "the generator's finally ran");
    });
  }

  test('a generator with a bad element before the cap still names it (LOADERX_INDEX)', async () => {
    function* badEarly() {
      yield 0;
      yield 'x';
      while (true) yield 0;
    }
    const e = await rejection(store.gather(/** @type {any} */ (badEarly())));
    assert.equal(e.code, 'LOADERX_INDEX');
  });

  test('an array-like of MAX_INDICES + 1 is refused at its length, before any element is read', async () => {
    let reads = 0;
    const list = new Proxy({ length: MAX_INDICES + 1 }, {
      get(target, key) {
        if (key !== 'length' && typeof key === 'string') reads++;
        return key === 'length' ? target.length : 0;
      },
    });
    assertTooLarge(await rejection(store.gather(list)));
    assert.equal(reads, 0);
    // Lengths no array can have are not a list at all (as before).
    assert.equal((await rejection(store.gather({ length: 2 ** 32 }))).code, 'LOADERX_ARGUMENT');
  });

  test('typed arrays past the cap', async () => {
    assertTooLarge(await rejection(store.lengths(new Uint8Array(MAX_INDICES + 1))));
    assertTooLarge(await rejection(store.gatherBytes(new Uint32Array(MAX_INDICES + 1))));
  });

  test('a list of exactly MAX_INDICES converts (the cap is inclusive)', () => {
    function* exactly() {
      for (let k = 0; k < MAX_INDICES; k++) yield k & 7;
    }
    assert.equal(toIndexArray(exactly()).length, MAX_INDICES);
    assert.equal(toIndexArray(new Uint8Array(MAX_INDICES)).length, MAX_INDICES);
  });

  test('the store works after', async () => {
    const got = await store.gatherBytes([1, 2]);
    assert.equal(got.length, 2);
  });
});
