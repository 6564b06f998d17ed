// The worker thread behind node-store.js: its own instance of the plain wasm build, and its own
// stores on the directories the calling thread opened (own descriptors, own table cache). It does
// one kind of work, a gather of part of a call's records, so the calling thread gathers the other
// part meanwhile. It owns nothing the calling thread uses: a crash here loses only its replies.
//
// Messages in: `{id, op: 'open', store, dir, verify}`, `{id, op: 'gather', store, method, indices,
// before, expect}`,
// `{id, op: 'close', store}`. Out: `{id, value}` (a gather's output buffer is transferred) or
// `{id, error: {code, message}}`.
import { readFileSync } from 'node:fs';
import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi, GATHER_INTO, freshBytes } from './store.js';
import { Spares, packAfter } from './node-parts.js';
import { NodeSource } from './sources/node.js';
import { ioError, loaderxError } from './errors.js';

/** How long (ms) the worker spins for the next call after answering one: the next call of a
 *  caller that gathers batch after batch comes within this, and a thread that waits in the event
 *  loop sleeps, which on this VM costs about 1 ms to wake (see node-store.js Host.wait). */
const SPIN_NEXT = 2;

wasm.initSync({ module: readFileSync(new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url)) });
const { Store } = makeApi(wasm);
/** @type {Map<number, any>} stores by the calling thread's id for them */
const stores = new Map();
const spares = new Spares();
/**
 * The next result buffer, allocated with its pages touched (about 0.2 ms per MiB) after a call
 * is answered, while the worker waits for the next one, as large as the last result: a caller
 * gathering batch after batch of one size finds it ready. Each result is a new buffer (it is
 * transferred), so one is allocated per call either way.
 * @type {Uint8Array | null}
 */
let ahead = null;
/** Bytes of the last result, and the largest allocated ahead. */
let lastBytes = 0;
const AHEAD_MAX = 64 << 20;

function store(id) {
  const s = stores.get(id);
  if (!s) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
  return s;
}

const ops = {
  async open({ store: id, dir, verify }) {
    const s = await Store.open(new NodeSource(dir), { verify });
    stores.set(id, s);
    return [{ header: s.header, hasDict: s.hasDict, schema: s.schema }, []];
  },
  // The records `indices`, decoded into a kept buffer when `expect` is their output size, then
  // copied after `before` bytes left for the calling thread's part (node-parts.js packAfter).
  // `took` is how long that took (ms): the calling thread balances its calls by it.
  async gather({ store: id, method, indices, before, expect }) {
    if (method !== 'gather' && method !== 'gatherBytes') throw loaderxError('LOADERX_ARGUMENT', `unknown gather ${String(method)}`);
    const start = performance.now();
    const spare = spares.take(expect);
    try {
      const out = ahead;
      ahead = null;
      const part = packAfter(await store(id)[GATHER_INTO](method, indices, spare), before, out);
      lastBytes = part.buffer.byteLength;
      return [{ ...part, took: performance.now() - start }, [part.buffer]];
    } finally {
      spares.give(spare);
    }
  },
  async close({ store: id }) {
    const s = stores.get(id);
    stores.delete(id);
    await s?.close();
    return [null, []];
  },
};

/** @type {import('node:worker_threads').MessagePort} */
const port = workerData.port;

/** Answers one call. */
async function answer({ id, op, ...args }) {
  try {
    if (!Object.hasOwn(ops, op)) throw loaderxError('LOADERX_ARGUMENT', `unknown call ${String(op)}`);
    const [value, transfer] = await ops[op](args);
    port.postMessage({ id, value }, transfer);
  } catch (e) {
    const err = ioError(e, String(op));
    port.postMessage({ id, error: { code: err.code, message: err.message } });
  }
}

/** Answers a call, then every call that arrives while it spins for SPIN_NEXT ms after each
 *  (having allocated the next result buffer). */
async function serve(msg) {
  for (let next = msg; next;) {
    await answer(next);
    if (!ahead && lastBytes > 0 && lastBytes <= AHEAD_MAX) ahead = freshBytes(lastBytes);
    next = null;
    for (const until = performance.now() + SPIN_NEXT; !next && performance.now() < until;) next = receiveMessageOnPort(port)?.message;
  }
}

port.on('message', serve);
