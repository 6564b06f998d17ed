// What the JavaScript readers (read_node.mjs, and the page read_browser.mjs serves) do with one
// store or one sampler case. Only standard web APIs (crypto.subtle), so Node and browsers share it.
// The output shape and the canonical form of typed values are described in generate.py.

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');

export async function sha256(bytes) {
  return hex(await crypto.subtle.digest('SHA-256', bytes));
}

const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function concat(parts) {
  const total = parts.reduce((n, p) => n + p.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.byteLength; }
  return out;
}

/**
 * Reads every record of an open store: `{length, lengths, records, typed_sha256, shapes, schema,
 * array_type}`. Record hashes come from `gatherBytes`, typed values from `gather`.
 */
export async function readStore(store) {
  const n = store.length;
  const idx = Array.from({ length: n }, (_, k) => k);
  const raw = await store.gatherBytes(idx);
  if (raw.length !== n) throw new Error(`gatherBytes gave ${raw.length} records for ${n} indices`);
  const records = await Promise.all(raw.map((r) => sha256(r)));
  const lengths = Array.from(await store.lengths(idx));
  const s = store.schema;
  const typed = await store.gather(idx);
  let parts, shapes;
  if (Array.isArray(typed)) {
    parts = typed.map(bytesOf);
    shapes = typed.map((a) => Array.from(a.shape));
  } else {
    parts = [bytesOf(typed)];
    if (typed.shape[0] !== n) throw new Error(`dense gather has shape ${typed.shape} for ${n} records`);
    shapes = Array.from({ length: n }, () => typed.shape.slice(1));
  }
  const arrayType = Array.isArray(typed) ? (typed[0]?.constructor.name ?? s?.arrayType ?? 'Uint8Array') : typed.constructor.name;
  return {
    length: n,
    digest: await store.digest(),
    lengths,
    records,
    typed_sha256: await sha256(concat(parts)),
    shapes,
    schema: s ? { kind: s.kind, dtype: s.dtype, item_shape: Array.from(s.itemShape), codec: s.codec } : null,
    array_type: arrayType,
  };
}

/** One sampler case of the manifest, through the JS Sampler. */
export function readSampler(Sampler, c) {
  const make = () => new Sampler(BigInt(c.length), BigInt(c.batch_size), c.mode, BigInt(c.seed));
  const s = make();
  try {
    const batchAt = {};
    for (const step of Object.keys(c.batch_at)) batchAt[step] = Array.from(s.batchAt(BigInt(step)));
    const first = c.first.map(() => Array.from(s.next()));
    s.seek(BigInt(c.next.seek));
    const batches = Array.from({ length: c.next.count }, () => Array.from(s.next()));
    return { batch_at: batchAt, first, next: { batches, step_after: String(s.step) } };
  } finally {
    s.free();
  }
}

/** Every sampler case; a failing case is reported in place of its batches. */
export function readSamplers(Sampler, cases) {
  const out = {};
  for (const [name, c] of Object.entries(cases)) {
    try {
      out[name] = readSampler(Sampler, c);
    } catch (e) {
      out[name] = { error: `${e.code || e.name}: ${e.message}` };
    }
  }
  return out;
}
