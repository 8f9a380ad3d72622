/**
 * Told when it fails, through the built binary (issue 12 item 9): create refuses a bad
 * --notify-url or an empty --on-failure with exit 2 and a hint; run-now runs the hook and POSTs
 * the notice before it exits, and show / runs link the hook run to the failed run; the daemon
 * tells of a scheduled failure, and a daemon killed (kill -9) while it POSTs delivers after its
 * restart, with the same idempotency key.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { tempDir } from '../helpers/tmp.js';
import { pidAlive, useSandboxes, type CliResult } from './cli-helpers.js';

const sandbox = useSandboxes();

interface Hit {
  body: Record<string, any>;
  headers: IncomingMessage['headers'];
  res: ServerResponse;
}

/** A local HTTP server; `onRequest` answers (or holds) each request; `next()` resolves with the next one. */
async function receiver(onRequest: (hit: Hit, n: number) => void) {
  const hits: Hit[] = [];
  const waiting: Array<(hit: Hit) => void> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hit = { body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, any>, headers: req.headers, res };
      hits.push(hit);
      onRequest(hit, hits.length);
      waiting.shift()?.(hit);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/loops`,
    hits,
    next: () => new Promise<Hit>((resolve) => waiting.push(resolve)),
  };
}

function started(r: CliResult): number {
  expect(r.code, r.stderr).toBe(0);
  const m = /Started the loops daemon \(pid (\d+)\)/.exec(r.stdout);
  expect(m, r.stdout).not.toBeNull();
  return Number(m![1]);
}

describe('create: --on-failure and --notify-url are checked', () => {
  it('a bad URL or an empty command: exit 2, one line with a hint, nothing created', () => {
    const s = sandbox();
    for (const [flags, message] of [
      [['--notify-url', 'ftp://example.com/x'], /^loops: --notify-url: ftp URLs are not supported, only http and https; e\.g\. --notify-url https:/],
      [['--notify-url', 'example.com/hook'], /^loops: --notify-url: "example.com\/hook" is not a URL; e\.g\. --notify-url https:/],
      [['--on-failure', ''], /^loops: --on-failure: the command is empty; give a \/bin\/sh command line/],
      [['--notify-on', 'failure'], /^loops: --notify-on applies to --notify-url; add --notify-url URL/],
    ] as const) {
      const r = s.run(['create', 'command', 'job', '--cmd', 'true', '--every', '1h', ...flags]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(s.json(['list'])).toEqual([]);
  });
});

describe('run-now', () => {
  it('runs the --on-failure hook and POSTs the notice before it exits; show and runs link the hook run', async () => {
    const s = sandbox();
    const dir = tempDir();
    const server = await receiver((hit) => hit.res.end('ok'));
    s.json(['create', 'command', 'job', '--cmd', 'echo broke >&2; exit 3', '--manual', '--cwd', dir, '--on-failure', 'echo "$LOOPS_LOOP_NAME $LOOPS_RUN_ID $LOOPS_STATUS $LOOPS_EXIT_CODE" > told.txt', '--notify-url', server.url]);
    // Started, not run: the server answers from this process, whose event loop must stay free.
    const r = await s.start(['run-now', 'job', '--json']).exited;
    expect(r.code, r.stderr).toBe(3);
    const run = JSON.parse(r.stdout) as { id: string; status: string };
    expect(run.status).toBe('failed');
    expect(readFileSync(join(dir, 'told.txt'), 'utf8')).toBe(`job ${run.id} failed 3\n`);
    expect(server.hits).toHaveLength(1);
    expect(server.hits[0]!.headers['idempotency-key']).toBe(`${run.id}.url`);
    expect(server.hits[0]!.body).toMatchObject({ type: 'run.failed', loop: { name: 'job' }, run: { id: run.id, exitCode: 3, stderrTail: 'broke\n' } });

    const shown = s.run(['show', run.id]);
    expect(shown.stdout).toMatch(/notified\s+on-failure echo .*: ran as run (run_\S+), succeeded/);
    expect(shown.stdout).toMatch(/POST http:\/\/127\.0\.0\.1:\d+\/loops: delivered \(1 attempt, HTTP 200\)/);
    const hookId = /ran as run (run_[^,\s]+)/.exec(shown.stdout)![1]!;
    expect(s.run(['show', hookId]).stdout).toContain(`hook        the --on-failure command of run ${run.id} (failed)`);
    expect(s.json<{ notices: Array<{ status: string }> }>(['show', run.id]).notices.map((n) => n.status).sort()).toEqual(['delivered', 'ran']);
    expect(s.run(['runs', 'job']).stdout).toMatch(new RegExp(`${hookId}\\s+job\\s+succeeded\\s+on-failure`));
    const loop = s.run(['show', 'job']).stdout;
    expect(loop).toContain('on failure  echo "$LOOPS_LOOP_NAME');
    expect(loop).toContain(`notify      POST ${server.url} on failure`);
    // The loop's last run is the failure, not its hook.
    expect(s.json<Array<{ lastRun: { id: string } }>>(['list'])[0]!.lastRun.id).toBe(run.id);
    expect(s.run(['projections', 'verify']).code).toBe(0);
  });
});

describe('the daemon', () => {
  it('tells of a scheduled failure; killed with kill -9 while it POSTs, it delivers after its restart with the same key', async () => {
    const s = sandbox();
    const dir = tempDir();
    // The first POST is held unanswered (the daemon is killed meanwhile); the next one is accepted.
    const server = await receiver((hit, n) => {
      if (n > 1) hit.res.end('ok');
    });
    const env = { LOOPS_NOTIFY_TIMEOUT_MS: '60000' };
    s.json(['create', 'command', 'nightly', '--cmd', 'exit 5', '--cwd', dir, '--every', '1h', '--starts-at', new Date(Date.now() + 2500).toISOString(), '--on-failure', 'echo "$LOOPS_RUN_ID" >> told.txt', '--notify-url', server.url]);
    const first = started(s.run(['daemon', 'start'], env));
    const held = await server.next();
    process.kill(first, 'SIGKILL');
    await waitFor(() => !pidAlive(first), 5000, `daemon ${first} to die`);
    const runId = held.body.run.id as string;
    expect(held.body.run).toMatchObject({ status: 'failed', exitCode: 5, trigger: 'schedule' });
    // The POST is pending in the log (the hook is a notice of its own, told alongside).
    expect(s.json<{ notices: Array<{ channel: string; status: string }> }>(['show', runId]).notices).toEqual(
      expect.arrayContaining([expect.objectContaining({ channel: 'url', status: 'pending' })]),
    );

    const second = started(s.run(['daemon', 'start'], env));
    onTestFinished(() => void s.run(['daemon', 'stop']));
    const again = await server.next();
    expect(again.headers['idempotency-key']).toBe(held.headers['idempotency-key']);
    expect(again.body.run.id).toBe(runId);
    const told = () => s.json<{ notices: Array<{ channel: string; status: string }> }>(['show', runId]).notices;
    await waitFor(() => told().filter((n) => n.status !== 'pending').length === 2, 10_000, 'both notices finished');
    expect(told().map((n) => [n.channel, n.status]).sort()).toEqual([
      ['command', 'ran'],
      ['url', 'delivered'],
    ]);
    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(pidAlive(second)).toBe(false);
    // The hook ran once (whether before the kill or after the restart), the URL twice with one key.
    expect(readFileSync(join(dir, 'told.txt'), 'utf8')).toBe(`${runId}\n`);
    expect(server.hits).toHaveLength(2);
    expect(s.run(['projections', 'verify']).code).toBe(0);
  });
});
