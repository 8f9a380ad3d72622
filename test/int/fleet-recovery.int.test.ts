/**
 * Recovery on a store hosts share (issue 15, docs/scaling.md): a stale run another host ran is
 * abandoned after its lease expired without this host looking for its process — even when this
 * host has a live process with that very pid and start time (here: the test's own), which a
 * same-host recovery would adopt. Its reason says where it ran. PostgreSQL, a schema of its own.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { processStartTime } from '../../src/runtime/execution/process-info.js';
import { hostId } from '../../src/runtime/host.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { chooseStore } from '../../src/runtime/store-choice.js';
import { DEFAULT_PG_URL, PG_URL, dropSchemas, pgReachable, testSchemaName } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { strandRun } from '../helpers/strand.js';
import { tempDir } from '../helpers/tmp.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the fleet's recovery (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

/**
 * A run of another host's runner (`far-away-host:<this pid>:<suffix>`) left running on a schema of
 * its own: the process it recorded is, on this machine, a live one with that pid and start time
 * (the test's own), which a same-host recovery would adopt.
 */
async function strandedElsewhere(suffix: string, before?: (other: Runtime, clock: SimulatedClock) => Promise<void>, proc: { pid: number; startTime: string | null } = { pid: process.pid, startTime: processStartTime(process.pid) }) {
  const schema = testSchemaName();
  schemas.push(schema);
  const store = chooseStore({ LOOPS_STORE: `${PG_URL}?schema=${schema}` });
  const clock = new SimulatedClock('2026-05-01T10:00:00.000Z');
  const root = tempDir();
  const other = await openRuntime({ dataDir: join(root, 'a'), clock, runnerId: `far-away-host:${process.pid}:${suffix}`, store });
  const loop = await createCommandLoop(other, { name: 'job', command: 'sleep 30', schedule: { manual: true } });
  const runId = await strandRun(other, loop, proc);
  await before?.(other, clock);
  other.close();
  const open = (dir: string, runnerId: string) => openRuntime({ dataDir: join(root, dir), clock, runnerId, store });
  return { clock, runId, open };
}

describe.skipIf(!havePg)('recovery on a shared store: liveness is judged only on the host that ran the run', () => {
  it("another host's stale run is abandoned, its process neither looked for nor adopted here", async () => {
    const { clock, runId, open } = await strandedElsewhere('x');
    const here = await open('b', `${hostId()}:222:recoverer`);
    try {
      clock.advance(30_001);
      const report = await recoverRuns(here);
      expect(report).toMatchObject({ abandoned: [runId], orphaned: [], unconfirmed: [] });
      const last = (await here.log.readStream(`run:${runId}`)).at(-1)!;
      expect(last.type).toBe('run.abandoned');
      expect((last.data as { reason: string }).reason).toBe(
        `runner far-away-host:${process.pid}:x stopped renewing its lease (it ran on host far-away-host, and only that host can check its process); its process was not checked or signalled from here, and its exit status is unknown`,
      );
    } finally {
      here.close();
    }
  });

  it("another host's run is abandoned without signalling a local process group that has its number", async () => {
    // A local group whose leader has exited and whose member lives: what stopLeftovers would
    // stop for a run of this host (its runner died between the leader's exit and the SIGKILL).
    const group = spawn('/bin/sh', ['-c', 'sleep 60 & echo $!; exit 0'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const member = Number((await new Promise<string>((resolve) => group.stdout.once('data', (d: Buffer) => resolve(d.toString())))).trim());
    await new Promise((resolve) => group.once('exit', resolve));
    onTestFinished(() => {
      try {
        process.kill(-group.pid!, 'SIGKILL');
      } catch {
        // gone
      }
    });
    const { clock, runId, open } = await strandedElsewhere('pg', undefined, { pid: group.pid!, startTime: null });
    const here = await open('b', `${hostId()}:222:recoverer`);
    try {
      clock.advance(30_001);
      expect((await recoverRuns(here)).abandoned).toEqual([runId]);
      // Still running (not a zombie, which a signalled orphan may stay here): not this host's to stop.
      expect(readFileSync(`/proc/${member}/stat`, 'utf8').split(') ')[1]![0]).not.toBe('Z');
    } finally {
      here.close();
    }
  });

  it('a stopped runner that holds its host\'s daemon lease itself (paused) has its run taken over once the run lease expired', async () => {
    // The stopped runner was that host's daemon: its daemon lease, still live, is its own.
    const { clock, runId, open } = await strandedElsewhere('old', (other, c) => other.leases.take('daemon:far-away-host', other.runnerId, 60_000, c.now()).then(() => undefined));
    const here = await open('b', `${hostId()}:222:recoverer`);
    try {
      clock.advance(30_001);
      // The stopped runner holds its host's daemon lease (paused, say): nobody there will recover
      // its run sooner than another host, which takes it over once its run lease expired.
      expect((await recoverRuns(here)).abandoned).toEqual([runId]);
    } finally {
      here.close();
    }
  });

  it("a run of a host whose daemon was restarted is that daemon's to recover, not another host's", async () => {
    const { clock, runId, open } = await strandedElsewhere('old');
    clock.advance(30_001);
    // That host's daemon came back (a new runner): as Daemon.start does, its lease taken.
    const back = await open('a', 'far-away-host:999:new');
    await back.leases.take('daemon:far-away-host', back.runnerId, 15_000, clock.now());
    back.close();
    const here = await open('b', `${hostId()}:222:recoverer`);
    try {
      const report = await recoverRuns(here);
      expect(report).toMatchObject({ abandoned: [], exited: [], orphaned: [] });
      expect((await here.log.readStream(`run:${runId}`)).at(-1)!.type).not.toBe('run.abandoned');
      // Once that daemon is gone too (its lease expired), another host takes the run over.
      clock.advance(15_001);
      expect((await recoverRuns(here)).abandoned).toEqual([runId]);
    } finally {
      here.close();
    }
  });
});
