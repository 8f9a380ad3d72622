/**
 * Builders for machine events with valid payloads (checked against the catalogue in
 * catalog.unit.test.ts). Times default to a fixed base so tests are deterministic.
 */
import type { EventData, EventType, LoopPolicies, Schedule, Target, Timing } from '../../src/events/catalog.js';
import type { StepSpec, WorkflowSpec } from '../../src/workflow/spec.js';

export const T0 = Date.parse('2026-03-01T12:00:00.000Z');

/** ISO instant `ms` after T0. */
export function at(ms = 0): string {
  return new Date(T0 + ms).toISOString();
}

export interface Ev<T extends EventType> {
  type: T;
  at: string;
  data: EventData<T>;
}

function ev<T extends EventType>(type: T, data: EventData<T>, when: string): Ev<T> {
  return { type, at: when, data };
}

export const commandTarget = (overrides: Partial<Extract<Target, { kind: 'command' }>> = {}): Target => ({
  kind: 'command',
  command: 'echo hi',
  args: [],
  shell: true,
  cwd: null,
  env: {},
  ...overrides,
});

export const policies = (overrides: Partial<LoopPolicies> = {}): LoopPolicies => ({
  timeoutMs: null,
  killGraceMs: 5000,
  overlap: 'skip',
  catchUp: 'latest',
  catchUpWindowMs: null,
  catchUpLimit: null,
  attempts: 1,
  retryDelayMs: 10_000,
  backoff: 2,
  maxRetryDelayMs: null,
  leaseMs: 30_000,
  ...overrides,
});

export const everySchedule: Schedule = { kind: 'every', everyMs: 60_000, anchorAt: at(0), anchor: 'fixed-rate' };

export const timing = (overrides: Partial<Timing> = {}): Timing => ({
  tz: 'UTC',
  jitterMs: null,
  startsAt: null,
  expiresAt: null,
  maxRuns: null,
  ...overrides,
});

// ── loop stream ─────────────────────────────────────────────────────────────
export const loopEv = {
  created: (data: Partial<EventData<'loop.created'>> = {}, when = at(0)) =>
    ev(
      'loop.created',
      {
        loopId: 'loop_1',
        name: 'backup',
        description: null,
        schedule: everySchedule,
        timing: timing(),
        target: commandTarget(),
        policies: policies(),
        nextRunAt: at(60_000),
        ...data,
      },
      when,
    ),
  paused: (reason: string | null = null, when = at(1000)) => ev('loop.paused', { reason }, when),
  expired: (reason: EventData<'loop.expired'>['reason'] = 'max-runs', when = at(9000)) => ev('loop.expired', { reason }, when),
  rescheduled: (nextRunAt = at(180_000), after: string | null = 'run_1', when = at(120_000)) =>
    ev('loop.rescheduled', { nextRunAt, after }, when),
  resumed: (nextRunAt: string | null = at(120_000), reason: string | null = null, when = at(2000)) =>
    ev('loop.resumed', { reason, nextRunAt }, when),
  stopped: (reason: string | null = null, when = at(3000)) => ev('loop.stopped', { reason }, when),
  archived: (reason: string | null = null, when = at(4000)) => ev('loop.archived', { reason }, when),
  removed: (reason: string | null = null, when = at(5000)) => ev('loop.removed', { reason }, when),
};

