/**
 * Told when it fails (issue 12 item 9): `--on-failure '<command>'` runs a command with the failed
 * run's LOOPS_* variables, as a run of its own (never retried, never told of itself), after the
 * last attempt only; `--notify-url` POSTs a JSON summary to a real local HTTP server, retried with
 * back-off, each try with a timeout, with an idempotency key; a notice left pending by a runner
 * that stopped is delivered by the next pass.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { filter, firstValueFrom, skip } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { runStats } from '../../src/runtime/admin/stats.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { decide, tick } from '../../src/runtime/daemon/pass.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createAgentLoop, createCommandLoop, createWorkflowLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { deliverNotice, requestNotices } from '../../src/runtime/loops/notify.js';
import { findLoop, findRun, listRuns } from '../../src/runtime/queries/loops.js';
import { noticeOfHookRun, runNotices } from '../../src/runtime/queries/notices.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { strandRun } from '../helpers/strand.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

interface Received {
  body: Record<string, any>;
  headers: IncomingMessage['headers'];
}

/** A real HTTP server on 127.0.0.1: `answer` decides each response (by the request's number, from 1). */
async function receiver(answer: (n: number, res: ServerResponse) => void = (_n, res) => res.end('ok')): Promise<{ url: string; got: Received[]; server: Server }> {
  const got: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, any>, headers: req.headers });
      answer(got.length, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  onTestFinished(() => server.closeAllConnections());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, server };
}

