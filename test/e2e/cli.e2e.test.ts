import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, pidAlive, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

const LOOP_FIELDS = ['id', 'name', 'status', 'schedule', 'target', 'nextRunAt', 'createdAt', 'updatedAt'];
const RUN_FIELDS = ['id', 'loopId', 'scheduledFor', 'attempt', 'status', 'exitCode', 'signal', 'error', 'stdout', 'stderr', 'startedAt', 'finishedAt', 'durationMs'];

describe('loops --version / --help', () => {
  const s = sandbox();
  it('prints the version and the command list', () => {
    expect(s.run(['--version'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^loops \d+\.\d+\.\d+\n$/) });
    const help = s.run(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['create command', 'list', 'show', 'run-now', 'runs', 'events', 'replay', 'projections verify']) {
      expect(help.stdout).toContain(name);
    }
  });

  it.each([
    ['create', 'command'],
    ['list'],
    ['show'],
    ['remove'],
    ['pause'],
    ['resume'],
    ['run-now'],
    ['runs'],
    ['events'],
    ['replay'],
    ['next'],
    ['tick'],
    ['why'],
    ['daemon', 'run'],
    ['daemon', 'start'],
    ['daemon', 'stop'],
    ['daemon', 'status'],
    ['daemon', 'logs'],
    ['daemon', 'install'],
    ['projections', 'rebuild'],
    ['projections', 'verify'],
  ])('loops %s --help', (...words) => {
    const r = s.run([...words, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Usage: loops ${words.join(' ')}`);
    expect(r.stdout).toContain('--help');
  });
});

describe('create, run-now, runs, show', () => {
  const s = sandbox();

  it('echo hi: run succeeded, stdout has hi, exit 0', () => {
    const created = s.json(['create', 'command', 'hi', '--cmd', 'echo hi', '--every', '15m', '-d', 'greets']);
    for (const f of LOOP_FIELDS) expect(created).toHaveProperty(f);
    expect(created).toMatchObject({ name: 'hi', status: 'active', description: 'greets', schedule: { kind: 'every', everyMs: 900_000 } });
    expect(Date.parse(created.nextRunAt) - Date.parse(created.createdAt)).toBeGreaterThan(14 * 60_000);

    const r = s.run(['run-now', 'hi']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/succeeded/);
    const [run] = s.json(['runs', 'hi']);
    for (const f of RUN_FIELDS) expect(run).toHaveProperty(f);
    expect(run).toMatchObject({ status: 'succeeded', exitCode: 0, signal: null, error: null, attempt: 1, loopId: created.id });
    expect(run.stdout).toContain('hi');
    expect(run.durationMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(run.finishedAt)).toBeGreaterThanOrEqual(Date.parse(run.startedAt));
    // The full output is kept in a run file too.
    expect(readFileSync(join(s.dataDir, 'runs', run.id, 'stdout.log'), 'utf8')).toBe('hi\n');
  });

  it('exit 3 (shell form): failed, exitCode 3, CLI exit 3 with the reason on stderr', () => {
    s.json(['create', 'command', 'three', '--cmd', 'echo oops >&2; exit 3', '--manual']);
    const r = s.run(['run-now', 'three']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('exited with code 3');
    expect(r.stderr).toContain('oops');
    const [run] = s.json(['runs', 'three', '--limit', '1']);
    expect(run).toMatchObject({ status: 'failed', exitCode: 3, error: 'exited with code 3' });
    expect(run.stderr).toBe('oops\n');
  });

  it('--show-output streams the output; --json gives the run', () => {
    const r = s.run(['run-now', 'hi', '--show-output']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^hi\n/);
    const j = s.run(['run-now', 'three', '--json']);
    expect(j.code).toBe(3);
    expect(JSON.parse(j.stdout)).toMatchObject({ status: 'failed', exitCode: 3 });
  });

  it('--no-shell passes --arg values verbatim, with cwd and env', () => {
    s.json(['create', 'command', 'argv', '--no-shell', '--cmd', '/bin/echo', '--arg', '$HOME; rm -rf /', '--arg', 'b c', '--manual']);
    expect(s.run(['run-now', 'argv']).code).toBe(0);
    expect(s.json(['runs', 'argv'])[0].stdout).toBe('$HOME; rm -rf / b c\n');

    s.json(['create', 'command', 'where', '--cmd', 'pwd; echo "$GREETING"; echo "$LOOPS_LOOP_NAME"', '--cwd', FIXTURES, '--env', 'GREETING=hello there', '--manual']);
    expect(s.run(['run-now', 'where']).code).toBe(0);
    expect(s.json(['runs', 'where'])[0].stdout).toBe(`${FIXTURES}\nhello there\nwhere\n`);
  });

  it('a secret given inline with --env is refused (it would be stored in clear); --secret-env passes it from the environment, masked, never stored', () => {
    const s = sandbox();
    const secret = 'tok-4f9a1c77e2d0';
    const refused = s.run(['create', 'command', 'leaky', '--cmd', 'echo "$CLI_TOKEN"', '--env', `CLI_TOKEN=${secret}`, '--manual']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      "loops: --env CLI_TOKEN: its name says it holds a secret, and --env values are stored with the loop, in clear; pass it from where the runs run instead — --secret-env CLI_TOKEN (export CLI_TOKEN=… where loops daemon runs), --secret-file CLI_TOKEN=PATH (a file outside the data directory) or --secret-cmd CLI_TOKEN='COMMAND' (e.g. pass show …), read when each run starts: never stored, masked in output; if it is not a secret: --not-secret CLI_TOKEN\n",
    );
    expect(s.run(['show', 'leaky']).code).toBe(2);
    s.json(['create', 'command', 'sealed', '--cmd', 'echo "token=$CLI_TOKEN"', '--secret-env', 'CLI_TOKEN', '--manual']);
    expect(s.run(['run-now', 'sealed'], { CLI_TOKEN: secret }).code).toBe(0);
    expect(s.json(['runs', 'sealed'])[0].stdout).toBe('token=***\n');
    s.json(['create', 'command', 'public', '--cmd', 'true', '--env', 'PUBLIC_TOKEN=pk-visible-1', '--not-secret', 'PUBLIC_TOKEN', '--manual']);
    // Nowhere under the data directory: the database (and its WAL) and every run file.
    const found = spawnSync('grep', ['-rl', secret, s.dataDir], { encoding: 'utf8' });
    expect(found.stdout).toBe('');
  });

  it('a 100,000-character argument is "not found" (exit 2, one short line), not SQLite\'s "pattern too complex"', () => {
    const s = sandbox();
    const huge = `run_${'x'.repeat(100_000)}`;
    for (const args of [['events', huge], ['show', huge], ['logs', huge], ['replay', huge]]) {
      const r = s.run(args);
      expect(r.code, `${args[0]}: ${r.stderr.slice(0, 300)}`).toBe(2);
      expect(r.stderr).toMatch(/"run_x{36}"… \(100004 characters\)/);
      expect(r.stderr.length).toBeLessThan(400);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('a missing executable (no shell) is a failed run with a clear error', () => {
    s.json(['create', 'command', 'ghost', '--no-shell', '--cmd', 'definitely-not-a-command-xyz', '--manual', '--no-preflight']);
    const r = s.run(['run-now', 'ghost']);
    expect(r.code).toBe(3);
    const [run] = s.json(['runs', 'ghost']);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/command not found: definitely-not-a-command-xyz/);
  });

  it('list and show', () => {
    const list = s.json<any[]>(['list']);
    expect(list.map((l) => l.name)).toEqual(['argv', 'ghost', 'hi', 'three', 'where']);
    for (const l of list) for (const f of LOOP_FIELDS) expect(l).toHaveProperty(f);
    const table = s.run(['list']);
    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+STATUS\s+SCHEDULE\s+NEXT RUN\s+LAST RUN\s+ID$/);
    expect(s.json(['show', 'hi'])).toMatchObject({ name: 'hi', runCount: 2 });
    const show = s.run(['show', 'hi']);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('every 15m');
    expect(show.stdout).toContain('Recent runs:');
    // an id prefix works too
    const id = list[0].id as string;
    expect(s.json(['show', id.slice(0, 16)]).id).toBe(id);
  });

  it('pause, resume, remove, and the name can be reused', () => {
    expect(s.json(['pause', 'hi', '--reason', 'holiday'])).toMatchObject({ status: 'paused', reason: 'holiday', nextRunAt: null });
    const again = s.run(['pause', 'hi']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/cannot pause loop hi: it is paused/);
    // run-now still works on a paused loop
    expect(s.run(['run-now', 'hi']).code).toBe(0);
    const resumed = s.json(['resume', 'hi']);
    expect(resumed.status).toBe('active');
    expect(resumed.nextRunAt).not.toBeNull();
    expect(s.json(['remove', 'three']).status).toBe('removed');
    expect(s.json<any[]>(['list']).map((l) => l.name)).not.toContain('three');
    expect(s.json<any[]>(['list', '--all']).map((l) => l.name)).toContain('three');
    expect(s.run(['show', 'three']).code).toBe(2);
    expect(s.json(['create', 'command', 'three', '--cmd', 'true', '--manual']).name).toBe('three');
  });

  it('pause while another connection holds the database (BEGIN EXCLUSIVE): exit 75 (busy) with one clear line, nothing changed', () => {
    const other = s.db();
    try {
      other.exec('BEGIN EXCLUSIVE');
      const r = s.run(['pause', 'hi']);
      expect(r.code).toBe(75);
      expect(r.stderr).toBe('loops: the database is busy (another loops process holds the write lock); retry in a moment\n');
      expect(r.stdout).toBe('');
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    }
    expect(s.json(['show', 'hi']).status).toBe('active');
  });

  it('replay reproduces every recorded state of every run; events print the stream in order', () => {
    const runs = s.json<any[]>(['runs', '--limit', '100']);
    expect(runs.length).toBeGreaterThanOrEqual(7);
    for (const run of runs) {
      const r = s.run(['replay', run.id]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('every replayed state matches the log');
      // JSON Lines: one object per transition.
      const steps = s.run(['replay', run.id, '--json']).stdout.trim().split('\n').map((line) => JSON.parse(line));
      expect(steps[0]).toMatchObject({ version: 1, type: 'run.claimed', stateBefore: 'new', stateAfter: 'claimed' });
      expect(steps.at(-1).stateAfter).toBe(run.status);
      const events = s.json<any[]>(['events', run.id]);
      expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
    }
    const loopEvents = s.json<any[]>(['events', 'hi']);
    expect(loopEvents.map((e) => e.type)).toEqual(['loop.created', 'loop.paused', 'loop.resumed']);
  });

  it('projections verify passes; deleting rows and rebuilding restores identical rows', () => {
    expect(s.run(['projections', 'verify']).code).toBe(0);
    const db = s.db();
    const before = db.prepare('SELECT * FROM loop_runs ORDER BY id').all();
    const loopsBefore = db.prepare('SELECT * FROM loops ORDER BY id').all();
    db.prepare('DELETE FROM loop_runs').run();
    db.prepare("UPDATE loops SET status = 'paused' WHERE name = 'hi'").run();
    db.close();
    const broken = s.run(['projections', 'verify']);
    expect(broken.code).toBe(6);
    expect(broken.stdout).toMatch(/loop_runs id=run_\S+: missing from the live table/);
    expect(broken.stdout).toMatch(/loops id=loop_\S+: status is "paused" live, "active" rebuilt from the log/);
    expect(s.run(['projections', 'rebuild']).code).toBe(0);
    expect(s.run(['projections', 'verify']).code).toBe(0);
    const db2 = s.db();
    expect(db2.prepare('SELECT * FROM loop_runs ORDER BY id').all()).toEqual(before);
    expect(db2.prepare('SELECT * FROM loops ORDER BY id').all()).toEqual(loopsBefore);
    db2.close();
  });

  it('replay reports a determinism error naming the first mismatching version', () => {
    const [run] = s.json<any[]>(['runs', 'hi', '--limit', '1']);
    const db = s.db();
    db.prepare(`UPDATE events SET state = '"failed"' WHERE stream_id = ? AND version = 4`).run(`run:${run.id}`);
    db.close();
    const r = s.run(['replay', run.id]);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/diverges at version 4 \(process\.exited\)/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('loops next: previews fire times with zone, bounds and jitter', () => {
  const s = sandbox();

  it('cron in a zone: local wall time, strictly increasing, stable across calls', () => {
    s.json(['create', 'command', 'nightly', '--cmd', 'true', '--cron', '30 2 * * *', '--tz', 'Europe/Berlin']);
    const rows = s.json<any[]>(['next', 'nightly', '-n', '4']);
    expect(rows).toHaveLength(4);
    for (const r of rows) expect(r.local).toMatch(/ 0[23]:[03]0:00 \+0[12]:00$/);
    const times = rows.map((r) => Date.parse(r.fireAt));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(new Set(times).size).toBe(4);
    expect(times[0]).toBeGreaterThan(Date.now() - 5000);
    expect(s.json(['show', 'nightly']).nextRunAt).toBe(rows[0].fireAt);
    const table = s.run(['next', 'nightly']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^#\s+FIRES AT \(UTC\)\s+LOCAL \(Europe\/Berlin\)\s+IN$/);
  });

  it('jitter is deterministic per slot and within bounds; --max-runs and --expires-at bound the slots', () => {
    s.json(['create', 'command', 'spread', '--cmd', 'true', '--every', '1h', '--jitter', '10m', '--max-runs', '3']);
    const first = s.json<any[]>(['next', 'spread', '-n', '10']);
    expect(first).toHaveLength(3);
    expect(s.json<any[]>(['next', 'spread', '-n', '10'])).toEqual(first);
    for (const r of first) {
      const offset = Date.parse(r.fireAt) - Date.parse(r.slot);
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(600_000);
    }
    const until = new Date(Date.now() + 3.5 * 3_600_000).toISOString();
    s.json(['create', 'command', 'bounded', '--cmd', 'true', '--every', '1h', '--expires-at', until]);
    const bounded = s.json<any[]>(['next', 'bounded', '-n', '10']);
    expect(bounded.length).toBeGreaterThanOrEqual(3);
    expect(bounded.length).toBeLessThanOrEqual(4);
    for (const r of bounded) expect(Date.parse(r.slot)).toBeLessThanOrEqual(Date.parse(until));
  });

  it('a paused loop previews nothing, and says so', () => {
    s.json(['pause', 'spread']);
    expect(s.json(['next', 'spread'])).toEqual([]);
    expect(s.run(['next', 'spread']).stderr).toMatch(/spread is paused/);
  });
});

describe('loops tick and loops why', () => {
  const s = sandbox();
  const HOUR = 3_600_000;
  let later: Record<string, string>;

  it('after 3 days of downtime: latest runs once, none not at all, all only the window — one after another', () => {
    s.json(['create', 'command', 'latest', '--cmd', 'echo ran', '--every', '1h']);
    s.json(['create', 'command', 'none', '--cmd', 'true', '--every', '1h', '--catch-up', 'none']);
    s.json(['create', 'command', 'all', '--cmd', 'true', '--every', '1h', '--catch-up', 'all', '--catch-up-window', '5h']);
    // LOOPS_NOW: the binary's clock reads three days and a half hour later (between two slots).
    later = { LOOPS_NOW: new Date(Date.now() + 72 * HOUR + HOUR / 2).toISOString() };
    const first = s.run(['tick', '--json'], later);
    expect(first.code, first.stderr).toBe(0);
    const result = JSON.parse(first.stdout);
    const of = (name: string) => result.decisions.filter((d: any) => d.loopName === name);
    expect(of('latest').map((d: any) => d.type)).toEqual(['slot.coalesced', 'slot.fired']);
    expect(of('latest')[0].data.count).toBe(71);
    expect(of('latest')[1].data.late).toBe(true);
    expect(of('none').map((d: any) => d.type)).toEqual(['slot.missed']);
    expect(of('none')[0].data).toMatchObject({ count: 72, reason: 'catch-up none' });
    expect(of('all').map((d: any) => d.type)).toEqual(['slot.missed', 'slot.fired', 'slot.fired', 'slot.fired', 'slot.fired', 'slot.fired']);
    const byLoop = (name: string) => result.runs.filter((r: any) => r.loopName === name);
    expect(byLoop('latest')).toHaveLength(1);
    expect(byLoop('none')).toHaveLength(0);
    const all = byLoop('all');
    expect(all).toHaveLength(5);
    for (let i = 1; i < all.length; i++) expect(Date.parse(all[i].startedAt)).toBeGreaterThanOrEqual(Date.parse(all[i - 1].finishedAt));
    expect(result.runs.every((r: any) => r.status === 'succeeded' && r.trigger === 'schedule')).toBe(true);
    // A second pass at the same time decides nothing again.
    expect(JSON.parse(s.run(['tick', '--json'], later).stdout).decisions).toEqual([]);
    for (const run of result.runs) expect(s.run(['replay', run.id]).code).toBe(0);
    for (const name of ['latest', 'none', 'all']) expect(s.run(['replay', name]).code).toBe(0);
    expect(s.run(['projections', 'verify']).code).toBe(0);
  });

  it('why explains a fired, a coalesced and a missed slot from the log', () => {
    const recent = s.json<any[]>(['why', 'latest'], later);
    expect(recent.map((d) => d.decision)).toEqual(['fired', 'coalesced']);
    const fired = recent[0];
    expect(s.json(['why', 'latest', '--at', fired.from], later).explanation).toMatch(
      new RegExp(`the slot ${fired.from} fired as run ${fired.runId}, caught up after missed slots; the run succeeded`),
    );
    expect(s.json(['why', 'latest', '--at', recent[1].to], later).explanation).toMatch(
      /was missed \(nothing was scheduling when it came due\) and folded with 70 other missed slot\(s\) into the single catch-up run/,
    );
    expect(s.json(['why', 'none', '--at', recent[1].to], later).explanation).toMatch(/was not run: catch-up none \(72 slot\(s\)/);
    const table = s.run(['why', 'all'], later);
    expect(table.stdout).toMatch(/missed\s+outside catch-up window/);
    expect(s.json(['why', 'latest', '--at', '2001-01-01T00:00Z']).explanation).toMatch(/did not exist yet/);
  });

  it('why explains a slot that came due while the loop was paused; nothing was caught up after resume', () => {
    s.json(['create', 'command', 'napper', '--cmd', 'true', '--every', '1h']);
    s.json(['pause', 'napper', '--reason', 'lunch']);
    const during = new Date(Date.now() + 2 * HOUR + 60_000).toISOString();
    expect(s.json(['why', 'napper', '--at', during], later).explanation).toMatch(/was not run: the loop was paused at .* \(lunch\)/);
    s.json(['resume', 'napper'], later);
    expect(JSON.parse(s.run(['tick', '--json'], later).stdout).decisions.filter((d: any) => d.loopName === 'napper')).toEqual([]);
  });

  it('a one-shot resumed after its instant passed while it was paused expires at once and says so; run-now refuses it', () => {
    const at = new Date(Date.now() + HOUR).toISOString();
    const after = { LOOPS_NOW: new Date(Date.now() + 2 * HOUR).toISOString() };
    s.json(['create', 'command', 'once', '--cmd', 'true', '--at', at]);
    s.json(['pause', 'once']);
    const r = s.run(['resume', 'once'], after);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Resumed loop once \(loop_\w+\)\nit has expired at once: its last slot passed while it was not active, and such slots are not run late\n$/);
    expect(s.json(['show', 'once'], after)).toMatchObject({ status: 'expired', nextRunAt: null });
    expect(s.run(['run-now', 'once'], after).code).toBe(2);
    // A paused one-shot resumed before its instant stays scheduled for it.
    s.json(['create', 'command', 'soon', '--cmd', 'true', '--at', at]);
    s.json(['pause', 'soon']);
    expect(s.json(['resume', 'soon'])).toMatchObject({ status: 'active', nextRunAt: at });
  });

  it('LOOPS_NOW that is not a time is a usage error', () => {
    const r = s.run(['tick'], { LOOPS_NOW: 'tomorrow' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/LOOPS_NOW: "tomorrow" is not an ISO-8601 time/);
  });
});

describe('timeouts and cancellation kill the whole process group', () => {
  const s = sandbox();

  it('sleep 30 with --timeout 1s is timed_out within a few seconds (exit 4)', () => {
    s.json(['create', 'command', 'slow', '--cmd', 'sleep 30', '--timeout', '1s', '--manual']);
    const started = Date.now();
    const r = s.run(['run-now', 'slow']);
    expect(r.code).toBe(4);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(s.json(['runs', 'slow'])[0]).toMatchObject({ status: 'timed_out', signal: 'SIGTERM', exitCode: null });
  });

  it('a command that ignores SIGTERM is SIGKILLed after the grace period, descendants included', () => {
    const pidFile = join(s.dataDir, 'child.pid');
    s.json(['create', 'command', 'stubborn', '--no-shell', '--cmd', join(FIXTURES, 'ignore-term.sh'), '--arg', pidFile, '--timeout', '1s', '--kill-grace', '1s', '--manual']);
    const r = s.run(['run-now', 'stubborn']);
    expect(r.code).toBe(4);
    const [run] = s.json(['runs', 'stubborn']);
    expect(run).toMatchObject({ status: 'timed_out', signal: 'SIGKILL' });
    expect(run.error).toMatch(/timed out after 1s; process killed by SIGKILL/);
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    expect(pidAlive(run.pid)).toBe(false);
    expect(pidAlive(grandchild)).toBe(false);
  });

  it('Ctrl-C (SIGINT) cancels the run: exit 5, status cancelled, group killed', async () => {
    const pidFile = join(s.dataDir, 'child2.pid');
    s.json(['create', 'command', 'interrupt-me', '--no-shell', '--cmd', join(FIXTURES, 'ignore-term.sh'), '--arg', pidFile, '--kill-grace', '500ms', '--manual']);
    const proc = s.start(['run-now', 'interrupt-me', '--show-output']);
    await proc.waitForOutput(/started/);
    proc.child.kill('SIGINT');
    const result = await proc.exited;
    expect(result.code).toBe(5);
    const [run] = s.json(['runs', 'interrupt-me']);
    expect(run).toMatchObject({ status: 'cancelled', error: 'cancelled: interrupted by SIGINT' });
    expect(pidAlive(Number(readFileSync(pidFile, 'utf8')))).toBe(false);
    expect(s.run(['replay', run.id]).code).toBe(0);
  });
});

describe('bad input: one clear line, exit 2, nothing appended', () => {
  const s = sandbox();
  beforeAll(() => {
    s.json(['create', 'command', 'taken', '--cmd', 'true', '--manual']);
  });

  it.each([
    ['unknown flag', ['create', 'command', 'x', '--cmd', 'true', '--manual', '--frobnicate'], /unknown option --frobnicate/],
    ['missing --cmd', ['create', 'command', 'x', '--manual'], /--cmd is required/],
    ['no schedule', ['create', 'command', 'x', '--cmd', 'true'], /a schedule is required/],
    ['two schedules', ['create', 'command', 'x', '--cmd', 'true', '--every', '5m', '--manual'], /only one schedule, got --every and --manual/],
    ['invalid cron', ['create', 'command', 'x', '--cmd', 'true', '--cron', '61 * * * *'], /--cron: invalid expression/],
    ['cron that never fires', ['create', 'command', 'x', '--cmd', 'true', '--cron', '0 0 31 2 *'], /--cron: "0 0 31 2 \*" never fires/],
    ['--anchor without --every', ['create', 'command', 'x', '--cmd', 'true', '--cron', '0 3 * * *', '--anchor', 'fixed-delay'], /--anchor is only used with --every/],
    ['unknown --anchor', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--anchor', 'sometimes'], /--anchor: unknown value "sometimes"/],
    ['jitter as long as the interval', ['create', 'command', 'x', '--cmd', 'true', '--every', '1m', '--jitter', '1m'], /--jitter \(1m\) must be shorter than --every \(1m\)/],
    ['--expires-at in the past', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--expires-at', '2001-01-01'], /--expires-at: 2001-01-01 is in the past/],
    ['--expires-at before --starts-at', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--starts-at', '2099-01-02', '--expires-at', '2099-01-01'], /must be after --starts-at/],
    ['bad --max-runs', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--max-runs', '0'], /--max-runs must be a positive whole number/],
    ['timing flag on --manual', ['create', 'command', 'x', '--cmd', 'true', '--manual', '--max-runs', '3'], /--max-runs has no effect on a --manual loop/],
    ['bad --count (next)', ['next', 'taken', '-n', 'lots'], /--count must be a positive whole number/],
    ['cron jitter longer than its gap', ['create', 'command', 'x', '--cmd', 'true', '--cron', '*/5 * * * *', '--jitter', '10m'], /--jitter \(10m\) must be shorter than the shortest gap between two slots of --cron \(300s\)/],
    ['jitter with fixed-delay', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--anchor', 'fixed-delay', '--jitter', '1m'], /--jitter does not apply to --anchor fixed-delay/],
    ['--backoff without --attempts', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--backoff', '2'], /--backoff has no effect without --attempts 2 or more/],
    ['bad --attempts', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--attempts', 'many'], /--attempts must be a positive whole number/],
    ['bad --backoff', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--attempts', '3', '--backoff', '0.5'], /--backoff must be a number of at least 1/],
    ['max retry delay below the delay', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--attempts', '3', '--retry-delay', '5m', '--max-retry-delay', '1m'], /--max-retry-delay must not be shorter than --retry-delay/],
    ['--lease too short', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--lease', '1s'], /--lease must be at least 3s/],
    ['unknown --overlap', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--overlap', 'queue'], /--overlap: unknown policy "queue"/],
    ['unknown --catch-up', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--catch-up', 'some'], /--catch-up: unknown policy "some"/],
    ['--catch-up-limit without all', ['create', 'command', 'x', '--cmd', 'true', '--every', '1h', '--catch-up-limit', '3'], /--catch-up-limit only applies to --catch-up all/],
    ['bad --at (why)', ['why', 'taken', '--at', 'yesterday'], /--at: invalid time "yesterday"/],
    ['cron with too few fields', ['create', 'command', 'x', '--cmd', 'true', '--cron', '* *'], /has 2 field\(s\)/],
    ['invalid duration', ['create', 'command', 'x', '--cmd', 'true', '--every', 'soon'], /--every: invalid duration "soon"/],
    ['invalid timeout', ['create', 'command', 'x', '--cmd', 'true', '--manual', '--timeout', '10 s'], /--timeout: invalid duration "10 s"/],
    ['--at in the past', ['create', 'command', 'x', '--cmd', 'true', '--at', '2001-01-01T00:00Z'], /--at: .* is in the past/],
    ['bad time zone', ['create', 'command', 'x', '--cmd', 'true', '--cron', '0 3 * * *', '--tz', 'Mars/Olympus'], /unknown time zone/],
    ['missing cwd', ['create', 'command', 'x', '--cmd', 'true', '--manual', '--cwd', '/does/not/exist'], /--cwd: directory \/does\/not\/exist does not exist/],
    ['name taken', ['create', 'command', 'taken', '--cmd', 'true', '--manual'], /a loop named "taken" already exists/],
    ['bad name', ['create', 'command', 'no spaces please', '--cmd', 'true', '--manual'], /invalid loop name/],
    ['bad env', ['create', 'command', 'x', '--cmd', 'true', '--manual', '--env', 'NOVALUE'], /--env "NOVALUE" is not KEY=VALUE/],
    ['--arg without --no-shell', ['create', 'command', 'x', '--cmd', 'echo', '--arg', 'a', '--manual'], /--arg is only used with --no-shell/],
    ['flag as value', ['create', 'command', 'x', '--cmd', '--manual'], /--cmd needs a value/],
    ['value starting with a dash', ['create', 'command', 'x', '--cmd', 'true', '--every', '-5s'], /--every: invalid duration "-5s"/],
    ['negative count written with =', ['prune', '--keep-last=-1'], /--keep-last must be a whole number of runs, got "-1"/],
    ['unknown loop (show)', ['show', 'nope'], /no loop named or with id "nope"/],
    ['unknown loop (run-now)', ['run-now', 'nope'], /no loop named or with id "nope"/],
    ['unknown loop (pause)', ['pause', 'nope'], /no loop named or with id "nope"/],
    ['unknown loop (runs)', ['runs', 'nope'], /no loop named or with id "nope"/],
    ['unknown run (replay)', ['replay', 'run_nope'], /no run with id "run_nope"/],
    ['unknown run (events)', ['events', 'run_nope'], /no run with id "run_nope"/],
    ['bad --limit', ['runs', '--limit', 'many'], /--limit must be a positive whole number/],
    ['unknown command', ['frobnicate'], /unknown command "frobnicate"/],
    ['missing subcommand', ['projections'], /missing subcommand/],
  ])('%s', (_name, args, message) => {
    const before = s.eventCount();
    const r = s.run(args as string[]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message as RegExp);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(s.eventCount()).toBe(before);
  });

  it('LOOPS_DEBUG=1 adds the stack trace', () => {
    const r = s.run(['show', 'nope'], { LOOPS_DEBUG: '1' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\n\s+at /);
  });
});

describe('create preflight: the command must be found on the effective PATH', () => {
  const s = sandbox();
  const bin = mkdtempSync(join(tmpdir(), 'loops-e2e-bin-'));
  const dir = mkdtempSync(join(tmpdir(), 'loops-e2e-cwd-'));
  afterAll(() => [bin, dir].forEach((d) => rmSync(d, { recursive: true, force: true })));
  writeFileSync(join(bin, 'my-tool'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const PATH = `${bin}${delimiter}/usr/bin${delimiter}/bin`;
  const env = { PATH };
  beforeAll(() => {
    s.json(['create', 'command', 'first', '--cmd', 'true', '--manual'], env);
  });

  /** Fails with exit 2 and one line on stderr; nothing is appended and no loop appears. */
  function refused(args: string[], extra: Record<string, string> = env): string {
    const before = s.eventCount();
    const names = s.json<any[]>(['list'], env).map((l) => l.name);
    const r = s.run(args, extra);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(s.eventCount()).toBe(before);
    expect(s.json<any[]>(['list'], env).map((l) => l.name)).toEqual(names);
    return r.stderr;
  }

  it('a shell command whose first word is not installed is refused, naming the PATH searched', () => {
    const err = refused(['create', 'command', 'missing', '--cmd', 'definitely-not-installed-xyz --flag', '--every', '1h']);
    expect(err).toContain(`--cmd: command not found: definitely-not-installed-xyz (searched PATH=${PATH}`);
    expect(err).toContain('install definitely-not-installed-xyz, or give its absolute path, or pass --no-preflight');
    expect(s.db().prepare("SELECT COUNT(*) AS n FROM events WHERE data LIKE '%definitely-not-installed-xyz%'").get()).toEqual({ n: 0 });
  });

  it('--no-preflight creates it anyway; its run then fails', () => {
    const created = s.json(['create', 'command', 'later', '--cmd', 'definitely-not-installed-xyz --flag', '--manual', '--no-preflight'], env);
    expect(created).toMatchObject({ name: 'later', target: { command: 'definitely-not-installed-xyz --flag', shell: true } });
    expect(s.json<any[]>(['list'], env).map((l) => l.name)).toContain('later');
    expect(s.run(['run-now', 'later'], env).code).toBe(3);
  });

  it('an argv command (--no-shell) must be found too', () => {
    const err = refused(['create', 'command', 'argv', '--no-shell', '--cmd', 'nope-xyz', '--arg', 'a', '--manual']);
    expect(err).toContain(`--cmd: command not found: nope-xyz (searched PATH=${PATH}`);
    expect(s.run(['create', 'command', 'argv', '--no-shell', '--cmd', 'nope-xyz', '--manual', '--no-preflight'], env).code).toBe(0);
  });

  it('builtins, keywords and dynamic first words need only the shell', () => {
    for (const [name, cmd] of [
      ['assign', 'FOO=1 true && echo'],
      ['cd', 'cd / && definitely-not-installed-xyz'],
      ['dynamic', '$TOOL run'],
      ['keyword', 'if true; then echo; fi'],
    ]) {
      const r = s.run(['create', 'command', name!, '--cmd', cmd!, '--manual'], env);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(0);
    }
  });

  it('the PATH decides: a tool found only in a directory on PATH', () => {
    expect(s.run(['create', 'command', 'tool', '--cmd', 'my-tool --flag', '--manual'], env).code).toBe(0);
    expect(s.run(['run-now', 'tool'], env).code).toBe(0);
    const err = refused(['create', 'command', 'tool2', '--cmd', 'nice -n 5 my-tool', '--manual'], { PATH: `/usr/bin${delimiter}/bin` });
    expect(err).toContain('--cmd: command not found: my-tool (searched PATH=/usr/bin:/bin');
    // An absolute path needs no PATH.
    expect(s.run(['create', 'command', 'tool3', '--cmd', join(bin, 'my-tool'), '--manual'], { PATH: `/usr/bin${delimiter}/bin` }).code).toBe(0);
  });

  it('a relative path is looked up in --cwd', () => {
    writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
    writeFileSync(join(dir, 'plain.sh'), '#!/bin/sh\n', { mode: 0o644 });
    expect(s.run(['create', 'command', 'rel', '--cmd', './run.sh --x', '--cwd', dir, '--manual'], env).code).toBe(0);
    expect(refused(['create', 'command', 'rel2', '--cmd', './gone.sh', '--cwd', dir, '--manual'])).toContain(`--cmd: command not found: ./gone.sh (no file ${join(dir, 'gone.sh')})`);
    expect(refused(['create', 'command', 'rel3', '--no-shell', '--cmd', './plain.sh', '--cwd', dir, '--manual'])).toContain(`chmod +x ${join(dir, 'plain.sh')}`);
  });

  it('create agent --no-preflight skips the CLI-installed and account checks, not the argument checks', () => {
    const bare = { PATH: `/usr/bin${delimiter}/bin`, HOME: bin };
    const err = refused(['create', 'agent', 'ag', '--provider', 'codewith', '--prompt', 'x', '--manual'], bare);
    expect(err).toMatch(/the codewith CLI \(codewith\) is not installed: not found on PATH=\/usr\/bin:\/bin.*--no-preflight/);
    const withFakes = { PATH: `${join(FIXTURES, 'agents')}${delimiter}/usr/bin${delimiter}/bin`, HOME: bin };
    expect(refused(['create', 'agent', 'ag', '--provider', 'claude', '--prompt', 'x', '--account', 'ghost', '--manual'], withFakes)).toMatch(/account ghost/);
    expect(s.run(['create', 'agent', 'ag', '--provider', 'codewith', '--prompt', 'x', '--manual', '--no-preflight'], bare).code).toBe(0);
    expect(s.run(['create', 'agent', 'ag2', '--provider', 'claude', '--prompt', 'x', '--account', 'ghost', '--manual', '--no-preflight'], withFakes).code).toBe(0);
    // The adapter still refuses what its CLI would.
    expect(refused(['create', 'agent', 'ag3', '--provider', 'claude', '--prompt', 'x', '--model=-x', '--manual', '--no-preflight'], bare)).toMatch(
      /^loops: --model "-x" starts with "-" and would be read as a flag \(provider claude\)/,
    );
  });

  it('doctor and workflows validate --preflight use the same check: the first word of shell text too', () => {
    const d = sandbox();
    expect(d.run(['create', 'command', 'uses-tool', '--cmd', 'FOO=1 my-tool --flag > out.log', '--manual'], env).code).toBe(0);
    const bare = { PATH: `/usr/bin${delimiter}/bin` };
    const report = JSON.parse(d.run(['doctor', '--json'], env).stdout) as { checks: Array<{ id: string; status: string; detail: string; hint?: string }> };
    expect(report.checks.find((c) => c.id === 'loop:uses-tool')).toMatchObject({ status: 'ok' });
    const after = d.run(['doctor', '--json'], bare);
    expect(after.code).toBe(1);
    const failed = (JSON.parse(after.stdout) as typeof report).checks.find((c) => c.id === 'loop:uses-tool');
    expect(failed).toMatchObject({ status: 'fail', hint: 'install my-tool, or give its absolute path' });
    expect(failed!.detail).toMatch(/^command not found: my-tool \(searched PATH=\/usr\/bin:\/bin/);

    const spec = join(dir, 'steps.yaml');
    writeFileSync(
      spec,
      'name: steps\nsteps:\n  - id: a\n    run: my-tool --flag | tee log\n  - id: b\n    run: \'"$TOOL" --x\'\n    env: { TOOL: whatever-xyz }\n  - id: c\n    run: cd / && whatever-xyz\n',
    );
    expect(d.run(['workflows', 'validate', spec, '--preflight'], env).code).toBe(0);
    const v = d.run(['workflows', 'validate', spec, '--preflight'], bare);
    expect(v.code).toBe(1);
    expect(v.stderr).toMatch(/step "a": command: command not found: my-tool \(searched PATH=\/usr\/bin:\/bin/);
    expect(v.stderr).not.toMatch(/step "[bc]"/);
  });

  it('create workflow has no --no-preflight', () => {
    const r = s.run(['create', 'workflow', 'wf', '--workflow', 'x', '--manual', '--no-preflight'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown option --no-preflight/);
  });
});

describe('loops daemon logs -f', () => {
  it('prints lines as they are appended to the log, and ends on Ctrl-C', async () => {
    const s = sandbox();
    s.run(['list']);
    writeFileSync(join(s.dataDir, 'daemon.log'), 'first\n');
    const follow = s.start(['daemon', 'logs', '-f']);
    await follow.waitForOutput(/first/);
    appendFileSync(join(s.dataDir, 'daemon.log'), 'second line\n');
    await follow.waitForOutput(/second line/);
    follow.child.kill('SIGINT');
    const result = await follow.exited;
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('first\nsecond line\n');
  });
});

describe('loops daemon install', () => {
  it('writes a systemd user unit for this data directory and prints how to enable it; --dry-run writes nothing', () => {
    const s = sandbox();
    const home = join(s.dataDir, 'home');
    const dry = s.json(['daemon', 'install', '--dry-run'], { HOME: home });
    expect(dry).toMatchObject({ kind: 'systemd', written: false, path: join(home, '.config/systemd/user/loops.service') });
    expect(existsSync(dry.path)).toBe(false);
    const r = s.run(['daemon', 'install'], { HOME: home });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('systemctl --user enable --now loops.service');
    const unit = readFileSync(dry.path, 'utf8');
    expect(unit).toContain(`Environment="LOOPS_DATA_DIR=${s.dataDir}"`);
    expect(unit).toMatch(/^ExecStart=".*node" ".*dist\/cli\/main\.js" "daemon" "run"$/m);
  });
});

describe('the data directory', () => {
  it('is 0700 with a 0600 database, and a newer log format is refused with a clear message', () => {
    const s = sandbox();
    expect(s.run(['list']).code).toBe(0);
    expect(statSync(s.dataDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(s.dataDir, 'loops.db')).mode & 0o777).toBe(0o600);
    const db = s.db();
    db.pragma('user_version = 99');
    db.close();
    const r = s.run(['list']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/uses log format 99, but this loops understands only up to 2/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
