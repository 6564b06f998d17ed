// Everything the browser test compares between Node and Chromium for one store, using only the
// public Store API and standard web APIs (crypto.subtle), so both sides run this same code.
// Errors are recorded by code only: messages name the source (path, URL, files) and may differ.

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
/** SHA-256 (hex) of each array, through crypto.subtle, all at once. Node passes a faster one. */
const subtleHashes = (list) => Promise.all(list.map(async (b) => hex(await crypto.subtle.digest('SHA-256', b))));
const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** Decoded bytes per call at most (the reader caps a call at 512 MiB). */
const BATCH_BYTES = 64 << 20;
/**
 * Records described one by one (lengths, bytes, typed values), at most: the first ones. A store
 * whose damaged header claims 2^24 records would otherwise cost 256 MiB of table per side;
 * `get`, `stats` and `verify` still cover the whole store.
 */
const DESCRIBED_MAX = 1 << 20;

function errorOf(e) {
  return { error: e?.code ? e.code : `${e?.name || 'Error'} (no code): ${e?.message || e}` };
}

async function step(fn) {
  try {
    return await fn();
  } catch (e) {
    return errorOf(e);
  }
}

/** Index batches of at most BATCH_BYTES decoded bytes (at least one record each). */
function batches(lengths, n, widen = 1) {
  if (!Array.isArray(lengths)) return [Array.from({ length: n }, (_, k) => k)];
  const out = [];
  let cur = [];
  let bytes = 0;
  for (let k = 0; k < n; k++) {
    const b = lengths[k] * widen;
    if (cur.length && bytes + b > BATCH_BYTES) { out.push(cur); cur = []; bytes = 0; }
    cur.push(k);
    bytes += b;
  }
  if (cur.length) out.push(cur);
  return out;
}

/** Per-record sha256 of the typed values (`gather`), with shapes and the array type. */
async function typed(store, parts, hashes) {
  const s = store.schema;
  const sha = [];
  const shapes = [];
  let arrayType = null;
  for (const idx of parts) {
    const g = await store.gather(idx);
    if (Array.isArray(g)) {
      if (g.length !== idx.length) throw new Error(`gather gave ${g.length} records for ${idx.length}`);
      for (const a of g) {
        arrayType ??= a.constructor.name;
        shapes.push(Array.from(a.shape));
      }
      sha.push(...(await hashes(g.map(bytesOf))));
    } else {
      arrayType ??= g.constructor.name;
      if (g.shape[0] !== idx.length) throw new Error(`dense gather shape ${g.shape} for ${idx.length} records`);
      const per = g.length / Math.max(1, idx.length);
      const rows = idx.map((_, k) => bytesOf(g.subarray(k * per, (k + 1) * per)));
      sha.push(...(await hashes(rows)));
      for (let k = 0; k < idx.length; k++) shapes.push(g.shape.slice(1));
    }
  }
  return { arrayType: arrayType ?? s?.arrayType ?? null, sha, shapes };
}

/** `get()` of the first and last record, as sha256 and shape. */
async function ends(store, hashes) {
  const n = store.length;
  const out = [];
  for (const i of n ? [...new Set([0, n - 1])] : []) {
    const a = await store.get(i);
    out.push({ index: i, sha: (await hashes([bytesOf(a)]))[0], shape: Array.from(a.shape) });
  }
  return out;
}

/**
 * Opens a store with `open()` and describes it: schema, header, lengths, record bytes and typed
 * values (sha256 per record), `get`, stats, verify. Each part records an error code on failure.
 * `hashes(list)` resolves to the hex SHA-256 of each Uint8Array (default: crypto.subtle).
 */
export async function describeStore(open, { hashes = subtleHashes } = {}) {
  let store;
  try {
    store = await open();
  } catch (e) {
    return { open: errorOf(e) };
  }
  try {
    const n = Math.min(store.length, DESCRIBED_MAX);
    const idx = Array.from({ length: n }, (_, k) => k);
    const out = { length: store.length, described: n, schema: store.schema, header: store.header, hasDict: store.hasDict };
    out.lengths = await step(async () => Array.from(await store.lengths(idx)));
    const parts = batches(out.lengths, n);
    out.records = await step(async () => {
      const sha = [];
      for (const p of parts) sha.push(...(await hashes(await store.gatherBytes(p))));
      return sha;
    });
    // float16 doubles in size when widened: smaller batches for the typed read.
    out.typed = await step(() => typed(store, batches(out.lengths, n, 2), hashes));
    out.get = await step(() => ends(store, hashes));
    out.stats = await step(() => store.stats());
    out.verify = await step(async () => {
      const v = await store.verify();
      return { ok: v.ok, checked: v.checked, length: v.length, bad: v.bad.map((b) => [b.index, b.code]) };
    });
    out.ok = !['lengths', 'records', 'typed', 'get', 'stats', 'verify'].some((k) => out[k]?.error) && out.verify.ok;
    return out;
  } finally {
    await store.close();
  }
}

/** Stable JSON (sorted keys), so two descriptions compare as strings. */
export function stable(v) {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

/** The first path where two descriptions differ, for messages. */
export function firstDifference(a, b, path = '') {
  if (stable(a) === stable(b)) return null;
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${path}.${k}`);
      if (d) return d;
    }
  }
  const show = (x) => { const s = stable(x); return s && s.length > 120 ? `${s.slice(0, 120)}...` : s; };
  return `${path || '(root)'}: ${show(a)} != ${show(b)}`;
}