const ENV = ['LOOPS_NOTIFY_ATTEMPTS', 'LOOPS_NOTIFY_TIMEOUT_MS', 'LOOPS_NOTIFY_RETRY_DELAY_MS'] as const;
let saved: Record<string, string | undefined> = {};
beforeEach(() => {
  saved = Object.fromEntries(ENV.map((k) => [k, process.env[k]]));
  // Short tries for the tests; recorded with each notice, so what a test sets is what it runs with.
  process.env.LOOPS_NOTIFY_RETRY_DELAY_MS = '20';
  process.env.LOOPS_NOTIFY_TIMEOUT_MS = '2000';
  process.env.LOOPS_NOTIFY_ATTEMPTS = '3';
});
afterEach(() => {
  for (const k of ENV) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

function loop(runtime: Runtime, input: Partial<CreateCommandLoopInput>) {
  return createCommandLoop(runtime, { name: 'job', command: 'exit 3', schedule: { manual: true, tz: 'UTC' }, ...input });
}

describe('--on-failure and --notify-url: validation at create', () => {
  it('an empty command, a bad URL, credentials in the URL, --notify-on without a URL or with an unknown outcome are refused, nothing recorded', async () => {
    const runtime = await useRuntime();
    const bad: Array<[Partial<CreateCommandLoopInput>, RegExp]> = [
      [{ onFailure: '' }, /--on-failure: the command is empty/],
      [{ onFailure: '   ' }, /--on-failure: the command is empty/],
      [{ notifyUrl: 'not a url' }, /--notify-url: "not a url" is not a URL/],
      [{ notifyUrl: 'ftp://example.com/x' }, /--notify-url: ftp URLs are not supported, only http and https/],
      [{ notifyUrl: 'https://user:pw@example.com/x' }, /--notify-url: a user name or password in the URL would be stored in clear/],
      [{ notifyOn: 'failure' }, /--notify-on applies to --notify-url/],
      [{ notifyUrl: 'https://example.com/x', notifyOn: 'failure,sucess' }, /--notify-on: unknown outcome "sucess"/],
    ];
    for (const [input, message] of bad) {
      const error = await loop(runtime, input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(String((error as Error).message)).toMatch(message);
      expect((error as ValidationError).hint).toBeTruthy();
    }
    expect(runtime.db.prepare('SELECT count(*) AS n FROM loops').get()).toEqual({ n: 0 });
  });

  it('a loop without them is recorded as before (no notify field); with them, show reads them back', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { name: 'plain' });
    await loop(runtime, { name: 'told', onFailure: 'echo hi', notifyUrl: 'https://example.com/x', notifyOn: 'success,failure' });
    const created = (name: string) =>
      (runtime.db.prepare("SELECT data FROM events WHERE type = 'loop.created' AND json_extract(data, '$.name') = ?").get(name) as { data: string }).data;
    expect(JSON.parse(created('plain'))).not.toHaveProperty('notify');
    expect(JSON.parse(created('told')).notify).toEqual({ onFailure: 'echo hi', url: 'https://example.com/x', on: ['failure', 'success'] });
  });
});

describe('--on-failure', () => {
  it("runs the command after a failed run, with the failed run's LOOPS_* variables, as a run of its own linked to it", async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const out = join(dir, 'told.txt');
    await loop(runtime, {
      command: 'echo oops >&2; exit 3',
      cwd: dir,
      onFailure: `printf '%s|' "$LOOPS_LOOP_NAME" "$LOOPS_RUN_ID" "$LOOPS_STATUS" "$LOOPS_EXIT_CODE" "$LOOPS_ERROR" "$LOOPS_ATTEMPT" "$LOOPS_HOOK" "$LOOPS_SCHEDULED_FOR" "$LOOPS_HOOK_RUN_ID" > told.txt`,
    });
    const run = await runNow(runtime, 'job');
    expect(run.status).toBe('failed');
    const [notice, ...more] = runNotices(runtime.db, run.id);
    expect(more).toEqual([]);
    expect(notice).toMatchObject({ channel: 'command', status: 'ran', hookStatus: 'succeeded', runStatus: 'failed' });
    const hook = findRun(runtime.db, notice!.hookRunId!);
    expect(hook).toMatchObject({ status: 'succeeded', trigger: 'manual', slot: `hook:${notice!.id}`, loopId: run.loopId });
    const [name, runId, status, exitCode, error, attempt, kind, scheduledFor, hookRunId] = readFileSync(out, 'utf8').split('|');
    expect({ name, runId, status, exitCode, error, attempt, kind, scheduledFor, hookRunId }).toEqual({
      name: 'job',
      runId: run.id,
      status: 'failed',
      exitCode: '3',
      error: 'exited with code 3',
      attempt: '1',
      kind: 'on-failure',
      scheduledFor: run.scheduledFor,
      hookRunId: hook.id,
    });
    expect(noticeOfHookRun(runtime.db, hook)?.runId).toBe(run.id);
    // stats count the loop's runs, not the report of its failure: 1 run, failed.
    expect(runStats(runtime.db, { loop: 'job' }).total).toMatchObject({ runs: 1, succeeded: 0, failed: 1 });
    // The loop's last run is still the failure the hook told of.
    expect(findLoop(runtime.db, 'job').lastRun).toMatchObject({ id: run.id, status: 'failed' });
    expect(eventTypes(runtime.log, `notice:${notice!.id}`)).toEqual(['notice.requested', 'notice.hook_claimed', 'notice.hook_ended']);
    expect(runtime.db.prepare('SELECT * FROM leases').all()).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('a succeeded run tells nobody; a failing hook is recorded failed and never told of itself', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { name: 'ok', command: 'true', onFailure: 'exit 9' });
    const ok = await runNow(runtime, 'ok');
    expect(runNotices(runtime.db, ok.id)).toEqual([]);
    await loop(runtime, { name: 'bad', command: 'exit 1', onFailure: 'exit 9' });
    const bad = await runNow(runtime, 'bad');
    const [notice] = runNotices(runtime.db, bad.id);
    expect(notice).toMatchObject({ status: 'ran', hookStatus: 'failed' });
    const hook = findRun(runtime.db, notice!.hookRunId!);
    expect(hook).toMatchObject({ status: 'failed', exitCode: 9 });
    expect(runNotices(runtime.db, hook.id)).toEqual([]);
    // Two runs of bad: the run and its hook; nothing more (no hook of the hook, no retry).
    expect(listRuns(runtime.db, { loopId: bad.loopId, limit: 10 }).map((r) => r.id).sort()).toEqual([bad.id, hook.id].sort());
    expect(runtime.db.prepare('SELECT count(*) AS n FROM notices').get()).toEqual({ n: 1 });
    expectLogConsistent(runtime);
  });

  it('a workflow loop and an agent loop take it too: a failed workflow run or agent run runs the hook', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const file = join(dir, 'flow.yaml');
    writeFileSync(file, 'name: flow\nsteps:\n  - id: build\n    run: exit 6\n');
    await createWorkflow(runtime, file);
    // A workflow loop has no --cwd: its hook runs in the runner's directory, so it writes by absolute path.
    const told = join(dir, 'told.txt');
    await createWorkflowLoop(runtime, { name: 'wf', workflow: 'flow', schedule: { manual: true, tz: 'UTC' }, onFailure: `echo "$LOOPS_LOOP_NAME $LOOPS_STATUS" >> '${told}'` });
    const wf = await runNow(runtime, 'wf');
    expect(wf.status).toBe('failed');
    // An agent loop whose CLI cannot start (not installed): its run fails, and is told.
    await createAgentLoop(runtime, {
      name: 'agent',
      provider: 'claude',
      prompt: 'hello',
      cwd: dir,
      env: { PATH: '/nonexistent' },
      preflight: false,
      schedule: { manual: true, tz: 'UTC' },
      onFailure: 'echo "$LOOPS_LOOP_NAME $LOOPS_STATUS" >> told.txt',
    });
    const agent = await runNow(runtime, 'agent');
    expect(agent.status).toBe('failed');
    expect(runNotices(runtime.db, wf.id)).toMatchObject([{ status: 'ran', hookStatus: 'succeeded' }]);
    expect(runNotices(runtime.db, agent.id)).toMatchObject([{ status: 'ran', hookStatus: 'succeeded' }]);
    expect(readFileSync(told, 'utf8')).toBe('wf failed\nagent failed\n');
  });

  it('through tick: an attempt that will be retried tells nobody; the last one does', async () => {
    const clock = new SimulatedClock('2026-01-01T00:00:00.000Z');
    const runtime = await useRuntime({ clock });
    const dir = tempDir();
    await createCommandLoop(runtime, {
      name: 'flaky',
      command: 'exit 4',
      cwd: dir,
      schedule: { every: '1h', tz: 'UTC' },
      attempts: 2,
      retryDelay: '1m',
      onFailure: 'echo "$LOOPS_RUN_ID $LOOPS_ATTEMPT" >> told.txt',
    });
    clock.jumpWall(3_600_000 + 1000);
    const first = await tick(runtime);
    expect(first.runs.map((r) => [r.attempt, r.status])).toEqual([[1, 'failed']]);
    expect(runNotices(runtime.db, first.runs[0]!.id)).toEqual([]);
    clock.jumpWall(61_000);
    const second = await tick(runtime);
    expect(second.runs.map((r) => [r.attempt, r.status])).toEqual([[2, 'failed']]);
    const last = second.runs[0]!;
    expect(runNotices(runtime.db, last.id)).toMatchObject([{ status: 'ran', hookStatus: 'succeeded' }]);
    expect(readFileSync(join(dir, 'told.txt'), 'utf8')).toBe(`${last.id} 2\n`);
    expectLogConsistent(runtime);
  });
});

