/**
 * Secrets never reach the data directory, on the paths a user runs:
 * - a workflow's `secrets:` value that a step writes to $LOOPS_OUTPUT is masked before it is
 *   recorded (`step.exited`, `workflow_steps.outputs`), before it is substituted into a later step's
 *   recorded command line, and in the step's `output` file; the later step still reads the real
 *   value from its environment;
 * - `--secret-file` and `--secret-cmd` values are read when the process starts and given to it by
 *   name; the log holds the reference only; a value that cannot be read fails the attempt with a
 *   reason naming the variable, never the value; a run finished from its files after its runner
 *   died is masked with them too;
 * - `loops secrets scrub` redefines live definitions holding a value forward (new events only).
 * Afterwards no file under the data directory (database, WAL, run files) holds a value in raw,
 * base64 or URL-encoded form.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { EventData, Target } from '../../src/events/catalog.js';
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { runDoctor } from '../../src/runtime/admin/doctor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { wrapperArgv } from '../../src/runtime/execution/executor.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { maskingSecretsSync } from '../../src/runtime/execution/run-secrets.js';
import { runSecretCommand } from '../../src/runtime/execution/secret-refs.js';
import { newId } from '../../src/runtime/ids.js';
import { changeLoopState, createCommandLoop, recordLoopCreated } from '../../src/runtime/loops/commands.js';
import { decideLoop } from '../../src/runtime/loops/decisions.js';
import { scrubSecrets } from '../../src/runtime/loops/scrub.js';
import { findLoop, findRun, listLoops, type LoopView } from '../../src/runtime/queries/loops.js';
import { findWorkflow, workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { runDir } from '../../src/runtime/paths.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import type { WorkflowSpec } from '../../src/workflow/spec.js';
import { expectInvariants } from '../helpers/invariants.js';
import { isAlive, killGroupIfAlive, waitForGroupGone } from '../helpers/proc.js';
import { secretHolders } from '../helpers/secrets.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { strandRun } from '../helpers/strand.js';

const SECRET = 'tok-Zq8/4f9a+1c77e2d0';
const FILE_SECRET = 'file-Zq8/4f9a+1c77&e2 d0?';
const CMD_SECRET = 'cmd-pw+Qx7/9k=3v!m~';

/** A file outside the data directory holding `text`, mode 0600. */
function secretFile(name: string, text: string): string {
  const file = join(tempDir('loops-secret-'), name);
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

/** Events of a stream, with their data. */
async function streamEvents(runtime: Runtime, streamId: string) {
  return runtime.log.readStream(streamId);
}

describe('secrets: workflow outputs', () => {
  it('a secret a step writes to $LOOPS_OUTPUT is masked in the log, the tables, later command lines and the output file; the next step still has it in its environment', async () => {
    process.env.CLI_TOKEN = SECRET;
    onTestFinished(() => {
      delete process.env.CLI_TOKEN;
    });
    const runtime = await useRuntime();
    const file = join(tempDir(), 'wf.yaml');
    writeFileSync(
      file,
      [
        'name: leak',
        'secrets: [CLI_TOKEN]',
        'steps:',
        '  - id: login',
        '    run: echo "session=$CLI_TOKEN" >> "$LOOPS_OUTPUT"',
        '    outputs: [session]',
        '  - id: use',
        '    needs: login',
        '    command: sh',
        // The output substituted into the recorded argv; the secret itself checked by its length only
        // (the file is stored with the workflow).
        `    args: ['-c', 'echo "got $1"; test "\${#CLI_TOKEN}" = ${SECRET.length} && echo "env ok"', sh, '\${{ steps.login.outputs.session }}']`,
        '',
      ].join('\n'),
    );
    await createWorkflow(runtime, file);
    const { run } = await runWorkflow(runtime, 'leak');
    expect(run.status).toBe('succeeded');
    const steps = workflowRunSteps(runtime.db, run.id);
    expect(steps.find((s) => s.stepId === 'login')!.outputs).toEqual({ session: '***' });
    expect(steps.find((s) => s.stepId === 'use')!.stdout).toBe('got ***\nenv ok\n');
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(secretHolders(runtime.dataDir, [SECRET])).toEqual([]);
    expectInvariants(runtime);
  });
});

describe('secrets: --secret-file and --secret-cmd', () => {
  it('each value reaches the process as its variable (one trailing \\r\\n or \\n dropped), masked in every form it prints; the log holds only the reference; nothing under the data directory holds a value', async () => {
    const runtime = await useRuntime();
    const file = secretFile('api-token', `${FILE_SECRET}\r\n`);
    const source = secretFile('db-password', `${CMD_SECRET}\n`);
    const loop = await createCommandLoop(runtime, {
      name: 'sealed',
      command: [
        'echo "file=$API_TOKEN cmd=$DB_PASSWORD"',
        'printf %s "$API_TOKEN" | base64 -w0; echo',
        `"${process.execPath}" -e 'console.log(encodeURIComponent(process.env.DB_PASSWORD))'`,
        'echo "on stderr: $API_TOKEN" >&2',
        `test "\${#API_TOKEN}" = ${FILE_SECRET.length} && test "\${#DB_PASSWORD}" = ${CMD_SECRET.length} && echo lengths-ok`,
      ].join('; '),
      secretFiles: [{ name: 'API_TOKEN', path: file }],
      secretCmds: [{ name: 'DB_PASSWORD', command: `cat '${source}'` }],
      schedule: { manual: true },
    });
    expect(loop.target).toMatchObject({
      env: {},
      secretRefs: [
        { name: 'API_TOKEN', from: 'file', path: file },
        { name: 'DB_PASSWORD', from: 'cmd', command: `cat '${source}'` },
      ],
    });
    const run = await runNow(runtime, 'sealed');
    expect(run.status).toBe('succeeded');
    expect(run.stdout).toBe('file=*** cmd=***\n***\n***\nlengths-ok\n');
    expect(run.stderr).toBe('on stderr: ***\n');
    expect(readFileSync(join(runDir(runtime.dataDir, run.id), 'stdout.log'), 'utf8')).toBe(run.stdout);
    // What loops logs masks a run still going with: the values this process can read now.
    expect(maskingSecretsSync(loop.target).sort()).toEqual(expect.arrayContaining([FILE_SECRET, CMD_SECRET]));
    // run.claimed carries the target: the reference again, never a value.
    const claimed = (await streamEvents(runtime, `run:${run.id}`))[0]!;
    expect((claimed.data as EventData<'run.claimed'>).target).toEqual(loop.target);
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(secretHolders(runtime.dataDir, [FILE_SECRET, CMD_SECRET])).toEqual([]);
    expectInvariants(runtime);
  });

  it('a missing file, or a command that fails, fails the attempt with a reason naming the variable and the file or the exit code — never the value; the command\'s stderr is not recorded', async () => {
    const runtime = await useRuntime();
    const file = secretFile('api-token', FILE_SECRET);
    const source = secretFile('db-password', CMD_SECRET);
    await createCommandLoop(runtime, { name: 'by-file', command: 'echo "$API_TOKEN"', secretFiles: [{ name: 'API_TOKEN', path: file }], schedule: { manual: true } });
    await createCommandLoop(runtime, {
      name: 'by-cmd',
      command: 'echo "$DB_PASSWORD"',
      // It prints the value on stderr, then fails.
      secretCmds: [{ name: 'DB_PASSWORD', command: `cat '${source}' >&2; exit 7` }],
      schedule: { manual: true },
      attempts: 2,
      retryDelay: 1,
    });
    rmSync(file);

    const missing = await runNow(runtime, 'by-file');
    expect(missing.status).toBe('failed');
    expect(missing.error).toContain(`secret API_TOKEN: its file ${file} does not exist on this runner (runner test-host:1:runner)`);
    const failedSpawn = (await streamEvents(runtime, `run:${missing.id}`)).find((e) => e.type === 'process.spawn_failed')!;
    expect(failedSpawn.data).toEqual({ error: `secret API_TOKEN: its file ${file} does not exist on this runner (runner test-host:1:runner)`, code: 'ENOENT' });

    const failing = await runNow(runtime, 'by-cmd');
    expect(failing.status).toBe('failed');
    const events = await streamEvents(runtime, `run:${failing.id}`);
    expect(events.find((e) => e.type === 'process.spawn_failed')!.data).toEqual({
      error: 'secret DB_PASSWORD: its command exited with code 7 (its output is not recorded; run it yourself to see why) (runner test-host:1:runner)',
      code: 'ESECRETCMD',
    });
    expect(events.some((e) => e.type === 'process.spawned')).toBe(false);

    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(secretHolders(runtime.dataDir, [FILE_SECRET, CMD_SECRET])).toEqual([]);
    expectInvariants(runtime);
  });

  it('a secret command that does not finish within its timeout is killed with its whole process group, and fails', async () => {
    const clock = new SimulatedClock(Date.parse('2026-01-01T00:00:00Z'));
    const pidFile = join(tempDir(), 'pid');
    const pending = runSecretCommand({ name: 'SLOW_TOKEN', command: `sleep 60 & echo $! > '${pidFile}'; wait` }, { cwd: null, env: {}, clock });
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 5000, 'the command to start');
    const sleeper = Number(readFileSync(pidFile, 'utf8'));
    onTestFinished(() => killGroupIfAlive(sleeper));
    expect(isAlive(sleeper)).toBe(true);
    clock.advance(29_999);
    expect(isAlive(sleeper)).toBe(true);
    clock.advance(1);
    expect(await pending).toEqual({
      ok: false,
      error: 'secret SLOW_TOKEN: its command did not finish within 30 s and was killed (its output is not recorded; run it yourself to see why)',
      code: 'ETIMEDOUT',
    });
    await waitFor(() => !isAlive(sleeper), 2000, `the background sleep ${sleeper} to be gone`);
  });

  it('a command that prints nothing, or a file that is empty, is a failure too (an empty secret is a broken one)', async () => {
    const clock = new SimulatedClock(0);
    expect(await runSecretCommand({ name: 'T', command: 'true' }, { cwd: null, env: {}, clock })).toMatchObject({ ok: false, code: 'ENODATA' });
    expect(await runSecretCommand({ name: 'T', command: 'printf "x\\n"; exit 0' }, { cwd: null, env: {}, clock })).toEqual({ ok: true, value: 'x' });
    const runtime = await useRuntime();
    const empty = secretFile('empty', '\n');
    await createCommandLoop(runtime, { name: 'empty', command: 'true', secretFiles: [{ name: 'API_TOKEN', path: empty }], schedule: { manual: true } });
    const run = await runNow(runtime, 'empty');
    expect(run.status).toBe('failed');
    expect(run.error).toContain(`secret API_TOKEN: its file ${empty} is empty`);
  });

  it('refused when defined: a file in the data directory (or linked into it), a relative path that does not resolve; a file others can read is accepted', async () => {
    const runtime = await useRuntime();
    const inside = join(runtime.dataDir, 'token');
    writeFileSync(inside, FILE_SECRET, { mode: 0o600 });
    const base = { command: 'true', schedule: { manual: true } };
    await expect(createCommandLoop(runtime, { ...base, name: 'a', secretFiles: [{ name: 'T', path: inside }] })).rejects.toThrow(/is inside the data directory/);
    const link = join(tempDir(), 'link');
    symlinkSync(inside, link);
    await expect(createCommandLoop(runtime, { ...base, name: 'b', secretFiles: [{ name: 'T', path: link }] })).rejects.toThrow(/leads into the data directory .* \(through a link\)/);
    await expect(createCommandLoop(runtime, { ...base, name: 'c', secretFiles: [{ name: 'T', path: 'no/such/token' }] })).rejects.toThrow(/"no\/such\/token" does not resolve/);
    await expect(createCommandLoop(runtime, { ...base, name: 'd', secretFiles: [{ name: 'T', path: '/no/such/token' }] })).rejects.toThrow(/there is no file \/no\/such\/token/);
    // An absolute path put in place later: accepted with --no-preflight.
    expect((await createCommandLoop(runtime, { ...base, name: 'e', preflight: false, secretFiles: [{ name: 'T', path: '/no/such/token' }] })).target).toMatchObject({
      secretRefs: [{ name: 'T', from: 'file', path: '/no/such/token' }],
    });
    const open = secretFile('open', FILE_SECRET);
    chmodSync(open, 0o644);
    expect((await createCommandLoop(runtime, { ...base, name: 'f', secretFiles: [{ name: 'T', path: open }] })).name).toBe('f');
    expect(listLoops(runtime.db).map((l) => l.name)).toEqual(['e', 'f']);
  });

  it('a run finished from its files after its runner died is masked with its secret file, in the event and in the files', async () => {
    const T0 = Date.parse('2026-01-01T00:00:00.000Z');
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'new-host:2:recoverer' });
    const old = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'old-host:1:gone' });
    let closed = false;
    onTestFinished(() => {
      if (!closed) old.close();
    });
    const file = secretFile('api-token', `${FILE_SECRET}\n`);
    const loop = await createCommandLoop(runtime, { name: 'job', command: 'true', secretFiles: [{ name: 'API_TOKEN', path: file }], schedule: { manual: true } });
    const runId = await strandRun(old, loop, 'spawning');
    // The process its wrapper ran printed the value (raw and base64) while no runner watched it.
    const statusFile = join(runDir(runtime.dataDir, runId), 'exit-status');
    mkdirSync(dirname(statusFile), { recursive: true });
    const { file: wrapper, args } = wrapperArgv(statusFile, `cat '${file}'; printf %s "$(cat '${file}')" | base64 -w0; echo`, [], true);
    const out = openSync(join(dirname(statusFile), 'stdout.log'), 'a');
    const child = spawn(wrapper, args, { detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    onTestFinished(() => killGroupIfAlive(child.pid!));
    await once(child, 'exit');
    await waitForGroupGone(child.pid!);
    old.close();
    closed = true;
    clock.advance(30_001);
    expect(await recoverRuns(runtime)).toMatchObject({ exited: [runId], abandoned: [] });
    const exited = (await streamEvents(runtime, `run:${runId}`)).find((e) => e.type === 'process.exited')!;
    expect((exited.data as EventData<'process.exited'>).stdout).toBe('***\n***\n');
    expect(findRun(runtime.db, runId).status).toBe('succeeded');
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(secretHolders(runtime.dataDir, [FILE_SECRET])).toEqual([]);
  });
});

