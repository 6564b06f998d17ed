// The Python side of the cross-language tests: our Python package (in /work/main/.venv, or
// $LOADERX_PYTHON) runs a snippet and prints JSON on its last line.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './common.mjs';
import { required } from './require_all.mjs';

export const PYTHON = process.env.LOADERX_PYTHON || join(REPO, '.venv/bin/python');

/**
 * Runs `code` with `input` (JSON) on stdin and returns the JSON of its last output line as
 * `{ value }`, or `{ missing }` naming the absent Python (thrown instead under the require-all
 * policy or LOADERX_REQUIRE_PY=1).
 * @param {string} code
 * @param {unknown} input
 * @returns {{ value?: any, missing?: string }}
 */
export function pythonJson(code, input) {
  if (!existsSync(PYTHON)) {
    const missing = `no Python with loaderx at ${PYTHON} (set LOADERX_PYTHON)`;
    if (required(['LOADERX_REQUIRE_PY'])) throw new Error(`${missing} (LOADERX_REQUIRE_ALL or LOADERX_REQUIRE_PY=1)`);
    return { missing };
  }
  const env = { ...process.env };
  delete env.PYTHONPATH;
  const out = execFileSync(PYTHON, ['-c', code], { input: JSON.stringify(input), env, encoding: 'utf8', timeout: 120000, maxBuffer: 1 << 28 });
  return { value: JSON.parse(/** @type {string} */ (out.trim().split('\n').at(-1))) };
}
