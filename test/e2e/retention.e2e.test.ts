/**
 * Retention through the built binary:
 *  - `loops prune`: its errors (nothing selected, a bad --older-than / --keep-last), --dry-run
 *    (lists, removes and records nothing), a real prune with --json (the folders go, the newest
 *    kept), then what the other commands say of a pruned run (logs, logs -f, logs --json, show,
 *    runs --json), the facts on `retention:output` (events, replay), verify and the invariants;
 *  - daemon.log rotation: a daemon started with a 1 KiB cap (LOOPS_DAEMON_LOG_MAX_BYTES) and chatty
 *    loops rotates its log to daemon.log.1 (.2, .3), keeps logging to daemon.log, and
 *    `loops daemon logs -f` follows across the rotations, every line once.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { waitFor } from '../helpers/wait.js';
import { pidAlive, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
const children: Array<{ kill(signal?: NodeJS.Signals): boolean; exitCode: number | null }> = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

interface Run {
  id: string;
  status: string;
  finishedAt: string | null;
  outputPrunedAt: string | null;
}

const DAY = 86_400_000;
const T0 = Date.parse('2026-05-01T09:00:00.000Z');
const now = (ms: number) => ({ LOOPS_NOW: new Date(T0 + ms).toISOString() });

describe('loops prune', () => {
  const s = sandbox();
  const runIds: string[] = [];

  it('refuses to guess: no --older-than nor --keep-last, or a bad value, is exit 2 with one line and removes nothing', () => {
    expect(s.run(['create', 'command', 'job', '--cmd', 'echo "hello from $LOOPS_RUN_ID"; echo warn >&2', '--manual'], now(0)).code).toBe(0);
    for (let day = 0; day < 3; day++) {
      const r = s.run(['run-now', 'job'], now(day * DAY));
      expect(r.code, r.stderr).toBe(0);
    }
    runIds.push(...s.json<Run[]>(['runs', 'job']).map((r) => r.id).reverse());
    expect(runIds).toHaveLength(3);

    const none = s.run(['prune']);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(
      'loops prune: say what to prune: --older-than <duration>, --keep-last <n>, or both; e.g. loops prune --older-than 30d --keep-last 10 --dry-run (nothing is pruned without one of them)\n',
    );
    const bad = s.run(['prune', '--older-than', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loops prune: --older-than: "soon" is neither a duration nor a time; give how long ago/);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    const future = s.run(['prune', '--older-than', '2099-01-01'], now(3 * DAY));
    expect(future.code).toBe(2);
    expect(future.stderr).toMatch(/is in the future/);
    const keep = s.run(['prune', '--keep-last', '-1']);
    expect(keep.code).toBe(2);
    expect(s.run(['prune', '--help']).stdout).toContain('Usage: loops prune');
    for (const id of runIds) expect(existsSync(join(s.dataDir, 'runs', id))).toBe(true);
  });

  it('--dry-run lists what would go and the bytes, and removes and records nothing', () => {
    const events = s.eventCount();
    const dry = s.run(['prune', '--older-than', '1d', '--dry-run'], now(2 * DAY + 3_600_000));
    expect(dry.code, dry.stderr).toBe(0);
    // Finished a day before now or earlier: the runs of day 0 and day 1.
    expect(dry.stdout).toContain(runIds[0]);
    expect(dry.stdout).toContain(runIds[1]);
    expect(dry.stdout).not.toContain(runIds[2]);
    expect(dry.stdout).toMatch(/Would prune 2 runs \(1 loop\), finished before 2026-05-02T10:00:00\.000Z: [\d.]+ (B|KiB)\. Dry run: nothing was removed\./);
    const json = s.json<{ dryRun: boolean; pruned: number; bytes: number; runs: Array<{ id: string; bytes: number }> }>(
      ['prune', '--older-than', '1d', '--dry-run'],
      now(2 * DAY + 3_600_000),
    );
    expect(json).toMatchObject({ dryRun: true, pruned: 2, cutoff: '2026-05-02T10:00:00.000Z', keepLast: null });
    expect(json.bytes).toBe(json.runs.reduce((n, r) => n + r.bytes, 0));
    expect(json.bytes).toBeGreaterThan(0);
    for (const id of runIds) expect(existsSync(join(s.dataDir, 'runs', id))).toBe(true);
    expect(s.eventCount()).toBe(events);
  });

  it('--older-than 0s --keep-last 1 --json: every finished run but the newest goes; each removal is a fact in the log', () => {
    const report = s.json<{ dryRun: boolean; pruned: number; bytes: number; runs: Array<{ id: string }>; failed: unknown[] }>(
      ['prune', '--older-than', '0s', '--keep-last', '1'],
      now(3 * DAY),
    );
    expect(report).toMatchObject({ dryRun: false, pruned: 2, failed: [] });
    expect(report.runs.map((r) => r.id)).toEqual([runIds[0], runIds[1]]);
    expect(existsSync(join(s.dataDir, 'runs', runIds[0]!))).toBe(false);
    expect(existsSync(join(s.dataDir, 'runs', runIds[1]!))).toBe(false);
    expect(existsSync(join(s.dataDir, 'runs', runIds[2]!))).toBe(true);

    const list = s.json<Run[]>(['runs', 'job']);
    const byId = new Map(list.map((r) => [r.id, r]));
    const prunedAt = new Date(T0 + 3 * DAY).toISOString().slice(0, 16);
    expect(byId.get(runIds[0]!)!.outputPrunedAt?.slice(0, 16)).toBe(prunedAt);
    expect(byId.get(runIds[2]!)!.outputPrunedAt).toBeNull();

    const events = s.json<Array<{ type: string; data: { runId: string; bytes: number; keepLast: number | null } }>>(['events', 'retention:output']);
    expect(events.map((e) => [e.type, e.data.runId, e.data.keepLast])).toEqual([
      ['run.output_pruned', runIds[0], 1],
      ['run.output_pruned', runIds[1], 1],
    ]);
    expect(events.reduce((n, e) => n + e.data.bytes, 0)).toBe(report.bytes);
    expect(s.run(['replay', 'retention:output']).code).toBe(0);
    const verify = s.run(['projections', 'verify']);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expectDataDirInvariants(s.dataDir);

    // Nothing left to prune: said so, exit 0.
    const again = s.run(['prune', '--older-than', '0s', '--keep-last', '1'], now(3 * DAY));
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^Nothing to prune: no finished run with output finished before \S+, keeping the last 1 of each loop and workflow\.\n$/);
  });

  it('logs, show and runs say that a run\'s output was pruned, and when', () => {
    const id = runIds[0]!;
    const logs = s.run(['logs', id]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toBe('');
    expect(logs.stderr).toMatch(new RegExp(`^loops: the output of run ${id} was pruned on 2026-05-04T09:\\d\\d:\\S+Z \\(loops prune\\); its summary and events remain: loops show ${id}\\n$`));
    // Following a pruned run: the same line, and its outcome as the exit code.
    const follow = s.run(['logs', id, '-f']);
    expect(follow.code).toBe(0);
    expect(follow.stderr).toContain('was pruned on');
    const json = s.json<{ outputPrunedAt: string | null; stdout: { files: string[]; text: string } }>(['logs', id]);
    expect(json.outputPrunedAt).toMatch(/^2026-05-04T09:/);
    expect(json.stdout).toMatchObject({ files: [], text: '' });
    // The kept run still prints its output.
    expect(s.run(['logs', runIds[2]!, '--stdout']).stdout).toBe(`hello from ${runIds[2]}\n`);

    const show = s.run(['show', id]);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/files\s+pruned on 2026-05-04T09:\S+ \(loops prune\)/);
    // The tails recorded with the run's end are in the log, not in the folder: still shown.
    expect(show.stdout).toContain(`hello from ${id}`);
  });
});

/** A sandbox whose real daemon (`daemon run`) runs a loop `fast` every second; `count`: its succeeded runs so far. */
function fastLoopUnderDaemon() {
  const d = sandbox();
  const daemon = d.start(['daemon', 'run']);
  children.push(daemon.child);
  expect(d.run(['create', 'command', 'fast', '--cmd', 'echo fast', '--every', '1s']).code).toBe(0);
  const count = () => d.json<Run[]>(['runs', 'fast', '--limit', '1000']).filter((r) => r.status === 'succeeded').length;
  return { d, count };
}

