#!/usr/bin/env node
// Reads the golden set with the Node API (js/src/node.js) and writes what it saw as JSON.
//
//   node tests/golden/read_node.mjs GOLDEN_DIR [OUT.json]      (default: stdout)
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Store, Sampler } from '../../js/src/node.js';
import { readStore, readSamplers } from './golden_read.mjs';

const [dir, outPath] = process.argv.slice(2);
if (!dir) {
  console.error('usage: read_node.mjs GOLDEN_DIR [OUT.json]');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
const stores = {};
for (const [name, entry] of Object.entries(manifest.stores)) {
  let store;
  try {
    store = await Store.open(join(dir, entry.path));
    stores[name] = await readStore(store);
  } catch (e) {
    stores[name] = { error: `${e.code || e.name}: ${e.message}` };
  } finally {
    await store?.close();
  }
}
const result = { reader: 'node', stores, sampler: readSamplers(Sampler, manifest.sampler.cases) };
const text = JSON.stringify(result);
if (outPath) writeFileSync(outPath, `${text}\n`);
else console.log(text);
