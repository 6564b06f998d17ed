// Store.open with any value, path, URL or option: a Store, or a documented LoaderxError.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Store, MemorySource } from '../src/node.js';
import { copyStore, fixture, readStoreFiles, removeDir, storeDir } from './helpers/common.mjs';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// Store.open

/** Values and paths that are no store. */
function openValueArb() {
  return fc.oneof(
    fc.constantFrom(0, 1, -1, NaN, 1.5, 2 ** 53, 0n, true, false, null, undefined, '', ' ', '.', '/', '\0', 'a\0b',
      '/dev/null', '/nonexistent/store', 'http://', 'https://[', Symbol('store'), [], [1, 2], {}, { length: 3 },
      () => 0, new Map(), new Set(), new Date(0), /store/, Object.create(null), new URL('file:///nonexistent/store/'))
      .map((value) => ({ value })),
    fc.string({ maxLength: 12 }).filter((s) => !/^\s*https?:/i.test(s)).map((path) => ({ path })),
    fc.string({ maxLength: 12 }).map((under) => ({ under })),
    fc.constantFrom('a file', 'meta.zr is a directory', 'chunk is a directory', 'empty directory', 'an open Store').map((special) => ({ special })),
  );
}


/** A `scheme://` string or URL that is not a valid http(s) or file: URL. */
function badUrl(v) {
  const scheme = v instanceof URL ? v.protocol.slice(0, -1) : typeof v === 'string' ? /^([a-z][a-z0-9+.-]*):\/\//i.exec(v)?.[1] : null;
  if (scheme == null) return false;
  if (!['http', 'https', 'file'].includes(scheme.toLowerCase())) return true;
  try {
    new URL(String(v));
    return false;
  } catch {
    return true;
  }
}

describe('Store.open', () => {
  const specialDirs = {};
  before(() => {
    const raw = storeDir(fixture('u8img_raw'));
    specialDirs['a file'] = join(raw, 'meta.zr');
    specialDirs['empty directory'] = join(prop.tmp, 'empty');
    mkdirSync(specialDirs['empty directory']);
    specialDirs['meta.zr is a directory'] = join(prop.tmp, 'metadir');
    mkdirSync(join(specialDirs['meta.zr is a directory'], 'meta.zr'), { recursive: true });
    specialDirs['chunk is a directory'] = copyStore(raw, join(prop.tmp, 'chunkdir'));
    removeDir(join(specialDirs['chunk is a directory'], '0.zr'));
    mkdirSync(join(specialDirs['chunk is a directory'], '0.zr'));
  });

  const resolve = (d) => ('value' in d ? d.value : 'path' in d ? d.path : 'under' in d ? join(prop.tmp, 'nothing-here', d.under)
    : d.special === 'an open Store' ? prop.targets.get('u8img_zstd').store : specialDirs[d.special]);

  test('numbers, objects, empty strings, nonexistent paths, files: a rejected LoaderxError (or a store that then fails cleanly)', async () => {
    await fc.assert(
      fc.asyncProperty(openValueArb(), fc.anything({ maxDepth: 1 }), async (d, options) => {
        const what = `Store.open(${fc.stringify(d)})`;
        // @ts-expect-error options of any type (Node's Store.open uses only timeout and signal, for URLs)
        const res = await prop.settle(() => Store.open(resolve(d), options));
        if ('error' in res || res.hang) {
          // An object that is no source is {name: bytes}: a value in it that is not bytes is a
          // bad argument; an object without any (an empty one, a Date) is a store without meta.zr.
          const v = resolve(d);
          // A value that is neither a path nor an object (undefined, null, numbers, ...) is a bad argument.
          const notAnObject = typeof v !== 'string' && (v === null || typeof v !== 'object');
          // README: so are a URL of another scheme (or no URL at all) and the path of a file.
          const refused = notAnObject || prop.holdsNonBytes(v) || badUrl(v) || ('special' in d && d.special === 'a file');
          prop.expectRejects(res, refused ? ['LOADERX_ARGUMENT'] : ['LOADERX_NOT_FOUND', 'LOADERX_NOT_A_STORE', 'LOADERX_IO'], what);
          if ('under' in d && !d.under.includes('\0')) assert.equal(res.error.code, 'LOADERX_NOT_FOUND', `${what}: a missing directory`);
        } else {
          // Only the store whose chunk is a directory opens; reading its records then fails.
          const store = prop.expectResolves(res, what);
          try {
            assert.equal(/** @type {{special?: string}} */ (d).special, 'chunk is a directory', `${what} opened`);
            prop.expectRejects(await prop.settle(() => store.gatherBytes([0])), ['LOADERX_IO', 'LOADERX_CORRUPT'], `${what}.gatherBytes`);
            prop.okOrRejects(await prop.settle(() => store.verify()), ['LOADERX_IO'], `${what}.verify`);
          } finally {
            await store.close();
          }
        }
        await prop.assertUnchanged(prop.targets.get('u8img_zstd'));
      }),
      { seed: prop.SEED, numRuns: 150 },
    );
    await prop.stillWorks();
  });

  test('a good store with bad options still opens and reads the same', async () => {
    const t = prop.targets.get('u8img_zstd');
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.anything({ maxDepth: 2 }), fc.record({ worker: fc.anything({ maxDepth: 0 }), threads: fc.anything({ maxDepth: 0 }) })), fc.boolean(), async (options, memory) => {
        const dir = storeDir(fixture(t.name));
        // @ts-expect-error options of any type (Node's Store.open uses only timeout and signal, for URLs)
        const store = prop.expectResolves(await prop.settle(() => Store.open(memory ? new MemorySource(readStoreFiles(dir)) : dir, options)), `Store.open(dir, ${fc.stringify(options)})`);
        try {
          await prop.assertUnchanged({ ...t, store });
        } finally {
          await store.close();
        }
      }),
      { seed: prop.SEED, numRuns: 40 },
    );
  });
});