// ── loops secrets scrub ───────────────────────────────────────────────────────────────────────

const LEGACY = 'tok-legacy-4f9a1c77e2d0';
const OLD_PASSWORD = 'pw-old-hunter22';
const GH = 'ghp_legacy0123456789';
const NPM = 'npm_legacy0123456789';

/** A loop as a loops from before the refusal recorded it: a secret value in its --env. */
async function legacyLoop(runtime: Runtime, name: string, env: Record<string, string>): Promise<string> {
  const now = runtime.clock.now();
  const loopId = newId('loop', now);
  const target: Target = { kind: 'command', command: 'echo "token=$CLI_TOKEN mode=$MODE"', args: [], shell: true, cwd: null, env };
  await recordLoopCreated(runtime, {
    loopId,
    name,
    description: 'nightly sync',
    schedule: { kind: 'every', everyMs: 3_600_000, anchorAt: new Date(now).toISOString(), anchor: 'fixed-rate' },
    timing: { tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null },
    target,
    policies: findLoopPolicies(),
    nextRunAt: new Date(now + 3_600_000).toISOString(),
  });
  return loopId;
}

function findLoopPolicies(): EventData<'loop.created'>['policies'] {
  return { timeoutMs: null, killGraceMs: 5000, overlap: 'skip', catchUp: 'latest', catchUpWindowMs: null, catchUpLimit: null, attempts: 1, retryDelayMs: 30_000, backoff: 2, maxRetryDelayMs: null, leaseMs: 30_000 };
}

