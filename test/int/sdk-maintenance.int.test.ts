/**
 * The SDK covers the rest of the CLI: restore, prune (with archive and vacuum), the import of
 * `@hasna/loops` (its own database, rebuilt from the shared fixture's SQL text), the daemon's
 * status, start, stop and log (a real background daemon of the built `loops`), and the machines —
 * each the runtime function the CLI command calls — with one bad input each, a typed error.
 * Real SQLite files in temp directories; nothing waits on a timer.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { cliEntry } from '../../src/runtime/daemon/control.js';
import { AlreadyExistsError, LoopsError, NotFoundError, UsageError, ValidationError } from '../../src/sdk.js';
import { predecessorDatabase } from '../helpers/predecessor.js';
import { isAlive } from '../helpers/proc.js';
import { rejection, sdkClient } from '../helpers/sdk-client.js';
import { tempDir } from '../helpers/tmp.js';

const client = () => sdkClient({ prefix: 'loops-sdk-maint-', runnerId: 'sdk-maint:1:r' });

describe('LoopsClient: restore, prune, import, daemon, machines', () => {
  it('restore: a backup into an empty directory, refused over a log without force, kept beside with it; this client reopens', async () => {
    const { client: a, root } = client();
    await a.create({ name: 'kept', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    const file = join(root, 'backup.db');
    const backup = await a.backup(file);

    const { client: b } = client();
    const report = await b.restore(file);
    expect(report).toMatchObject({ file, events: backup.events, replaced: null });
    expect((await b.list()).map((l) => l.name)).toEqual(['kept']);

    // a holds its database open; restoring over it needs force, and a's next call sees the restored log.
    await a.create({ name: 'later', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    const refused = await rejection(a.restore(file));
    expect(refused).toBeInstanceOf(UsageError);
    expect(refused.message).toMatch(/already holds a log/);
    const forced = await a.restore(file, { force: true });
    expect(forced.replaced).toMatch(/loops\.db\.before-restore-/);
    expect(existsSync(forced.replaced!)).toBe(true);
    expect((await a.list()).map((l) => l.name)).toEqual(['kept']);

    // Bad input: a missing file, no path.
    const missing = await rejection(b.restore(join(root, 'nope.db')));
    expect(missing).toBeInstanceOf(UsageError);
    expect(missing.message).toMatch(/cannot open/);
    expect(await rejection(b.restore(''))).toBeInstanceOf(UsageError);
  });

  it('prune: a dry run lists, a prune removes and records, archive moves events, vacuum alone; UsageError without a rule', async () => {
    const { client: c, dataDir } = client();
    await c.create({ name: 'talk', schedule: { type: 'manual' }, target: { type: 'command', command: 'echo hello' } });
    const runs = [await c.runNow('talk'), await c.runNow('talk'), await c.runNow('talk')];
    const folders = () => readdirSync(join(dataDir, 'runs')).sort();
    expect(folders()).toEqual(runs.map((r) => r.id).sort());

    const dry = await c.prune({ keepLast: 1, dryRun: true });
    expect(dry.prune).toMatchObject({ dryRun: true, keepLast: 1, pruned: 2 });
    expect(dry.prune!.runs.map((r) => r.id).sort()).toEqual([runs[0]!.id, runs[1]!.id].sort());
    expect(dry.archive).toBeNull();
    expect(folders()).toHaveLength(3);

    const done = await c.prune({ keepLast: '1', archive: true });
    expect(done.prune).toMatchObject({ dryRun: false, pruned: 2, failed: [] });
    expect(done.archive).toMatchObject({ dryRun: false });
    expect(done.archive!.streams.map((s) => s.streamId).sort()).toEqual([`run:${runs[0]!.id}`, `run:${runs[1]!.id}`].sort());
    expect(existsSync(join(dataDir, done.archive!.file!))).toBe(true);
    expect(folders()).toEqual([runs[2]!.id]);
    expect((await c.getRun(runs[0]!.id)).outputPrunedAt).not.toBeNull();
    expect((await c.events('retention:output')).map((e) => e.type)).toContain('run.output_pruned');

    const vacuum = await c.prune({ vacuum: true });
    expect(vacuum.prune).toBeNull();
    expect(vacuum.vacuum).toMatchObject({ freedBytes: expect.any(Number), incremental: expect.any(Boolean) });

    // Bad input: nothing to prune, vacuum with a dry run, a negative count, a bad age.
    const nothing = await rejection(c.prune({}));
    expect(nothing).toBeInstanceOf(UsageError);
    expect(nothing.message).toMatch(/say what to prune/);
    expect(await rejection(c.prune({ vacuum: true, dryRun: true }))).toBeInstanceOf(UsageError);
    expect((await rejection(c.prune({ keepLast: -1 }))).message).toMatch(/--keep-last must be a whole number/);
    expect(await rejection(c.prune({ olderThan: 'lately' }))).toBeInstanceOf(UsageError);
  });

  it("importHasnaLoops: the predecessor's database, a dry run first, then once (a second import changes nothing); ValidationError for no such file", async () => {
    const file = predecessorDatabase(tempDir('loops-pred-'));
    const { client: c } = client();
    const dry = await c.importHasnaLoops({ db: file, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, events: 0 });
    expect(dry.rows.length).toBeGreaterThan(0);
    expect(await c.list()).toEqual([]);

    const report = await c.importHasnaLoops({ db: file, withHistory: true });
    expect(report.dryRun).toBe(false);
    expect(report.events).toBeGreaterThan(0);
    const imported = report.rows.filter((r) => r.kind === 'loop' && r.outcome === 'imported').map((r) => r.name).sort();
    expect(imported.length).toBeGreaterThan(0);
    expect((await c.listLoops()).map((l) => l.name).sort()).toEqual(expect.arrayContaining(imported));
    expect((await c.listWorkflows()).map((w) => w.name)).toContain('ship');

    const again = await c.importHasnaLoops({ db: file });
    expect(again.events).toBe(0);
    expect(again.rows.filter((r) => r.kind === 'loop').every((r) => r.outcome === 'already imported')).toBe(true);

    // Bad input: no such file, an empty path, not a string.
    const missing = await rejection(c.importHasnaLoops({ db: join(tempDir('loops-pred-none-'), 'none.db') }));
    expect(missing).toBeInstanceOf(ValidationError);
    expect(missing.message).toMatch(/does not exist/);
    expect(await rejection(c.importHasnaLoops({ db: ' ' }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.importHasnaLoops({ db: 5 as unknown as string }))).toBeInstanceOf(UsageError);
  });

  it('the daemon: status not running, start in the background, status, log, a second start refused, stop; UsageError for bad options', async () => {
    expect(existsSync(cliEntry()), 'the built CLI (npm run build)').toBe(true);
    const { client: c } = client();
    const before = await c.daemonStatus();
    expect(before).toMatchObject({ running: false, healthy: false, problem: 'not running', pid: null });
    expect(await c.stopDaemon()).toEqual({ stopped: false, running: false });
    expect((await c.daemonLogs()).exists).toBe(false);

    // Bad input, before anything starts.
    expect(await rejection(c.startDaemon({ concurrency: 0 }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.startDaemon({ intervalMs: 5 }))).toBeInstanceOf(LoopsError);
    expect(await rejection(c.daemonLogs({ lines: 0 }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.stopDaemon({ timeoutMs: -1 }))).toBeInstanceOf(UsageError);

    const started = await c.startDaemon({ concurrency: 2 });
    onTestFinished(() => {
      if (isAlive(started.pid)) process.kill(started.pid, 'SIGKILL');
    });
    expect(started.log).toMatch(/daemon\.log$/);
    const status = await c.daemonStatus();
    expect(status).toMatchObject({ running: true, pid: started.pid });
    expect(await rejection(c.startDaemon())).toBeInstanceOf(AlreadyExistsError);

    const stopped = await c.stopDaemon();
    expect(stopped).toEqual({ stopped: true, pid: started.pid });
    expect(isAlive(started.pid)).toBe(false);
    expect((await c.daemonStatus()).running).toBe(false);
    const log = await c.daemonLogs({ lines: 100 });
    expect(log.exists).toBe(true);
    expect(log.text).toMatch(/daemon started/);
  });

  it('machines: list, export the current and an older version; NotFoundError and UsageError for a bad name or version', async () => {
    const { client: c } = client();
    const machines = await c.listMachines();
    const run = machines.find((m) => m.name === 'run')!;
    expect(run).toMatchObject({ id: expect.any(String), current: expect.any(Number) });
    expect(run.versions).toContain(run.current);
    const current = await c.exportMachine('run');
    expect(current).toMatchObject({ name: 'run', id: run.id, version: run.current, current: true });
    expect(current.definition).toMatchObject({ id: expect.any(String), states: expect.any(Object) });
    expect(await c.exportMachine(run.id, { version: run.versions[0]! })).toMatchObject({ name: 'run', version: run.versions[0] });

    const unknown = await rejection(c.exportMachine('rnu'));
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown.hint).toMatch(/did you mean run/);
    expect(await rejection(c.exportMachine('run', { version: 0 }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.exportMachine('run', { version: 999 }))).toBeInstanceOf(NotFoundError);
  });
});
