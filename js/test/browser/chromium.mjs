// Headless Debian Chromium through playwright-core (never `npx playwright install`), plus the
// static test server, for the browser tests. See ../shared/TOOLCHAIN.md.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.LOADERX_CHROMIUM || '/usr/bin/chromium';

/** A persistent context in a fresh temp profile; `close()` also removes the profile. */
export async function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'loaderx-chr-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return {
    ctx,
    async close() {
      await ctx.close().catch(() => {});
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Opens `url` in a new page; console errors and page errors are kept in `page.problems`. */
export async function openPage(ctx, url, { timeout = 50_000 } = {}) {
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console: ${m.text()}`);
    if (process.env.LOADERX_BROWSER_LOG) console.log(`[page] ${m.type()}: ${m.text()}`);
  });
  await page.goto(url);
  return page;
}
