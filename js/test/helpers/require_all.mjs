// The require-all policy for the node:test suites: with LOADERX_REQUIRE_ALL=1, which `make test`
// sets, a test that would skip because something is missing (a build, a Python, a server, a
// browser) fails instead, naming what is missing. Without it the test is skipped, so a partial
// setup still runs what it can. py/tests/_require_all.py holds the same rule for pytest.
//
// Invariant: every skip in js/test goes through `skipUnlessRequired`, so under the policy no
// node:test suite can skip silently.
import assert from 'node:assert/strict';

export const VARIABLE = 'LOADERX_REQUIRE_ALL';

/**
 * Whether skips must fail: the policy, or one of the older per-suite variables (`also`, for
 * example 'LOADERX_REQUIRE_PY') that ask the same of one suite.
 * @param {string[]} [also]
 */
export function required(also = []) {
  return [VARIABLE, ...also].some((name) => process.env[name] === '1');
}

/**
 * Skips test context `t` because `missing` is absent, or fails it under the policy.
 * @param {{ skip(message?: string): void }} t
 * @param {string} missing what is missing, and how to get it
 * @param {string[]} [also] older per-suite variables that also require it
 */
export function skipUnlessRequired(t, missing, also = []) {
  const on = [VARIABLE, ...also].filter((name) => process.env[name] === '1');
  if (on.length) assert.fail(`${missing} (${on.join(', ')}=1: nothing may skip)`);
  t.skip(missing);
}
