// One timed round of the JS gather benchmark, shared by Node (scripts/bench_js.mjs) and the
// Chromium page it drives (which imports this file from the bench server), so both time the same
// loop. It uses nothing but the store and `performance`, which both have.

/**
 * Gathers every batch of `batches` once from `store`, `depth` calls in flight (1: one call after
 * another): `{moved, seconds}`, the bytes the calls returned and the time they took.
 */
export async function gatherRound(store, batches, depth) {
  const t = performance.now();
  let moved = 0;
  const inFlight = [];
  for (const b of batches) {
    inFlight.push(store.gatherBytes(b));
    if (inFlight.length >= depth) for (const r of await inFlight.shift()) moved += r.byteLength;
  }
  for (const p of inFlight) for (const r of await p) moved += r.byteLength;
  return { moved, seconds: (performance.now() - t) / 1000 };
}
