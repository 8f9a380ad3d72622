/**
 * `loops daemon start|run --store <url>`, in process (`main(argv)`, the binary's own entry point):
 * a URL that is not a store is refused before anything starts, as one line naming `--store` — the
 * option the user typed — not `LOOPS_STORE`, the variable `daemon start` hands the URL to the
 * daemon in; with its password hidden; exit 2; no daemon, no pid file, no log. Nothing here needs
 * PostgreSQL: the URL is refused before any connection.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { logFile, pidFile } from '../../src/runtime/daemon/daemon.js';
import { tempDir } from '../helpers/tmp.js';

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

async function cli(argv: string[], dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new Capture();
  const err = new Capture();
  const code = await main(argv, { out, err, dataDir });
  return { code, stdout: out.text, stderr: err.text };
}

describe('daemon start|run --store <not a store>', () => {
  it.each([['daemon', 'start'], ['daemon', 'run']])('%s %s: one line naming --store, the password hidden, exit 2, nothing started', async (...verb) => {
    const dataDir = join(tempDir(), 'data');
    for (const [url, said] of [
      ['mysql://root:hunter2@db/loops', /--store: "mysql:\/\/root:\*\*\*@db\/loops" is not a store loops knows/],
      ['postgres://root:hunter2@db:port/loops', /--store: not a valid URL: "postgres:\/\/root:\*\*\*@db:port\/loops"/],
    ] as const) {
      const r = await cli([...verb, '--store', url], dataDir);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(said);
      expect(r.stderr).not.toContain('LOOPS_STORE');
      expect(r.stderr).not.toContain('hunter2');
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toBe('');
    }
    expect(existsSync(pidFile(dataDir))).toBe(false);
    expect(existsSync(logFile(dataDir))).toBe(false);
  });
});