// ── run stream ──────────────────────────────────────────────────────────────
export const runEv = {
  claimed: (data: Partial<EventData<'run.claimed'>> = {}, when = at(0)) =>
    ev(
      'run.claimed',
      {
        runId: 'run_1',
        loopId: 'loop_1',
        loopName: 'backup',
        slot: 'manual:run_1',
        scheduledFor: at(0),
        attempt: 1,
        trigger: 'manual',
        target: commandTarget(),
        policies: policies(),
        runnerId: 'host:1:abc',
        leaseToken: 1,
        ...data,
      },
      when,
    ),
  spawnRequested: (data: Partial<EventData<'process.spawn_requested'>> = {}, when = at(10)) =>
    ev(
      'process.spawn_requested',
      { command: 'echo hi', args: [], shell: true, cwd: null, envKeys: ['LOOPS_RUN_ID'], timeoutAt: null, ...data },
      when,
    ),
  spawned: (data: Partial<EventData<'process.spawned'>> = {}, when = at(20)) =>
    ev('process.spawned', { pid: 4242, pgid: 4242, startTime: '123456', bootId: 'boot-1', ...data }, when),
  spawnFailed: (error = 'command not found: nope', code: string | null = 'ENOENT', when = at(30)) =>
    ev('process.spawn_failed', { error, code }, when),
  cancelRequested: (reason: string | null = null, when = at(500)) => ev('run.cancel_requested', { reason }, when),
  exited: (data: Partial<EventData<'process.exited'>> = {}, when = at(1020)) =>
    ev(
      'process.exited',
      {
        exitCode: 0,
        signal: null,
        timedOut: false,
        cancelled: false,
        stdout: 'hi\n',
        stderr: '',
        stdoutBytes: 3,
        stderrBytes: 0,
        durationMs: 1000,
        error: null,
        ...data,
      },
      when,
    ),
  abandoned: (reason = 'runner lost the process', when = at(2000)) => ev('run.abandoned', { reason }, when),
  adopted: (data: Partial<EventData<'process.adopted'>> = {}, when = at(1500)) =>
    ev('process.adopted', { runnerId: 'host:2:daemon', leaseToken: 2, pid: 4242, reason: 'its runner host:1:cli stopped while its process went on', ...data }, when),
  agentReported: (data: Partial<EventData<'run.agent_reported'>> = {}, when = at(3000)) =>
    ev(
      'run.agent_reported',
      {
        provider: 'claude',
        cliVersion: '2.0.0',
        model: 'claude-sonnet-4-5',
        sessionId: 'sess-1',
        turns: 3,
        durationMs: 1500,
        tokens: { input: 10, output: 20, cacheRead: 5, cacheWrite: 0 },
        costUsd: 0.01,
        finalMessage: 'done',
        isError: false,
        parseError: null,
        ...data,
      },
      when,
    ),
  workflowStarted: (data: Partial<EventData<'run.workflow_started'>> = {}, when = at(1000)) =>
    ev('run.workflow_started', { wfRunId: 'wfrun_1', workflowId: 'wf_1', idempotencyKey: 'loop:loop_1:slot:1', ...data }, when),
  workflowEnded: (data: Partial<EventData<'run.workflow_ended'>> = {}, when = at(3000)) =>
    ev('run.workflow_ended', { wfRunId: 'wfrun_1', status: 'succeeded', error: null, ...data }, when),
  /** Another tool's finished run, brought across by `loops import --with-history`. */
  imported: (data: Partial<EventData<'run.imported'>> = {}, when = at(5000)) =>
    ev(
      'run.imported',
      {
        runId: 'run_abc123',
        loopId: 'loop_1',
        loopName: 'nightly',
        slot: at(0),
        scheduledFor: at(0),
        attempt: 1,
        trigger: 'schedule',
        target: commandTarget(),
        status: 'failed',
        exitCode: 2,
        pid: 4242,
        error: 'process exited with code 2',
        stdout: 'out\n',
        stderr: '',
        stdoutBytes: 4,
        stderrBytes: 0,
        startedAt: at(0),
        finishedAt: at(1000),
        durationMs: 1000,
        wfRunId: null,
        importedFrom: { tool: '@hasna/loops 0.3', db: '/old/loops.db', id: 'abc123' },
        ...data,
      },
      when,
    ),
};