describe('a loop is not held by its notices', () => {
  it('a slot that comes due while the --on-failure command runs fires: the hook run is no overlap', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const created = await createCommandLoop(runtime, {
      name: 'hourly',
      command: 'exit 1',
      cwd: dir,
      // The first slot 20 s after creation: within the hook run's lease (30 s), so it is going then.
      schedule: { every: '20s', tz: 'UTC' },
      // The hook waits for the test's go-ahead (a file), so the next slot comes due while it runs.
      onFailure: 'while [ ! -e go ]; do sleep 0.02; done',
    });
    const hookSpawned = firstValueFrom(
      runtime.log.events$.pipe(
        filter((e) => e.type === 'process.spawned'),
        skip(1), // the failed run's own
      ),
    );
    const failed = runNow(runtime, 'hourly');
    onTestFinished(() => writeFileSync(join(dir, 'go'), ''));
    const hookRunId = (await hookSpawned).streamId.slice('run:'.length);
    expect(findRun(runtime.db, hookRunId)).toMatchObject({ status: 'running', slot: expect.stringMatching(/^hook:/) });
    // The loop's first slot: fired, not skipped for the hook run that is going.
    const next = await decide(runtime, Date.parse(created.nextRunAt!) + 100);
    expect(next.decisions.map((d) => d.type)).toEqual(['slot.fired']);
    writeFileSync(join(dir, 'go'), '');
    expect((await failed).status).toBe('failed');
    expect(findRun(runtime.db, hookRunId).status).toBe('succeeded');
  });
});