/** A workflow whose next version, as a loops from before the refusal recorded it, holds secret values in env: (its own and a step's). */
async function legacyWorkflow(runtime: Runtime): Promise<string> {
  const file = join(tempDir(), 'ship.yaml');
  writeFileSync(file, ['name: ship', 'steps:', '  - id: deploy', '    run: echo "gh=$GH_TOKEN npm=$NPM_TOKEN"', ''].join('\n'));
  const { workflow } = await createWorkflow(runtime, file);
  const spec: WorkflowSpec = {
    ...workflow.spec,
    env: { GH_TOKEN: GH, REGION: 'eu' },
    steps: workflow.spec.steps.map((s) => ({ ...s, target: { ...s.target, env: { NPM_TOKEN: NPM } } })),
  };
  const actor = await DurableActor.load(runtime, `workflow:${workflow.id}`);
  await actor.record('workflow.updated', { version: 2, spec, sourceFile: file, sha256: null });
  return workflow.id;
}

describe('secrets: loops secrets scrub', () => {
  it('redefines live loops and workflows forward — a dry run records nothing; the loop keeps its name, schedule and state; doctor then calls the definitions clean and the history not', async () => {
    const runtime = await useRuntime();
    const oldId = await legacyLoop(runtime, 'backup', { CLI_TOKEN: LEGACY, MODE: 'fast' });
    await changeLoopState(runtime, 'backup', 'pause', { reason: 'on holiday' });
    const goneId = await legacyLoop(runtime, 'gone', { DB_PASSWORD: OLD_PASSWORD });
    await changeLoopState(runtime, 'gone', 'remove');
    const wfId = await legacyWorkflow(runtime);
    const before = findLoop(runtime.db, 'backup');
    const doctor = async () => (await runDoctor({ dataDir: runtime.dataDir })).checks.find((c) => c.id === 'stored-secrets')!;
    expect(await doctor()).toMatchObject({ status: 'warn' });

    const count = () => (runtime.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
    const events = count();
    const dry = await scrubSecrets(runtime, { dryRun: true });
    expect(count()).toBe(events);
    expect(dry).toMatchObject({
      dryRun: true,
      loops: [{ name: 'backup', oldId, newId: null, status: 'paused', moved: ['CLI_TOKEN'], dropped: 0, skipped: null }],
      workflows: [{ name: 'ship', id: wfId, fromVersion: 2, toVersion: null, moved: ['env.GH_TOKEN', 'step deploy: env.NPM_TOKEN'], names: ['GH_TOKEN', 'NPM_TOKEN'] }],
      mustSet: ['CLI_TOKEN', 'GH_TOKEN', 'NPM_TOKEN'],
    });

    const report = await scrubSecrets(runtime);
    const after = findLoop(runtime.db, 'backup');
    expect(report.loops).toEqual([{ name: 'backup', oldId, newId: after.id, status: 'paused', moved: ['CLI_TOKEN'], dropped: 0, skipped: null }]);
    expect(report.history).toEqual([
      `loop backup (removed, ${oldId}): --env CLI_TOKEN`,
      `loop gone (removed, ${goneId}): --env DB_PASSWORD`,
      'workflow ship v2: env.GH_TOKEN',
      'workflow ship v2, step deploy: env.NPM_TOKEN',
    ]);
    expect(after.id).not.toBe(oldId);
    expect(after).toMatchObject({ status: 'paused', reason: 'on holiday', description: 'nightly sync', schedule: before.schedule, timing: before.timing, policies: before.policies });
    expect(after.target).toEqual({ ...before.target, env: { MODE: 'fast' }, secretEnv: ['CLI_TOKEN'] });
    expect(findLoop(runtime.db, oldId, { includeRemoved: true })).toMatchObject({ status: 'removed', reason: `replaced by loop ${after.id}, its secrets passed by name (loops secrets scrub)` });
    const wf = findWorkflow(runtime.db, 'ship');
    expect(wf.version).toBe(3);
    expect(wf.spec.env).toEqual({ REGION: 'eu' });
    expect(wf.spec.secrets).toEqual(['GH_TOKEN', 'NPM_TOKEN']);
    expect(wf.spec.steps[0]!.target.env).toEqual({});

    const check = await doctor();
    expect(check.status).toBe('ok');
    expect(check.detail).toMatch(/^no live loop or workflow definition holds a value under a secret name; the log's history still holds 4 values/);

    // The new loop reads the value from the runner's environment; without it, the run fails naming it.
    const unset = await runNow(runtime, 'backup');
    expect(unset.status).toBe('failed');
    expect(unset.error).toContain('secret variable CLI_TOKEN not set in the environment of runner');
    process.env.CLI_TOKEN = 'tok-from-the-environment-1';
    onTestFinished(() => {
      delete process.env.CLI_TOKEN;
    });
    const set = await runNow(runtime, 'backup');
    expect(set.status).toBe('succeeded');
    expect(set.stdout).toBe('token=*** mode=fast\n');

    // Nothing left to do; the values are in the history only (the events before the scrub).
    expect(await scrubSecrets(runtime)).toMatchObject({ loops: [], workflows: [], mustSet: [] });
    const rows = runtime.db.prepare("SELECT COUNT(*) AS n FROM events WHERE data LIKE '%' || ? || '%'").get(LEGACY) as { n: number };
    expect(rows.n).toBe(1); // the old loop.created: history is never rewritten
    expectInvariants(runtime);
  });

  it('a stopped loop stays stopped; a fired slot nobody started is dropped, as a remove drops it; --max-runs counts the runs left', async () => {
    const clock = new SimulatedClock(Date.parse('2026-01-01T00:00:00.000Z'));
    const runtime = await useRuntime({ clock });
    const legacy = async (name: string, maxRuns: number | null) => {
      const loopId = newId('loop', clock.now());
      await recordLoopCreated(runtime, {
        loopId,
        name,
        description: null,
        schedule: { kind: 'every', everyMs: 60_000, anchorAt: new Date(clock.now()).toISOString(), anchor: 'fixed-rate' },
        timing: { tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns },
        target: { kind: 'command', command: 'true', args: [], shell: true, cwd: null, env: { API_KEY: 'key-1234567890' } },
        policies: findLoopPolicies(),
        nextRunAt: new Date(clock.now() + 60_000).toISOString(),
      });
      return loopId;
    };
    await legacy('halted', null);
    await changeLoopState(runtime, 'halted', 'stop', { reason: 'later' });
    const cappedId = await legacy('capped', 5);
    clock.advance(60_000);
    const { fired } = await decideLoop(runtime, cappedId, clock.now());
    expect(fired).toHaveLength(1);
    expect(findLoop(runtime.db, 'capped').scheduledRuns).toBe(1);

    const report = await scrubSecrets(runtime);
    expect(report.loops).toMatchObject([
      { name: 'capped', status: 'active', moved: ['API_KEY'], dropped: 1, skipped: null },
      { name: 'halted', status: 'stopped', moved: ['API_KEY'], dropped: 0, skipped: null },
    ]);
    expect(findLoop(runtime.db, 'halted')).toMatchObject({ status: 'stopped', reason: 'later', target: { env: {}, secretEnv: ['API_KEY'] } });
    const capped = findLoop(runtime.db, 'capped');
    expect(capped).toMatchObject({ status: 'active', scheduledRuns: 0, timing: { maxRuns: 4 } });
    expect(capped.nextRunAt).toBe(new Date(clock.now() + 60_000).toISOString());
    const old = await streamEvents(runtime, `loop:${cappedId}`);
    expect(old.slice(-2).map((e) => e.type)).toEqual(['slot.dropped', 'loop.removed']);
    expect(old[old.length - 2]!.data).toMatchObject({ runId: fired[0]!.runId, reason: 'loop removed before it started' });
    expectInvariants(runtime, { processes: false });
  });
});