// ── slot decisions (loop stream) ────────────────────────────────────────────
export const slotEv = {
  fired: (data: Partial<EventData<'slot.fired'>> = {}, when = at(60_000)) =>
    ev('slot.fired', { slot: at(60_000), fireAt: at(60_000), runId: 'run_1', late: false, nextRunAt: at(120_000), ...data }, when),
  retryScheduled: (data: Partial<EventData<'slot.retry_scheduled'>> = {}, when = at(70_000)) =>
    ev('slot.retry_scheduled', { slot: at(60_000), attempt: 2, runId: 'run_2', dueAt: at(80_000), after: 'run_1', reason: 'failed: exited with code 1', ...data }, when),
  skipped: (data: Partial<EventData<'slot.skipped'>> = {}, when = at(120_000)) =>
    ev('slot.skipped', { slot: at(120_000), fireAt: at(120_000), reason: 'overlap', blockedBy: 'run_1', nextRunAt: at(180_000), ...data }, when),
  buffered: (data: Partial<EventData<'slot.buffered'>> = {}, when = at(120_000)) =>
    ev(
      'slot.buffered',
      { slot: at(120_000), fireAt: at(120_000), runId: 'run_2', policy: 'buffer-one', blockedBy: 'run_1', cancels: [], nextRunAt: at(180_000), ...data },
      when,
    ),
  coalesced: (data: Partial<EventData<'slot.coalesced'>> = {}, when = at(600_000)) =>
    ev('slot.coalesced', { from: at(60_000), to: at(540_000), count: 9, into: at(600_000), ...data }, when),
  missed: (data: Partial<EventData<'slot.missed'>> = {}, when = at(600_000)) =>
    ev('slot.missed', { from: at(60_000), to: at(540_000), count: 9, reason: 'catch-up none', nextRunAt: at(660_000), ...data }, when),
  dropped: (data: Partial<EventData<'slot.dropped'>> = {}, when = at(700_000)) =>
    ev('slot.dropped', { runId: 'run_1', slot: at(60_000), attempt: 1, reason: 'loop stopped before it started', ...data }, when),
};

// ── workflow specs ──────────────────────────────────────────────────────────
/** A canonical command step: `echo <id>` with no retries. */
export const wfStep = (id: string, overrides: Partial<StepSpec> = {}): StepSpec => ({
  id,
  name: null,
  target: { type: 'command', command: `echo ${id}`, args: [], shell: true, cwd: null, env: {} },
  needs: [],
  if: null,
  continueOnError: false,
  timeoutMs: null,
  retries: { attempts: 1, delayMs: 10_000, backoff: 2, maxDelayMs: null },
  outputs: [],
  ...overrides,
});

/** A canonical spec; by default the diamond a → (b, c) → d. */
export const wfSpec = (overrides: Partial<WorkflowSpec> = {}): WorkflowSpec => ({
  name: 'diamond',
  description: null,
  env: {},
  secrets: [],
  concurrency: 4,
  timeoutMs: null,
  inputs: {},
  steps: [wfStep('a'), wfStep('b', { needs: ['a'] }), wfStep('c', { needs: ['a'] }), wfStep('d', { needs: ['b', 'c'] })],
  ...overrides,
});

// ── workflow spec stream ────────────────────────────────────────────────────
export const workflowEv = {
  created: (data: Partial<EventData<'workflow.created'>> = {}, when = at(0)) =>
    ev(
      'workflow.created',
      { workflowId: 'wf_1', name: 'diamond', version: 1, spec: wfSpec(), sourceFile: '/work/diamond.yaml', sha256: 'ab'.repeat(32), ...data },
      when,
    ),
  updated: (data: Partial<EventData<'workflow.updated'>> = {}, when = at(1000)) =>
    ev('workflow.updated', { version: 2, spec: wfSpec(), sourceFile: '/work/diamond.yaml', sha256: 'cd'.repeat(32), ...data }, when),
  archived: (reason: string | null = null, when = at(2000)) => ev('workflow.archived', { reason }, when),
};

