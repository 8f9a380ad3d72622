/**
 * `loops export --html` in a real browser: Debian's chromium (apt, /usr/bin/chromium; .ci/run
 * installs it) driven headless by playwright-core, in a fresh profile, with every request that is
 * not the file itself aborted and recorded. The page of a 4-step workflow run draws one bar per
 * step, moving the slider changes the state shown, output holding `</script>` does not break out
 * of the embedded data, and the screenshot is not blank.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { tempDir } from '../helpers/tmp.js';
import { useSandboxes } from './cli-helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const browser = requirePrerequisite(`chromium (${CHROMIUM})`, () => (existsSync(CHROMIUM) ? true : `${CHROMIUM} is missing (Debian: apt-get install --no-install-recommends chromium)`));
const sandbox = useSandboxes();

const FOUR_STEPS = `name: four
steps:
  - id: build
    run: echo building; printf 'version=1.2.3\\n' >> "$LOOPS_OUTPUT"
  - id: lint
    needs: build
    run: echo linting >&2
  - id: test
    needs: build
    command: echo
    args: ["testing \${{ steps.build.outputs.version }}", "</script><script>alert(1)</script>"]
  - id: report
    needs: [lint, test]
    run: echo report
`;

describe('loops export --html', () => {
  it.skipIf(!browser)('one bar per step, a slider that changes the state shown, no request but the file, not blank', { timeout: 120_000 }, async () => {
    const s = sandbox();
    const dir = tempDir('loops-html-');
    writeFileSync(join(dir, 'four.yaml'), FOUR_STEPS);
    expect(s.run(['workflows', 'create', join(dir, 'four.yaml')]).code).toBe(0);
    const ran = s.run(['workflows', 'run', 'four']);
    expect(ran.code, ran.stderr).toBe(0);
    const wfRunId = s.json<Array<{ id: string }>>(['workflows', 'runs'])[0]!.id;
    const page = join(dir, 'run.html');
    const exported = s.run(['export', wfRunId, '--html', '-o', page]);
    expect(exported.code, exported.stderr).toBe(0);
    const html = readFileSync(page, 'utf8');
    expect(html).not.toMatch(/<script[^>]+src=|<link|@import|url\(/i);
    expect(html.match(/<\/script>/g)).toHaveLength(2); // the data's own `</script>` is escaped

    const context = await chromium.launchPersistentContext(tempDir('loops-chromium-'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const blocked: string[] = [];
      await context.route('**', (route) => {
        const url = route.request().url();
        if (url.startsWith('file:')) return route.continue();
        blocked.push(url);
        return route.abort();
      });
      const tab = await context.newPage();
      const dialogs: string[] = [];
      const errors: string[] = [];
      tab.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      tab.on('pageerror', (e) => errors.push(e.message));
      await tab.goto(pathToFileURL(page).href);

      // (The test is compiled without the DOM's types: elements are described by what is used of them.)
      const steps = await tab.locator('.bar').evaluateAll((bars) => bars.map((b) => (b as unknown as { dataset: Record<string, string> }).dataset.step));
      expect(steps.sort()).toEqual(['build', 'lint', 'report', 'test']);
      const widths = await tab.locator('.bar').evaluateAll((bars) => bars.map((b) => (b as unknown as { getBoundingClientRect(): { width: number } }).getBoundingClientRect().width));
      expect(widths.every((w) => w >= 3)).toBe(true);
      const events = await tab.locator('#events tbody tr').count();
      expect(events).toBeGreaterThan(8);

      const last = await tab.locator('#state').textContent();
      expect(JSON.parse(last!).state).toBe('succeeded');
      await tab.locator('#slider').focus();
      await tab.keyboard.press('Home');
      const first = await tab.locator('#state').textContent();
      expect(first).not.toBe(last);
      expect(JSON.parse(first!).state).not.toBe('succeeded');
      expect(await tab.locator('#current').textContent()).toContain('workflow.created'); // log order: the definition came first
      expect(await tab.locator('#pos').textContent()).toBe(`1 of ${events}`);
      await tab.keyboard.press('ArrowRight');
      expect(await tab.locator('#pos').textContent()).toBe(`2 of ${events}`);
      expect(await tab.locator('#state').textContent()).not.toBe(first);

      const shot = join(dir, 'page.png');
      if (process.env.LOOPS_TEST_KEEP_SCREENSHOT) await tab.screenshot({ path: process.env.LOOPS_TEST_KEEP_SCREENSHOT, fullPage: true });
      await tab.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(5_000);
      // Decode the PNG in a blank page and count its colours: a blank page has one.
      const blank = await context.newPage();
      const dataUrl = `data:image/png;base64,${readFileSync(shot).toString('base64')}`;
      const colours = await blank.evaluate<number>(`(async () => {
        const img = new Image();
        img.src = ${JSON.stringify(dataUrl)};
        await img.decode();
        const canvas = document.createElement('canvas');
        canvas.width = img.width;
        canvas.height = img.height;
        const g = canvas.getContext('2d');
        g.drawImage(img, 0, 0);
        const px = g.getImageData(0, 0, img.width, img.height).data;
        const seen = new Set();
        for (let i = 0; i < px.length; i += 4 * 7) seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
        return seen.size;
      })()`);
      expect(colours).toBeGreaterThan(10);

      expect(dialogs).toEqual([]);
      expect(errors).toEqual([]);
      expect(blocked).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