describe('--notify-url', () => {
  it('POSTs a JSON summary of a failed run with an idempotency key; successes only with --notify-on success', async () => {
    const runtime = await useRuntime();
    const server = await receiver();
    await loop(runtime, { command: 'echo out; echo err >&2; exit 2', notifyUrl: server.url });
    await loop(runtime, { name: 'fine', command: 'true', notifyUrl: server.url });
    await loop(runtime, { name: 'both', command: 'true', notifyUrl: server.url, notifyOn: 'failure,success' });
    const failed = await runNow(runtime, 'job');
    await runNow(runtime, 'fine');
    const succeeded = await runNow(runtime, 'both');
    expect(server.got).toHaveLength(2);
    const [a, b] = server.got;
    expect(a!.headers['content-type']).toBe('application/json');
    expect(a!.headers['idempotency-key']).toBe(`${failed.id}.url`);
    expect(a!.body).toMatchObject({
      type: 'run.failed',
      noticeId: `${failed.id}.url`,
      loop: { id: failed.loopId, name: 'job' },
      run: { id: failed.id, status: 'failed', exitCode: 2, error: 'exited with code 2', stdoutTail: 'out\n', stderrTail: 'err\n', attempt: 1, trigger: 'manual' },
    });
    expect(b!.body).toMatchObject({ type: 'run.succeeded', run: { id: succeeded.id, status: 'succeeded' } });
    expect(runNotices(runtime.db, failed.id)).toMatchObject([{ channel: 'url', status: 'delivered', attempts: 1, httpStatus: 200 }]);
    expectLogConsistent(runtime);
  });

  it('a 500 is retried after the back-off, with the same idempotency key, until the server takes it', async () => {
    const runtime = await useRuntime();
    const server = await receiver((n, res) => {
      res.statusCode = n < 3 ? 500 : 204;
      res.end();
    });
    await loop(runtime, { notifyUrl: server.url });
    const run = await runNow(runtime, 'job');
    expect(server.got.map((g) => [g.headers['idempotency-key'], g.headers['x-loops-attempt']])).toEqual([
      [`${run.id}.url`, '1'],
      [`${run.id}.url`, '2'],
      [`${run.id}.url`, '3'],
    ]);
    const noticeId = `${run.id}.url`;
    expect(eventTypes(runtime.log, `notice:${noticeId}`)).toEqual(['notice.requested', 'notice.attempt_failed', 'notice.attempt_failed', 'notice.delivered']);
    const failures = (await runtime.log.readStream(`notice:${noticeId}`)).filter((e) => e.type === 'notice.attempt_failed').map((e) => e.data as { error: string; retryAt: string });
    expect(failures.map((f) => f.error)).toEqual(['HTTP 500 Internal Server Error', 'HTTP 500 Internal Server Error']);
    expect(runNotices(runtime.db, run.id)).toMatchObject([{ status: 'delivered', attempts: 3, httpStatus: 204 }]);
    expectLogConsistent(runtime);
  });

  it('a server that does not answer in time: each try times out, and after the last one the notice is given up', async () => {
    process.env.LOOPS_NOTIFY_TIMEOUT_MS = '200';
    process.env.LOOPS_NOTIFY_ATTEMPTS = '2';
    const runtime = await useRuntime();
    const server = await receiver(() => undefined); // never answers
    await loop(runtime, { notifyUrl: server.url });
    const run = await runNow(runtime, 'job');
    expect(server.got).toHaveLength(2);
    expect(runNotices(runtime.db, run.id)).toMatchObject([{ status: 'given_up', attempts: 2, lastError: 'no answer within 200 ms', httpStatus: null }]);
    expect(eventTypes(runtime.log, `notice:${run.id}.url`)).toEqual(['notice.requested', 'notice.attempt_failed', 'notice.attempt_failed', 'notice.given_up']);
    expect(runtime.db.prepare('SELECT * FROM leases').all()).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('an unreachable server: connection refused on each try, then given up', async () => {
    const runtime = await useRuntime();
    const server = await receiver();
    const url = server.url;
    await new Promise<void>((resolve) => server.server.close(() => resolve()));
    await loop(runtime, { notifyUrl: url });
    const run = await runNow(runtime, 'job');
    const [notice] = runNotices(runtime.db, run.id);
    expect(notice).toMatchObject({ status: 'given_up', attempts: 3 });
    expect(notice!.lastError).toMatch(/^ECONNREFUSED/);
    expectLogConsistent(runtime);
  });

  it('no secret value in the payload: output is masked as it is in the run', async () => {
    const runtime = await useRuntime();
    const server = await receiver();
    process.env.NOTIFY_TEST_SECRET = 'hunter2-very-secret';
    onTestFinished(() => void delete process.env.NOTIFY_TEST_SECRET);
    await loop(runtime, { command: 'echo "token $NOTIFY_TEST_SECRET"; exit 1', secretEnv: ['NOTIFY_TEST_SECRET'], notifyUrl: server.url });
    await runNow(runtime, 'job');
    expect(JSON.stringify(server.got[0]!.body)).not.toContain('hunter2');
    expect(server.got[0]!.body.run.stdoutTail).toBe('token ***\n');
  });
});

describe('durable delivery', () => {
  it('notices a runner recorded and never delivered (it stopped; their leases left behind) are delivered by the next pass, the URL with its idempotency key', async () => {
    const root = tempDir();
    const dataDir = join(root, 'data');
    const server = await receiver((n, res) => {
      res.statusCode = n === 1 ? 503 : 200;
      res.end();
    });
    // Runner A: the run fails, its notice is requested under A's lease, one try fails — and A stops.
    const a = await openRuntime({ dataDir, runnerId: 'host:1:a' });
    await createCommandLoop(a, { name: 'job', command: 'exit 3', schedule: { manual: true, tz: 'UTC' }, onFailure: 'true', notifyUrl: server.url });
    const run = await runNow(a, 'job'); // delivered here: both notices done
    expect(runNotices(a.db, run.id).map((n) => n.status).sort()).toEqual(['delivered', 'ran']);
    // A second failure whose notices A records (holding their leases) but never delivers: a crash.
    process.env.LOOPS_NOTIFY_ATTEMPTS = '3';
    const second = { ...findRun(a.db, run.id), id: `${run.id}x`, slot: `manual:${run.id}x` };
    const requested = await requestNotices(a, second, [], { hold: true });
    expect(requested.map((r) => r.noticeId).sort()).toEqual([`${second.id}.hook`, `${second.id}.url`]);
    a.close();

    // Runner B, 31 s later (A's notice leases ran out): its pass finishes both.
    const clock = new SimulatedClock(Date.now() + 31_000);
    const b = await openRuntime({ dataDir, clock, runnerId: 'host:2:b' });
    onTestFinished(() => b.close());
    await tick(b);
    const notices = runNotices(b.db, second.id);
    expect(notices.map((n) => [n.channel, n.status])).toEqual(
      expect.arrayContaining([
        ['command', 'ran'],
        ['url', 'delivered'],
      ]),
    );
    expect(server.got.map((g) => g.headers['idempotency-key'])).toEqual([`${run.id}.url`, `${run.id}.url`, `${second.id}.url`]);
    // Nothing left pending: a second pass delivers nothing again.
    await tick(b);
    expect(server.got).toHaveLength(3);
  });

  /**
   * Runner A: a failed run's notice, whose hook run A claims and intends — then A stops before the
   * process starts (what kill -9 of a daemon between the two leaves). A's handle stays open: it
   * records nothing more, and its leases run out. Runner B opens the same store 31 s later.
   */
  async function strandedHook(aRunner: string) {
    const told = join(tempDir(), 'told.txt');
    const a = await useRuntime({ runnerId: aRunner });
    await createCommandLoop(a, { name: 'job', command: 'exit 3', schedule: { manual: true, tz: 'UTC' }, onFailure: `echo "$LOOPS_RUN_ID $LOOPS_HOOK_RUN_ID" >> '${told}'` });
    const run = await runNow(a, 'job'); // its hook runs here
    const second = { ...findRun(a.db, run.id), id: `${run.id}x`, slot: `manual:${run.id}x` };
    const [held] = await requestNotices(a, second, [], { hold: true });
    let stranded = '';
    const dies = deliverNotice(
      a,
      held!.noticeId,
      async (hookLoop, o) => {
        stranded = await strandRun(a, hookLoop, 'spawning', 30_000, null, { runId: o.runId, slot: o.slot });
        throw new Error('the runner stopped');
      },
      { lease: held!.lease! },
    );
    await expect(dies).rejects.toThrow('the runner stopped');
    expect(readFileSync(told, 'utf8').trim().split('\n')).toHaveLength(1);
    const clock = new SimulatedClock(Date.now() + 31_000);
    const b = await openRuntime({ dataDir: a.dataDir, clock, runnerId: 'test-host:2:b' });
    onTestFinished(() => b.close());
    const lines = () => readFileSync(told, 'utf8').trim().split('\n');
    return { run, second, stranded, b, lines };
  }

  it('a hook run whose runner stopped before its process started is run again by the next pass, as a new run that replaces it', async () => {
    const { run, second, stranded, b, lines } = await strandedHook('test-host:1:a');
    // B's pass: recovery abandons the hook run (no process was recorded, none is found), and the
    // notice runs the command again, as the hook slot's next attempt.
    await tick(b);
    expect(findRun(b.db, stranded)).toMatchObject({ status: 'abandoned', pid: null, attempt: 1, error: expect.stringMatching(/stopped before the process was started/) });
    const [notice] = runNotices(b.db, second.id);
    expect(notice).toMatchObject({ channel: 'command', status: 'ran', hookStatus: 'succeeded' });
    expect(notice!.hookRunId).not.toBe(stranded);
    expect(findRun(b.db, notice!.hookRunId!)).toMatchObject({ status: 'succeeded', slot: `hook:${second.id}.hook`, attempt: 2 });
    expect(lines()).toEqual([expect.stringMatching(new RegExp(`^${run.id} run_`)), `${second.id} ${notice!.hookRunId}`]);
    const claims = (await b.log.readStream(`notice:${second.id}.hook`)).filter((e) => e.type === 'notice.hook_claimed').map((e) => e.data);
    expect(claims).toEqual([
      { hookRunId: stranded, replaces: null },
      { hookRunId: notice!.hookRunId, replaces: stranded },
    ]);
    // Both hook runs are the notice's.
    expect(noticeOfHookRun(b.db, findRun(b.db, stranded))?.id).toBe(`${second.id}.hook`);
    // Nothing runs twice: another pass leaves it.
    await tick(b);
    expect(lines()).toHaveLength(2);
    expectLogConsistent(b);
  });

  it('on a shared store, a hook run another host claimed is not run again from here: its process was not looked for', async (ctx) => {
    const { second, stranded, b, lines } = await strandedHook('other-host:1:a');
    if (!b.fleet) ctx.skip(); // one machine's data directory: every runner is on this host
    await tick(b);
    expect(findRun(b.db, stranded)).toMatchObject({ status: 'abandoned', pid: null, error: expect.stringMatching(/was not checked or signalled from here/) });
    expect(runNotices(b.db, second.id)).toMatchObject([{ status: 'ran', hookRunId: stranded, hookStatus: 'abandoned' }]);
    expect(lines()).toHaveLength(1);
  });

  it('a pending notice another live runner holds is left to it by a pass; its holder delivers it', async () => {
    const root = tempDir();
    const dataDir = join(root, 'data');
    const server = await receiver();
    const a = await openRuntime({ dataDir, runnerId: 'host:1:a' });
    onTestFinished(() => a.close());
    await createCommandLoop(a, { name: 'job', command: 'exit 3', schedule: { manual: true, tz: 'UTC' }, notifyUrl: server.url });
    const run = await runNow(a, 'job');
    expect(server.got).toHaveLength(1);
    const other = { ...run, id: `${run.id}y`, slot: `manual:${run.id}y` };
    const [held] = await requestNotices(a, other, [], { hold: true });
    const b = await openRuntime({ dataDir, runnerId: 'host:2:b' });
    onTestFinished(() => b.close());
    await tick(b);
    expect(server.got).toHaveLength(1);
    expect(runNotices(b.db, other.id)).toMatchObject([{ status: 'pending' }]);
    await deliverNotice(a, held!.noticeId, () => Promise.reject(new Error('a URL notice runs no hook')), { lease: held!.lease! });
    expect(server.got).toHaveLength(2);
    expect(runNotices(a.db, other.id)).toMatchObject([{ status: 'delivered', attempts: 1 }]);
  });
});