// ── workflow run stream ─────────────────────────────────────────────────────
export const wfrunEv = {
  /** Another tool's finished workflow run, brought across by `loops import --with-history`. */
  imported: (data: Partial<EventData<'wfrun.imported'>> = {}, when = at(5000)) =>
    ev(
      'wfrun.imported',
      {
        wfRunId: 'wfrun_abc123',
        workflowId: 'wf_1',
        workflowName: 'diamond',
        version: 1,
        spec: wfSpec(),
        trigger: 'manual',
        loopId: null,
        loopRunId: null,
        slot: null,
        status: 'succeeded',
        startedAt: at(0),
        finishedAt: at(4000),
        error: null,
        steps: wfSpec().steps.map((step, i) => ({
          stepId: step.id,
          status: 'succeeded' as const,
          reason: null,
          exitCode: 0,
          pid: 100 + i,
          error: null,
          stdout: '',
          stderr: '',
          stdoutBytes: 0,
          stderrBytes: 0,
          startedAt: at(i * 1000),
          finishedAt: at(i * 1000 + 900),
          durationMs: 900,
        })),
        importedFrom: { tool: '@hasna/loops 0.3', db: '/old/loops.db', id: 'abc123' },
        ...data,
      },
      when,
    ),
  started: (data: Partial<EventData<'wfrun.started'>> = {}, when = at(0)) =>
    ev(
      'wfrun.started',
      {
        wfRunId: 'wfrun_1',
        workflowId: 'wf_1',
        workflowName: 'diamond',
        version: 1,
        spec: wfSpec(),
        inputs: {},
        trigger: 'manual',
        loopId: null,
        slot: null,
        attempt: 1,
        idempotencyKey: 'manual:wfrun_1',
        runnerId: 'host:1:abc',
        leaseToken: 1,
        // A run that records its decisions (step.skipped, step.retry_scheduled); 'derived': one from before.
        decisions: 'recorded',
        ...data,
      },
      when,
    ),
  spawnRequested: (stepId: string, attempt = 1, when = at(10), data: Partial<EventData<'step.spawn_requested'>> = {}) =>
    ev(
      'step.spawn_requested',
      { stepId, attempt, command: `echo ${stepId}`, args: [], shell: true, cwd: null, envKeys: ['LOOPS_WFRUN_ID'], timeoutAt: null, ...data },
      when,
    ),
  spawned: (stepId: string, attempt = 1, when = at(20), data: Partial<EventData<'step.spawned'>> = {}) =>
    ev('step.spawned', { stepId, attempt, pid: 4242, pgid: 4242, startTime: '123456', bootId: 'boot-1', ...data }, when),
  spawnFailed: (stepId: string, attempt = 1, when = at(30), error = 'command not found: nope', code: string | null = 'ENOENT') =>
    ev('step.spawn_failed', { stepId, attempt, error, code }, when),
  exited: (stepId: string, attempt = 1, when = at(1020), data: Partial<EventData<'step.exited'>> = {}) =>
    ev(
      'step.exited',
      {
        stepId,
        attempt,
        exitCode: 0,
        signal: null,
        timedOut: false,
        cancelled: false,
        stdout: `${stepId}\n`,
        stderr: '',
        stdoutBytes: stepId.length + 1,
        stderrBytes: 0,
        durationMs: 1000,
        error: null,
        outputs: {},
        ...data,
      },
      when,
    ),
  abandoned: (stepId: string, attempt = 1, when = at(2000), reason = 'runner lost the process') =>
    ev('step.abandoned', { stepId, attempt, reason }, when),
  retryDue: (stepId: string, attempt = 2, when = at(11_000)) => ev('step.retry_due', { stepId, attempt }, when),
  skipped: (stepId: string, reason = 'needs a which failed', when = at(1020)) => ev('step.skipped', { stepId, reason }, when),
  retryScheduled: (stepId: string, attempt = 2, dueAt = at(11_020), reason = `attempt ${attempt - 1} failed: exited with code 1`, when = at(1020)) =>
    ev('step.retry_scheduled', { stepId, attempt, dueAt, reason }, when),
  cancelRequested: (reason: string | null = null, when = at(500)) => ev('wfrun.cancel_requested', { reason }, when),
  timedOut: (timeoutMs = 60_000, when = at(60_000)) => ev('wfrun.timed_out', { timeoutMs }, when),
  /** A fork's reused step (`loops fork`): the parent's result, recorded with the fork's wfrun.started. */
  reused: (stepId: string, data: Partial<EventData<'step.reused'>> = {}, when = at(0)) =>
    ev(
      'step.reused',
      { stepId, fromRunId: 'wfrun_parent', status: 'succeeded', exitCode: 0, signal: null, error: null, outputs: {}, set: [], agent: null, reason: null, ...data },
      when,
    ),
  /** The annotation on a parent's stream naming its fork or rerun. */
  forked: (childRunId = 'wfrun_child', when = at(90_000)) =>
    ev('stream.forked', { childRunId, forkedFrom: { runId: 'wfrun_1', from: 'b', reason: null, how: 'fork' } }, when),
};