describe('loops prune --archive', () => {
  const s = sandbox();
  const runIds: string[] = [];
  let file = '';

  it('moves the older runs\' events to a 0600 archive file; each run keeps its row and one stream.archived', () => {
    expect(s.run(['create', 'command', 'kept', '--cmd', 'echo "kept $LOOPS_RUN_ID"', '--manual']).code).toBe(0);
    for (let i = 0; i < 3; i++) expect(s.run(['run-now', 'kept']).code).toBe(0);
    runIds.push(...s.json<Run[]>(['runs', 'kept']).map((r) => r.id).reverse());
    const dry = s.run(['prune', '--keep-last', '1', '--archive', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('Would archive the events of 2 runs (8 events), keeping the last 1 of each loop and workflow. Dry run: nothing was archived.');
    expect(existsSync(join(s.dataDir, 'archive'))).toBe(false);

    const report = s.json<{ pruned: number; archive: { file: string; sha256: string; events: number; streams: Array<{ runId: string }>; skipped: unknown[] } }>(
      ['prune', '--keep-last', '1', '--archive'],
    );
    expect(report.pruned).toBe(2);
    expect(report.archive).toMatchObject({ events: 8, skipped: [] });
    expect(report.archive.streams.map((r) => r.runId)).toEqual([runIds[0], runIds[1]]);
    file = report.archive.file;
    expect(statSync(join(s.dataDir, file)).mode & 0o777).toBe(0o600);

    const events = s.json<Array<{ type: string; version: number }>>(['events', runIds[0]!]);
    expect(events.map((e) => [e.type, e.version])).toEqual([['stream.archived', 5]]);
    // What users read about the run is unchanged, and says where its events went.
    const show = s.run(['show', runIds[0]!]);
    // Its output tails went with its events (the sizes stay).
    expect(show.stdout).not.toContain(`kept ${runIds[0]}`);
    expect(show.stdout).toMatch(/output\s+stdout \d+ B/);
    expect(show.stdout).toMatch(new RegExp(`events\\s+archived on \\S+ with the output tails \\(loops prune --archive\\): loops replay ${runIds[0]} --archive`));
    expect(s.run(['show', 'kept']).stdout).toMatch(/runs\s+3\n/);
    expect(s.run(['logs', runIds[0]!]).stderr).toContain('its summary remains (its events were archived)');
    const verify = s.run(['projections', 'verify']);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expectDataDirInvariants(s.dataDir);

    // Once something is archived the log format is 2 (a loops that reads only 1 refuses it).
    const doctor = s.run(['doctor']);
    expect(doctor.stdout).toMatch(/log format\s+version 2 \(this loops reads up to 2\)/);
  });

  it('replay says where the archived versions went; --archive replays them from the file, and refuses a changed one', () => {
    const replay = s.run(['replay', runIds[0]!]);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toContain(`v1–v4  4 event(s) archived to ${file}`);
    const full = s.run(['replay', runIds[0]!, '--archive']);
    expect(full.code, full.stderr).toBe(0);
    expect(full.stdout).toMatch(/✓ v1 .* run\.claimed  new → claimed/);
    expect(full.stdout).toMatch(/✓ v5 .* stream\.archived  succeeded → succeeded/);
    expect(full.stdout).toContain('ok: every replayed state matches the log');
    const notArchived = s.run(['replay', runIds[2]!, '--archive']);
    expect(notArchived.code).toBe(2);
    expect(notArchived.stderr).toMatch(/is not archived: its whole history is in the log/);

    const path = join(s.dataDir, file);
    const moved = join(s.dataDir, 'moved.jsonl');
    writeFileSync(moved, readFileSync(path));
    expect(s.run(['replay', runIds[0]!, '--archive-file', moved]).code).toBe(0);
    writeFileSync(moved, readFileSync(path, 'utf8').replace(`kept ${runIds[0]}`, `kept ${runIds[0]}!`));
    const changed = s.run(['replay', runIds[0]!, '--archive-file', moved]);
    expect(changed.code).toBe(6);
    expect(changed.stderr).toMatch(/is not the file run:\S+ was archived to: its sha256 is/);
    expect(changed.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('archiving while the daemon runs a loop every second: nothing lost, nothing run twice, the daemon keeps its pace and stops promptly', async () => {
    const { d, count } = fastLoopUnderDaemon();
    await waitFor(() => count() >= 4, 20_000, '4 runs');
    let archived = 0;
    for (let round = 0; round < 3; round++) {
      const before = count();
      const r = d.json<{ archive: { streams: unknown[]; skipped: unknown[] } }>(['prune', '--keep-last', '2', '--archive']);
      archived += r.archive.streams.length;
      await waitFor(() => count() >= before + 2, 20_000, `the daemon to go on running after archive round ${round}`);
    }
    expect(archived).toBeGreaterThanOrEqual(6);
    // A full vacuum rewrites loops.db under the write lock: refused while the daemon runs, and it has no dry run.
    const busy = d.run(['prune', '--vacuum']);
    expect(busy.code).toBe(2);
    expect(busy.stderr).toMatch(/^loops prune: --vacuum needs the daemon stopped \(pid \d+ is running\)/);
    expect(d.run(['prune', '--vacuum', '--dry-run']).code).toBe(2);
    const asked = Date.now();
    const stop = d.run(['daemon', 'stop']);
    expect(stop.code, stop.stderr).toBe(0);
    expect(Date.now() - asked).toBeLessThan(5000);
    const list = d.json<Run[]>(['runs', 'fast', '--limit', '1000']);
    const slots = list.map((r) => (r as Run & { slot: string }).slot);
    expect(new Set(slots).size).toBe(slots.length);
    expectDataDirInvariants(d.dataDir, { settledAt: asked });
    const vacuum = d.run(['prune', '--vacuum']);
    expect(vacuum.code, vacuum.stderr).toBe(0);
    expect(vacuum.stdout).toMatch(/^Vacuumed loops\.db: \S+ \S+ given back to the disk/);
    expectDataDirInvariants(d.dataDir, { settledAt: asked });
  });
});

describe('loops backup and restore', () => {
  it('backs up while the daemon runs a loop every second; restore refuses the live store and restores into an empty one', async () => {
    const { d, count } = fastLoopUnderDaemon();
    await waitFor(() => count() >= 3, 20_000, '3 runs');
    const file = join(sandbox().dataDir, 'copy.db');
    const b = d.run(['backup', file]);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toMatch(new RegExp(`^Backed up \\d+ events to ${file} \\(\\S+ \\S+, log format 1, integrity ok\\)\\.\n$`));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const busy = d.run(['restore', file]);
    expect(busy.code).toBe(2);
    expect(busy.stderr).toMatch(/^loops restore: a daemon \(pid \d+\) is running on /);
    expect(d.run(['backup', file]).code).toBe(2);
    const before = count();
    await waitFor(() => count() >= before + 2, 20_000, 'the daemon to go on running');
    expect(d.run(['daemon', 'stop']).code).toBe(0);

    const fresh = sandbox();
    const r = fresh.run(['restore', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Restored \d+ events from /);
    expect(fresh.run(['projections', 'verify']).code).toBe(0);
    const restored = fresh.json<Run[]>(['runs', 'fast', '--limit', '1000']);
    expect(restored.length).toBeGreaterThanOrEqual(3);
    expect(restored.length).toBeLessThan(d.json<Run[]>(['runs', 'fast', '--limit', '1000']).length);
    expectDataDirInvariants(fresh.dataDir);
  });
});

describe('daemon.log rotation', () => {
  it('a 1 KiB cap: the log rotates to daemon.log.1 (.2, .3), the daemon keeps logging, and daemon logs -f follows every line once', async () => {
    const s = sandbox();
    const env = { LOOPS_DAEMON_LOG_MAX_BYTES: '1024' };
    const badCap = s.run(['daemon', 'start'], { LOOPS_DAEMON_LOG_MAX_BYTES: 'lots' });
    expect(badCap.code).toBe(2);
    expect(badCap.stderr).toMatch(/^loops: LOOPS_DAEMON_LOG_MAX_BYTES: "lots" is not a size; /);

    for (const name of ['chatty-a', 'chatty-b', 'chatty-c']) {
      expect(s.run(['create', 'command', name, '--cmd', 'true', '--every', '1s']).code).toBe(0);
    }
    const log = join(s.dataDir, 'daemon.log');
    const follow = s.start(['daemon', 'logs', '-f']);
    children.push(follow.child);
    let printed = '';
    follow.child.stdout.on('data', (d: Buffer) => (printed += d.toString('utf8')));
    const start = s.run(['daemon', 'start'], env);
    expect(start.code, start.stderr).toBe(0);
    const pid = Number(/pid (\d+)/.exec(start.stdout)![1]);
    await waitFor(() => existsSync(`${log}.3`), 30_000, 'three rotations of daemon.log');
    for (const f of [log, `${log}.1`, `${log}.2`, `${log}.3`]) expect(statSync(f).size).toBeLessThanOrEqual(1024 + 512);
    expect(existsSync(`${log}.4`)).toBe(false);
    const status = s.run(['daemon', 'status', '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, healthy: true, pid });
    // Still logging into daemon.log after the rotations (not into a stale descriptor).
    const before = readFileSync(log, 'utf8');
    await waitFor(() => statSync(log).size > 0 && readFileSync(log, 'utf8') !== before, 10_000, 'new lines in daemon.log');
    const tail = s.run(['daemon', 'logs', '-n', '5']);
    expect(tail.code).toBe(0);
    expect(tail.stdout.replace(/\n$/, '').split('\n')).toHaveLength(5);

    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(pidAlive(pid)).toBe(false);
    // The follower printed every line once, in order: what the files still hold is the end of it.
    const kept = [`${log}.3`, `${log}.2`, `${log}.1`, log].map((f) => (existsSync(f) ? readFileSync(f, 'utf8') : '')).join('');
    await waitFor(() => printed.endsWith(kept), 10_000, 'the follower to print the end of the log');
    const lines = printed.replace(/\n$/, '').split('\n');
    expect(new Set(lines).size).toBe(lines.length);
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\S+Z /);
    expect(printed).toContain(`daemon started: pid ${pid}`);
    follow.child.kill('SIGINT');
    expect((await follow.exited).code).toBe(0);
  });
});