// ── accounts (account stream) ────────────────────────────────────────────────
export const accountEv = {
  added: (data: Partial<EventData<'account.added'>> = {}, when = at(0)) =>
    ev('account.added', { accountId: 'acct_1', name: 'work', tool: 'claude', dir: '/home/u/.claude-work', ...data }, when),
  removed: (reason: string | null = null, when = at(1000)) => ev('account.removed', { reason }, when),
};

// ── hosts (host stream) ──────────────────────────────────────────────────────
export const hostEv = {
  started: (data: Partial<EventData<'host.started'>> = {}, when = at(0)) =>
    ev('host.started', { hostId: 'gpu-box', runnerId: 'gpu-box:42:abc123', labels: ['gpu'], pid: 42, bootId: 'boot-1', version: '0.1.0', ...data }, when),
  stopped: (data: Partial<EventData<'host.stopped'>> = {}, when = at(1000)) => ev('host.stopped', { runnerId: 'gpu-box:42:abc123', reason: 'SIGTERM received', ...data }, when),
};

// ── retention (stream retention:output) ──────────────────────────────────────
export const retentionEv = {
  runOutputPruned: (data: Partial<EventData<'run.output_pruned'>> = {}, when = at(86_400_000)) =>
    ev('run.output_pruned', { runId: 'run_1', loopId: 'loop_1', bytes: 1234, cutoff: at(3_600_000), keepLast: null, ...data }, when),
  wfrunOutputPruned: (data: Partial<EventData<'wfrun.output_pruned'>> = {}, when = at(86_400_000)) =>
    ev('wfrun.output_pruned', { wfRunId: 'wfrun_1', workflowId: 'wf_1', loopRunId: null, bytes: 4321, cutoff: null, keepLast: 3, ...data }, when),
  /** A run stream's tombstone: versions 1..4 moved to an archive file. */
  archived: (data: Partial<EventData<'stream.archived'>> = {}, when = at(2 * 86_400_000)) =>
    ev(
      'stream.archived',
      {
        file: 'archive/runs-20260502T000000Z-aaaaaaaaaaaa.jsonl',
        sha256: 'a'.repeat(64),
        fromVersion: 1,
        toVersion: 4,
        events: 4,
        machine: { id: 'loops.run', version: 1 },
        state: 'succeeded',
        rows: { loop_runs: [{ id: 'run_1', loop_id: 'loop_1', status: 'succeeded', attempt: 1 }] },
        ...data,
      },
      when,
    ),
};

// ── notices (stream notice:<id>): --on-failure, --notify-url ─────────────────
export const noticeEv = {
  requested: (data: Partial<EventData<'notice.requested'>> = {}, when = at(2000)) =>
    ev(
      'notice.requested',
      {
        noticeId: 'run_1.url',
        loopId: 'loop_1',
        loopName: 'backup',
        runId: 'run_1',
        runStatus: 'failed',
        channel: 'url' as const,
        command: null,
        env: null,
        url: 'https://hooks.example.com/loops',
        payload: { type: 'run.failed' },
        attempts: 3,
        timeoutMs: 10_000,
        retryDelayMs: 1000,
        ...data,
      },
      when,
    ),
  hookClaimed: (hookRunId = 'run_2', when = at(2100), replaces: string | null = null) => ev('notice.hook_claimed', { hookRunId, replaces }, when),
  hookEnded: (data: Partial<EventData<'notice.hook_ended'>> = {}, when = at(3000)) =>
    ev('notice.hook_ended', { hookRunId: 'run_2', status: 'succeeded', error: null, ...data }, when),
  attemptFailed: (data: Partial<EventData<'notice.attempt_failed'>> = {}, when = at(2500)) =>
    ev('notice.attempt_failed', { attempt: 1, error: 'HTTP 500 Internal Server Error', httpStatus: 500, retryAt: at(3500), ...data }, when),
  delivered: (data: Partial<EventData<'notice.delivered'>> = {}, when = at(4000)) => ev('notice.delivered', { attempt: 2, httpStatus: 200, ...data }, when),
  givenUp: (data: Partial<EventData<'notice.given_up'>> = {}, when = at(4000)) => ev('notice.given_up', { attempts: 3, error: 'no answer within 10000 ms', ...data }, when),
};
