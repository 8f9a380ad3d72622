/**
 * The event catalogue: one zod schema per event type, each with a schema version.
 * Events are never rewritten; a changed payload gets a new version and an upcaster here.
 *
 * Over 500 lines on purpose: the catalogue is the one list of every event the system can record,
 * read as a whole when a payload changes; splitting it would hide a type from its upcaster.
 *
 * Every schema is built when it is first used, not when the module loads (issue 14): a command
 * validates a handful of event types, and building all of them cost a cold `loops run-now` ~30 ms.
 * The shared parts below are builders (`scheduleSchema()`), each building its schema once; each
 * event type's `schema` is built on its first validation. What they accept, and the messages they
 * give, are as they were.
 */
import { z } from 'zod';
import { ValidationError } from './errors.js';
import { CATCH_UP_POLICY_NAMES, OVERLAP_POLICY_NAMES, RETRY, WAITING_OVERLAP_POLICY_NAMES } from './policies.js';
import { workflowSpecSchema } from './workflow-model.js';
import { LABEL_RE } from './names.js';

/** `build`, called once, on the first call (the schemas below are built when first needed). */
function lazy<T>(build: () => T): () => T {
  let built: T | undefined;
  return () => (built ??= build());
}

const isoInstant = lazy(() => z.string().datetime({ offset: true }));

export const scheduleSchema = lazy(() =>
  z.discriminatedUnion('kind', [
    z
      .object({
        kind: z.literal('every'),
        everyMs: z.number().int().positive(),
        anchorAt: isoInstant(),
        /** fixed-rate: slots at anchorAt + k·every; fixed-delay: every after the previous run finished. */
        anchor: z.enum(['fixed-rate', 'fixed-delay']),
      })
      .strict(),
    z
      .object({
        kind: z.literal('cron'),
        expr: z.string().min(1),
        tz: z.string().min(1),
        /**
         * The cron rules the loop was created under (src/scheduling/cron.ts): absent = 1, every job
         * fixed-time across DST (what loops created before it recorded meant); 2 = Vixie cron's DST
         * rules, `@midnight`, skipped calendar days, day-of-month steps across month ends.
         */
        rules: z.literal(2).optional(),
      })
      .strict(),
    z.object({ kind: z.literal('at'), at: isoInstant() }).strict(),
    z.object({ kind: z.literal('manual') }).strict(),
  ]),
);
export type Schedule = z.infer<ReturnType<typeof scheduleSchema>>;

/** When a loop's slots may exist and how their fire time is spread. */
export const timingSchema = lazy(() =>
  z
    .object({
      /** The loop's IANA zone, recorded at creation (cron and local times are read in it). */
      tz: z.string().min(1),
      /** Deterministic offset in [0, jitterMs) per (loop, slot), so replays compute the same time. */
      jitterMs: z.number().int().positive().nullable(),
      /** No slot before this instant. */
      startsAt: isoInstant().nullable(),
      /** No slot after this instant; the loop then ends (expired). */
      expiresAt: isoInstant().nullable(),
      /** The loop ends after this many scheduled runs. */
      maxRuns: z.number().int().positive().nullable(),
    })
    .strict(),
);
export type Timing = z.infer<ReturnType<typeof timingSchema>>;

/**
 * A secret a run reads when its process starts, on the runner that starts it: the contents of a
 * file (`--secret-file NAME=PATH`, the path absolute) or what a command prints (`--secret-cmd
 * NAME=COMMAND`, run by /bin/sh). Only this reference is stored — never the value; the process gets
 * the value as the variable `name`, and it is masked in output like every secret.
 */
export const secretRefSchema = lazy(() =>
  z.discriminatedUnion('from', [
    z.object({ name: z.string().min(1), from: z.literal('file'), path: z.string().min(1) }).strict(),
    z.object({ name: z.string().min(1), from: z.literal('cmd'), command: z.string().min(1) }).strict(),
  ]),
);
export type SecretRef = z.infer<ReturnType<typeof secretRefSchema>>;

export const commandTargetSchema = lazy(() =>
  z
    .object({
      kind: z.literal('command'),
      /** With `shell: true` a shell command line; otherwise the executable. */
      command: z.string().min(1),
      args: z.array(z.string()),
      shell: z.boolean(),
      cwd: z.string().nullable(),
      env: z.record(z.string(), z.string()),
      /** Names of variables passed from the runner's environment: their values are never stored, and are masked in output. */
      secretEnv: z.array(z.string()).optional(),
      /** Secrets read from a file or a command when each process starts (absent in events written before them). */
      secretRefs: z.array(secretRefSchema()).optional(),
      /** Names in `env` the user said are not secrets although their names say so (`--not-secret`). */
      notSecret: z.array(z.string()).optional(),
      /** The credentials profile its runs use (`--account`; absent in events written before it: none). */
      account: z.string().min(1).optional(),
      /** The tool the profile is resolved for (`--account-tool`), given with `account`. */
      accountTool: z.string().min(1).optional(),
    })
    .strict(),
);
/** A loop whose runs are runs of a workflow (the latest version when each run starts). */
export const workflowTargetSchema = lazy(() =>
  z
    .object({
      kind: z.literal('workflow'),
      workflowId: z.string().min(1),
      workflowName: z.string().min(1),
    })
    .strict(),
);
/** A loop whose runs are runs of an AI coding-agent CLI (see docs/agents.md for each provider's argv). */
export const agentTargetSchema = lazy(() =>
  z
    .object({
      kind: z.literal('agent'),
      provider: z.enum(['claude', 'codex', 'cursor', 'opencode', 'gemini', 'codewith', 'aicopilot']),
      /** The prompt (exactly one of prompt / promptFile); it reaches the CLI on stdin or from a file, not in argv, where the CLI allows. */
      prompt: z.string().min(1).nullable(),
      /** A file read when each run starts. */
      promptFile: z.string().min(1).nullable(),
      model: z.string().min(1).nullable(),
      agent: z.string().min(1).nullable(),
      cwd: z.string().nullable(),
      env: z.record(z.string(), z.string()),
      permissionMode: z.string().min(1).nullable(),
      extraArgs: z.array(z.string()),
      /**
       * `login` (new agents' default since it existed): the CLI keeps its own configuration directory
       * (the user's login) and gets its own flags that shut out user and project settings; `safe`: its
       * configuration variable points at an empty directory under the data directory (what every
       * recorded `safe` means; `--config-isolation empty` records it); `none`: as the user's shell.
       */
      configIsolation: z.enum(['safe', 'none', 'login']),
      account: z.string().min(1).nullable(),
      /** The tool `account` is resolved for when it is not the provider (`--account-tool`; absent: the provider). */
      accountTool: z.string().min(1).optional(),
      maxTurns: z.number().int().positive().nullable(),
      maxCostUsd: z.number().positive().nullable(),
      /** No output for this long stops the run (recorded timed_out). */
      idleTimeoutMs: z.number().int().positive().nullable(),
      secretEnv: z.array(z.string()).optional(),
      secretRefs: z.array(secretRefSchema()).optional(),
      notSecret: z.array(z.string()).optional(),
    })
    .strict(),
);
export const targetSchema = lazy(() => z.discriminatedUnion('kind', [commandTargetSchema(), workflowTargetSchema(), agentTargetSchema()]));
export type Target = z.infer<ReturnType<typeof targetSchema>>;
export type CommandTarget = z.infer<ReturnType<typeof commandTargetSchema>>;
export type WorkflowTarget = z.infer<ReturnType<typeof workflowTargetSchema>>;
export type LoopAgentTarget = z.infer<ReturnType<typeof agentTargetSchema>>;

export const loopPoliciesSchema = lazy(() =>
  z
    .object({
      /** Hard timeout per run in ms, null for none. */
      timeoutMs: z.number().int().positive().nullable(),
      /** Grace period between SIGTERM and SIGKILL in ms. */
      killGraceMs: z.number().int().nonnegative(),
      /**
       * A slot comes due while a run of the loop is still going: skip it; buffer it to run when the
       * going run ends (buffer-one keeps at most one waiting, buffer-all every one, in order);
       * cancel the going run and run the new slot after it (cancel-other); or run both (allow).
       * The names and what each does: `OVERLAP` in ./policies.ts.
       */
      overlap: z.enum(OVERLAP_POLICY_NAMES),
      /** Slots missed while nothing was scheduling (downtime, sleep, a clock jump): `CATCH_UP` in ./policies.ts. */
      catchUp: z.enum(CATCH_UP_POLICY_NAMES),
      /** Missed slots older than this are not caught up (null: no limit). */
      catchUpWindowMs: z.number().int().positive().nullable(),
      /** With catch-up `all`: at most this many missed slots are run (the most recent ones). */
      catchUpLimit: z.number().int().positive().nullable(),
      /** Attempts per slot (1 = no retry). A failed, timed-out or abandoned attempt is retried. */
      attempts: z.number().int().positive(),
      /** Delay before the first retry; each later one is `backoff` times longer, at most maxRetryDelayMs. */
      retryDelayMs: z.number().int().nonnegative(),
      backoff: z.number().min(RETRY.backoff.min),
      maxRetryDelayMs: z.number().int().positive().nullable(),
      /** Run lease time-to-live: a run whose runner stops renewing it for this long is recovered. */
      leaseMs: z.number().int().positive(),
    })
    .strict(),
);
export type LoopPolicies = z.infer<ReturnType<typeof loopPoliciesSchema>>;

/**
 * Who is told when a run of the loop ends (`--on-failure`, `--notify-url`, `--notify-on`): absent
 * in every loop.created written before it, which means nobody is told (the old default).
 */
export const loopNotifySchema = lazy(() =>
  z
    .object({
      /** A /bin/sh command run after a run failed, timed out or was abandoned (its last attempt), with the run's LOOPS_* variables. */
      onFailure: z.string().min(1).nullable(),
      /** An http(s) URL a JSON summary of the run is POSTed to. */
      url: z.string().min(1).nullable(),
      /** Which ends the URL is told of. */
      on: z.array(z.enum(['failure', 'success'])),
    })
    .strict(),
);
export type LoopNotify = z.infer<ReturnType<typeof loopNotifySchema>>;

/** What an agent CLI reported about a run (null where it said nothing). */
export const agentReportSchema = lazy(() =>
  z
    .object({
      provider: z.string().min(1),
      cliVersion: z.string().nullable(),
      model: z.string().nullable(),
      sessionId: z.string().nullable(),
      turns: z.number().int().nonnegative().nullable(),
      durationMs: z.number().nonnegative().nullable(),
      tokens: z
        .object({
          input: z.number().nonnegative().nullable(),
          output: z.number().nonnegative().nullable(),
          cacheRead: z.number().nonnegative().nullable(),
          cacheWrite: z.number().nonnegative().nullable(),
        })
        .strict(),
      costUsd: z.number().nonnegative().nullable(),
      finalMessage: z.string().nullable(),
      isError: z.boolean().nullable(),
      /**
       * The CLI's own error (its message, error type, HTTP status): absent in every report written
       * before it was read, and in a report with no error (the old default: none recorded).
       */
      error: z.object({ message: z.string(), type: z.string().nullable(), status: z.number().int().nullable() }).strict().optional(),
      parseError: z.string().nullable(),
    })
    .strict(),
);

const reason = lazy(() => z.string().nullable());

/** What a process event says, shared by a run's process.* events and a workflow step's step.* events. */
const spawnRequestShape = lazy(() => ({
  command: z.string(),
  args: z.array(z.string()),
  shell: z.boolean(),
  cwd: z.string().nullable(),
  /** Names only: values may be secrets and are not logged. */
  envKeys: z.array(z.string()),
  /** Absolute deadline for the hard timeout, null for none. */
  timeoutAt: isoInstant().nullable(),
}));
/**
 * The environment a process really started with, as names only (sorted; never a value): what
 * loops set or overrode (`set`: loops' variables, the target's env, an account's, PATH), what it
 * removed from the runner's (`removed`: another account's credentials), the secrets it set
 * (`secret`), and what the process inherited from the runner unchanged (`inherited`).
 */
export const spawnEnvSchema = lazy(() =>
  z
    .object({ set: z.array(z.string()), removed: z.array(z.string()), secret: z.array(z.string()), inherited: z.array(z.string()) })
    .strict(),
);
export type SpawnEnv = z.infer<ReturnType<typeof spawnEnvSchema>>;
const spawnedShape = lazy(() => ({
  pid: z.number().int().positive(),
  pgid: z.number().int().positive(),
  /** Process start time as the OS reports it (Linux: clock ticks since boot), for identity checks. */
  startTime: z.string().nullable(),
  bootId: z.string().nullable(),
  /** The environment it started with (names only); absent before it was recorded, and when a recovery recorded the spawn. */
  env: spawnEnvSchema().optional(),
  /** The directory it started in, absolute with symlinks resolved (what its getcwd() says); absent like `env`. */
  cwd: z.string().min(1).optional(),
}));
const exitShape = lazy(() => ({
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  timedOut: z.boolean(),
  cancelled: z.boolean(),
  /** Tail of stdout (UTF-8, at most the configured number of bytes). */
  stdout: z.string(),
  stderr: z.string(),
  stdoutBytes: z.number().int().nonnegative(),
  stderrBytes: z.number().int().nonnegative(),
  durationMs: z.number().int().nonnegative(),
  error: z.string().nullable(),
}));
const stepShape = lazy(() => ({ stepId: z.string().min(1), attempt: z.number().int().positive() }));

/**
 * Where an imported record came from (`loops import hasna-loops`): the tool that wrote it, the
 * database it was read from and its id there. Set on every event an import records, so the log
 * says which of its streams began elsewhere.
 */
export const importedFromSchema = lazy(() =>
  z
    .object({
      /** The tool and version, e.g. `@hasna/loops 0.3.1`. */
      tool: z.string().min(1),
      /** The database file it was read from (absolute). */
      db: z.string().min(1),
      /** The record's id in that database. */
      id: z.string().min(1),
    })
    .strict(),
);
export type ImportedFrom = z.infer<ReturnType<typeof importedFromSchema>>;

/** Which run this is: of which loop, for which slot and attempt, running what (run.claimed, run.imported). */
const runIdentityShape = lazy(() => ({
  runId: z.string().min(1),
  loopId: z.string().min(1),
  loopName: z.string().min(1),
  /** Slot id: the scheduled instant, or `manual:<runId>` for ad-hoc runs. */
  slot: z.string().min(1),
  scheduledFor: isoInstant(),
  attempt: z.number().int().positive(),
  trigger: z.enum(['manual', 'schedule']),
  target: targetSchema(),
}));

/**
 * Where a fork or rerun came from (`loops fork`, `loops rerun`): the parent run (a loop run's or a
 * workflow run's id), the fork point (a step id; null for a whole rerun), why, and how.
 */
export const forkedFromSchema = lazy(() =>
  z
    .object({
      runId: z.string().min(1),
      from: z.string().min(1).nullable(),
      reason: z.string().nullable(),
      how: z.enum(['fork', 'rerun', 'rerun-failed']),
    })
    .strict(),
);
export type ForkedFrom = z.infer<ReturnType<typeof forkedFromSchema>>;

/** Which workflow run this is: of which workflow, pinned to which version of its spec (wfrun.started, wfrun.imported). */
const wfRunIdentityShape = lazy(() => ({
  wfRunId: z.string().min(1),
  workflowId: z.string().min(1),
  workflowName: z.string().min(1),
  version: z.number().int().positive(),
  spec: workflowSpecSchema,
}));

/** The output of an imported process: its tails as the other tool kept them. */
const importedOutputShape = lazy(() => ({
  exitCode: z.number().int().nullable(),
  pid: z.number().int().positive().nullable(),
  error: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdoutBytes: z.number().int().nonnegative(),
  stderrBytes: z.number().int().nonnegative(),
  startedAt: isoInstant().nullable(),
  finishedAt: isoInstant().nullable(),
  durationMs: z.number().int().nonnegative().nullable(),
}));

/** Each type's version, and a builder of its payload schema (see `eventSchemas`). */
const eventDefinitions = {
  // ── loop stream: loop:<id> ──────────────────────────────────────────────
  'loop.created': {
    // v2: timing, the every anchor and the scheduling policies (v1 events are upcast below).
    v: 2,
    schema: () => z
      .object({
        loopId: z.string().min(1),
        name: z.string().min(1),
        description: z.string().nullable(),
        schedule: scheduleSchema(),
        timing: timingSchema(),
        target: targetSchema(),
        policies: loopPoliciesSchema(),
        nextRunAt: isoInstant().nullable(),
        /**
         * Slots after this instant are due (absent: the event's own time). An imported loop starts
         * where the other tool's schedule stood, so a slot it missed while neither ran is decided
         * by the catch-up policy instead of being lost.
         */
        scheduleFrom: isoInstant().optional(),
        /** Set when the loop was brought across by `loops import`. */
        importedFrom: importedFromSchema().optional(),
        /** Who is told of the loop's run ends (absent: nobody, as before it existed). */
        notify: loopNotifySchema().optional(),
        /**
         * The labels a runner must have to run it (`--runs-on gpu,linux`, a host's id is one of
         * its labels): any scheduler decides its slots, only such a runner claims them. Absent:
         * any runner (as before it existed).
         */
        runsOn: z.array(z.string().regex(LABEL_RE)).min(1).optional(),
      })
      .strict(),
  },
  'loop.paused': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  'loop.resumed': { v: 1, schema: () => z.object({ reason: reason(), nextRunAt: isoInstant().nullable() }).strict() },
  'loop.stopped': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  'loop.archived': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  'loop.removed': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  /** A fixed-delay loop's run ended: its next slot is due `every` after that finish. */
  'loop.rescheduled': {
    v: 1,
    schema: () => z.object({ nextRunAt: isoInstant(), after: z.string().nullable() }).strict(),
  },
  /** The loop reached --expires-at or --max-runs: it fires no more. */
  'loop.expired': { v: 1, schema: () => z.object({ reason: z.enum(['expires-at', 'max-runs', 'no more slots']) }).strict() },

  // ── slot decisions, on the loop stream: every slot gets exactly one ───────
  /** The slot fires: `runId` is the run that executes it. */
  'slot.fired': {
    v: 1,
    schema: () => z
      .object({
        slot: isoInstant(),
        fireAt: isoInstant(),
        runId: z.string().min(1),
        /** Set when this slot also stands for earlier missed slots (catch-up latest). */
        late: z.boolean(),
        nextRunAt: isoInstant().nullable(),
      })
      .strict(),
  },
  /** An attempt of a slot failed and attempts remain: run `runId` (attempt `attempt`) at `dueAt`. */
  'slot.retry_scheduled': {
    v: 1,
    schema: () => z
      .object({
        slot: z.string().min(1),
        attempt: z.number().int().min(2),
        runId: z.string().min(1),
        dueAt: isoInstant(),
        /** The attempt that failed, and how. */
        after: z.string().min(1),
        reason: z.string(),
      })
      .strict(),
  },
  /**
   * The slot waits: another run of the loop is still going (overlap buffer-one, buffer-all,
   * cancel-other). Its run `runId` starts when the loop has no run going any more, oldest buffered
   * slot first. With cancel-other, `cancels` are the going runs asked to stop for it.
   */
  'slot.buffered': {
    v: 1,
    schema: () => z
      .object({
        slot: isoInstant(),
        fireAt: isoInstant(),
        runId: z.string().min(1),
        /** The loop's overlap policy: one whose busy slots wait (`whenBusy: 'wait'` in ./policies.ts). */
        policy: z.enum(WAITING_OVERLAP_POLICY_NAMES),
        /** The run that was still going. */
        blockedBy: z.string().nullable(),
        cancels: z.array(z.string().min(1)),
        nextRunAt: isoInstant().nullable(),
      })
      .strict(),
  },
  /** The slot does not fire: another run of the loop was still going (overlap skip, or buffer-one with a slot already waiting). */
  'slot.skipped': {
    v: 1,
    schema: () => z
      .object({
        slot: isoInstant(),
        fireAt: isoInstant(),
        reason: z.enum(['overlap', 'buffer full']),
        /** The run that was still going. */
        blockedBy: z.string().nullable(),
        nextRunAt: isoInstant().nullable(),
      })
      .strict(),
  },
  /**
   * Missed slots `from`..`to` (`count` of them, on the schedule) are folded into the later slot
   * `into`, which fires once for all of them (catch-up latest).
   */
  'slot.coalesced': {
    v: 1,
    schema: () => z
      .object({ from: isoInstant(), to: isoInstant(), count: z.number().int().positive(), into: isoInstant() })
      .strict(),
  },
  /** Missed slots `from`..`to` are not run: catch-up none, or older than the catch-up window / limit. */
  'slot.missed': {
    v: 1,
    schema: () => z
      .object({
        from: isoInstant(),
        to: isoInstant(),
        count: z.number().int().positive(),
        reason: z.enum(['catch-up none', 'outside catch-up window', 'over catch-up limit', 'max-runs reached']),
        nextRunAt: isoInstant().nullable(),
      })
      .strict(),
  },

  /**
   * Work the loop decided on — a fired or buffered slot, or a scheduled retry — that will not be
   * run after all, and why: its loop was stopped, archived or removed before it started, or it was
   * stranded (the runner that fired it stopped before starting it) and the catch-up policy says it
   * is too late now. Every `runId` a decision promised ends in a run or in one of these.
   */
  'slot.dropped': {
    v: 1,
    schema: () => z
      .object({
        runId: z.string().min(1),
        slot: z.string().min(1),
        attempt: z.number().int().min(1),
        reason: z.string().min(1),
      })
      .strict(),
  },

  // ── run stream: run:<id> ────────────────────────────────────────────────
  'run.claimed': {
    // v2: the loop's policies carry the scheduling policies too (v1 events are upcast below).
    v: 2,
    schema: () => z
      .object({
        ...runIdentityShape(),
        policies: loopPoliciesSchema(),
        runnerId: z.string().min(1),
        leaseToken: z.number().int().nonnegative(),
        /** A fork or rerun of another run (`loops fork`, `loops rerun`): its target and policies are that run's. */
        forkedFrom: forkedFromSchema().optional(),
      })
      .strict(),
  },
  'process.spawn_requested': { v: 1, schema: () => z.object(spawnRequestShape()).strict() },
  'process.spawned': { v: 1, schema: () => z.object(spawnedShape()).strict() },
  'process.spawn_failed': {
    v: 1,
    schema: () => z.object({ error: z.string(), code: z.string().nullable() }).strict(),
  },
  'run.cancel_requested': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  'process.exited': { v: 1, schema: () => z.object(exitShape()).strict() },
  'run.abandoned': { v: 1, schema: () => z.object({ reason: z.string() }).strict() },
  /**
   * The run's runner stopped while its process went on; another runner took the run over (a new
   * lease token fences the old one out) and watches the process to its end, enforcing the same
   * recorded deadline. Who adopted it, and why.
   */
  'process.adopted': {
    v: 1,
    schema: () => z.object({ runnerId: z.string().min(1), leaseToken: z.number().int().positive(), pid: z.number().int().positive(), reason: z.string() }).strict(),
  },
  /**
   * What an agent CLI said about its run, parsed from its JSON / JSONL output (null where it said
   * nothing): recorded with the run's end, in the same transaction as process.exited.
   */
  'run.agent_reported': {
    v: 1,
    schema: () => agentReportSchema(),
  },
  /** A run of a workflow loop: its workflow run (slot + attempt map to exactly this one). */
  'run.workflow_started': {
    v: 1,
    schema: () => z.object({ wfRunId: z.string().min(1), workflowId: z.string().min(1), idempotencyKey: z.string().min(1) }).strict(),
  },
  /** The workflow run ended; the run ends the same way. */
  'run.workflow_ended': {
    v: 1,
    schema: () => z
      .object({ wfRunId: z.string().min(1), status: z.enum(['succeeded', 'failed', 'cancelled', 'timed_out']), error: z.string().nullable() })
      .strict(),
  },

  /**
   * A finished run of another tool, brought across by `loops import --with-history`: the whole
   * run in one fact, as that tool recorded it (its id, status, exit code, times, output tails).
   * Never executed here; the stream begins and ends with it. `wfRunId`: the workflow run a
   * workflow loop's run ran, imported with it.
   */
  'run.imported': {
    v: 1,
    schema: () => z
      .object({
        ...runIdentityShape(),
        status: z.enum(['succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned']),
        ...importedOutputShape(),
        wfRunId: z.string().min(1).nullable(),
        importedFrom: importedFromSchema(),
      })
      .strict(),
  },

  // ── account stream: account:<id> ──────────────────────────────────────────
  /** A credentials profile for an agent CLI: a directory the CLI's configuration variable points at. */
  'account.added': {
    v: 1,
    schema: () => z.object({ accountId: z.string().min(1), name: z.string().min(1), tool: z.string().min(1), dir: z.string().min(1) }).strict(),
  },
  'account.removed': { v: 1, schema: () => z.object({ reason: reason() }).strict() },

  // ── host stream: host:<hostId> ──────────────────────────────────────────
  /**
   * A daemon started on a host and holds its daemon lease: who it is (its runner id, pid, boot)
   * and the labels it runs loops for (`--runs-on`). Every runner also has its host's id as a label.
   */
  'host.started': {
    v: 1,
    schema: () => z
      .object({
        hostId: z.string().min(1),
        runnerId: z.string().min(1),
        labels: z.array(z.string().regex(LABEL_RE)),
        pid: z.number().int().positive(),
        bootId: z.string().nullable(),
        version: z.string().min(1),
        /**
         * On a shared store: the database server's clock less this host's, measured as it started
         * (positive: the server is ahead). Leases and due times use each writing host's clock.
         */
        clockOffsetMs: z.number().int().optional(),
      })
      .strict(),
  },
  /** The host's daemon stopped (a daemon that was killed records nothing: its lease runs out). */
  'host.stopped': { v: 1, schema: () => z.object({ runnerId: z.string().min(1), reason: reason() }).strict() },

  // ── workflow spec stream: workflow:<id> ─────────────────────────────────
  /** Version 1 of a workflow spec, normalised (see workflow-model.ts); `sourceFile` is where it was read from. */
  'workflow.created': {
    v: 1,
    schema: () => z
      .object({
        workflowId: z.string().min(1),
        name: z.string().min(1),
        version: z.literal(1),
        spec: workflowSpecSchema,
        sourceFile: z.string().nullable(),
        sha256: z.string().nullable(),
        /** Set when the spec was brought across by `loops import`; `version`: the spec's version there. */
        importedFrom: importedFromSchema().extend({ version: z.number().int().positive() }).strict().optional(),
      })
      .strict(),
  },
  /** The next version of the spec. Runs already started keep the version they pinned. */
  'workflow.updated': {
    v: 1,
    schema: () => z
      .object({ version: z.number().int().min(2), spec: workflowSpecSchema, sourceFile: z.string().nullable(), sha256: z.string().nullable() })
      .strict(),
  },
  /** Hidden from new runs; its history and runs stay. */
  'workflow.archived': { v: 1, schema: () => z.object({ reason: reason() }).strict() },

  // ── workflow run stream: wfrun:<id> ─────────────────────────────────────
  /**
   * A run of a pinned spec version; `idempotencyKey` maps to exactly one workflow run.
   * v2: `decisions` — how the run's step decisions (skips, retries) are kept: `recorded`, as
   * `step.skipped` / `step.retry_scheduled` events on its stream, appended with the event that
   * caused them; `derived` (every v1 event, upcast): the run started before decisions were
   * recorded, so the machine and the projections derive them from the other facts.
   */
  'wfrun.started': {
    v: 2,
    schema: () => z
      .object({
        ...wfRunIdentityShape(),
        inputs: z.record(z.string(), z.string()),
        trigger: z.enum(['manual', 'schedule']),
        loopId: z.string().nullable(),
        slot: z.string().nullable(),
        attempt: z.number().int().positive(),
        idempotencyKey: z.string().min(1),
        runnerId: z.string().min(1),
        leaseToken: z.number().int().nonnegative(),
        decisions: z.enum(['recorded', 'derived']),
        /** A fork or rerun of another run (`loops fork`, `loops rerun`); absent for every other run. */
        forkedFrom: forkedFromSchema().optional(),
        /** Steps whose recorded results it reuses: each starts `reusing`, ended by its `step.reused` (same transaction). */
        reuse: z.array(z.string().min(1)).optional(),
      })
      .strict(),
  },
  /** The intent to start attempt `attempt` of a step, with its rendered command line (env: names only). */
  'step.spawn_requested': {
    v: 1,
    schema: () => z.object({ ...stepShape(), ...spawnRequestShape() }).strict(),
  },
  'step.spawned': { v: 1, schema: () => z.object({ ...stepShape(), ...spawnedShape() }).strict() },
  'step.spawn_failed': {
    v: 1,
    schema: () => z.object({ stepId: z.string().min(1), attempt: z.number().int().positive(), error: z.string(), code: z.string().nullable() }).strict(),
  },
  /** An attempt ended; `outputs` are what it wrote to $LOOPS_OUTPUT (key=value lines or a JSON object). */
  'step.exited': {
    v: 1,
    schema: () => z
      .object({
        ...stepShape(),
        ...exitShape(),
        outputs: z.record(z.string(), z.string()),
        /** An agent step: what its CLI reported. */
        agent: agentReportSchema().nullable().optional(),
      })
      .strict(),
  },
  /** The runner lost the step's process (it stopped, and nothing about the exit is known). */
  'step.abandoned': {
    v: 1,
    schema: () => z.object({ stepId: z.string().min(1), attempt: z.number().int().positive(), reason: z.string() }).strict(),
  },
  /**
   * The run decided a step does not run (recorded runs only, in the transaction of the event that
   * made it ready): `reason` is what a user reads — `needs c which failed`, `if: … was false`,
   * `the workflow was cancelled`, `the workflow timed out`.
   */
  'step.skipped': { v: 1, schema: () => z.object({ stepId: z.string().min(1), reason: z.string().min(1) }).strict() },
  /**
   * The run decided to retry a step whose attempt ended badly (recorded runs only, in the
   * transaction of that attempt's end): attempt `attempt` starts at `dueAt`. The decision; its
   * timer firing is `step.retry_due`. `reason`: the attempt that ended and how
   * (`attempt 1 failed: exited with code 3`).
   */
  'step.retry_scheduled': {
    v: 1,
    schema: () => z.object({ stepId: z.string().min(1), attempt: z.number().int().min(2), dueAt: isoInstant(), reason: z.string().min(1) }).strict(),
  },
  /** A step's retry came due (the timer of its `step.retry_scheduled`, or of the derived retry of a run from before): attempt `attempt` may start. */
  'step.retry_due': { v: 1, schema: () => z.object({ stepId: z.string().min(1), attempt: z.number().int().min(2) }).strict() },
  /**
   * A fork or rerun's step that is not run again: its result is `fromRunId`'s, recorded here
   * (status, exit code, outputs, agent report; `set`: the output keys `--set-output` gave, whose
   * values are masked like any output when they hold a secret). In the transaction of its run's
   * `wfrun.started`, which lists it in `reuse`.
   */
  'step.reused': {
    v: 1,
    schema: () => z
      .object({
        stepId: z.string().min(1),
        fromRunId: z.string().min(1),
        status: z.enum(['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'abandoned']),
        exitCode: z.number().int().nullable(),
        signal: z.string().nullable(),
        error: z.string().nullable(),
        outputs: z.record(z.string(), z.string()),
        set: z.array(z.string()),
        agent: agentReportSchema().nullable(),
        reason: z.string().nullable(),
      })
      .strict(),
  },
  'wfrun.cancel_requested': { v: 1, schema: () => z.object({ reason: reason() }).strict() },
  /** The whole-workflow timeout passed: running steps are stopped, the run ends timed_out. */
  'wfrun.timed_out': { v: 1, schema: () => z.object({ timeoutMs: z.number().int().positive() }).strict() },

  /**
   * A finished workflow run of another tool, brought across by `loops import --with-history`: the
   * run and each step's outcome in one fact (steps that never started are `skipped` with
   * `reason`). Pinned to `version` of the imported spec. Never executed here.
   */
  'wfrun.imported': {
    v: 1,
    schema: () => z
      .object({
        ...wfRunIdentityShape(),
        trigger: z.enum(['manual', 'schedule']),
        loopId: z.string().min(1).nullable(),
        /** A workflow loop's run: that run, and its slot (the two are imported together). */
        loopRunId: z.string().min(1).nullable(),
        slot: z.string().min(1).nullable(),
        status: z.enum(['succeeded', 'failed', 'cancelled', 'timed_out']),
        startedAt: isoInstant(),
        finishedAt: isoInstant(),
        error: z.string().nullable(),
        steps: z.array(
          z
            .object({
              stepId: z.string().min(1),
              status: z.enum(['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'abandoned']),
              reason: z.string().nullable(),
              ...importedOutputShape(),
            })
            .strict(),
        ),
        importedFrom: importedFromSchema(),
      })
      .strict(),
  },

  // ── notice stream: notice:<id> ──────────────────────────────────────────
  // Telling someone a run ended (`--on-failure`, `--notify-url`): the intent first, then each
  // outcome, so a runner that stops midway leaves a pending notice the next runner finishes.
  /**
   * A run's end is to be told: run the loop's `--on-failure` command (`channel: 'command'`, with
   * `env`, the ended run's LOOPS_* variables) or POST `payload` to `url` (at most `attempts` times,
   * each `timeoutMs` long, `retryDelayMs` doubling between them). `noticeId` is the receiver's
   * idempotency key. Nothing secret is in it: output tails and errors are the run's masked ones.
   */
  'notice.requested': {
    v: 1,
    schema: () => z
      .object({
        noticeId: z.string().min(1),
        loopId: z.string().min(1),
        loopName: z.string().min(1),
        runId: z.string().min(1),
        runStatus: z.string().min(1),
        channel: z.enum(['command', 'url']),
        command: z.string().min(1).nullable(),
        env: z.record(z.string(), z.string()).nullable(),
        url: z.string().min(1).nullable(),
        payload: z.record(z.string(), z.unknown()).nullable(),
        attempts: z.number().int().positive(),
        timeoutMs: z.number().int().positive(),
        retryDelayMs: z.number().int().nonnegative(),
      })
      .strict(),
  },
  /**
   * The `--on-failure` command's run got its id (recorded before that run is claimed). v2:
   * `replaces`, the hook run this one stands in for — a run whose runner stopped before its process
   * started (abandoned, nothing ran), so the command runs again as a new run; null for the first
   * claim (every v1 event, upcast below).
   */
  'notice.hook_claimed': { v: 2, schema: () => z.object({ hookRunId: z.string().min(1), replaces: z.string().min(1).nullable() }).strict() },
  /** The `--on-failure` command's run ended so. */
  'notice.hook_ended': {
    v: 1,
    schema: () => z.object({ hookRunId: z.string().min(1), status: z.string().min(1), error: z.string().nullable() }).strict(),
  },
  /** A POST was not accepted (no answer within the timeout, a refused connection, a status other than 2xx); `retryAt`: the next try, null for none. */
  'notice.attempt_failed': {
    v: 1,
    schema: () => z
      .object({ attempt: z.number().int().positive(), error: z.string(), httpStatus: z.number().int().nullable(), retryAt: isoInstant().nullable() })
      .strict(),
  },
  /** The URL accepted the notice (a 2xx answer). */
  'notice.delivered': { v: 1, schema: () => z.object({ attempt: z.number().int().positive(), httpStatus: z.number().int() }).strict() },
  /** Every attempt failed: the notice is not delivered. */
  'notice.given_up': { v: 1, schema: () => z.object({ attempts: z.number().int().positive(), error: z.string() }).strict() },

  // ── retention stream: retention:output ──────────────────────────────────
  // A run's stream ends in a final state that accepts nothing more, and its output folder outlives
  // it: removing the folder (`loops prune`) is a fact about the data directory's retention, so it
  // is recorded on the one stream that owns it. The projections mark the run rows.
  /** The output folder of a finished loop run (`runs/<runId>/`) was removed. */
  'run.output_pruned': {
    v: 1,
    schema: () => z
      .object({
        runId: z.string().min(1),
        loopId: z.string().min(1),
        /** Bytes of the files removed (their sizes). */
        bytes: z.number().int().nonnegative(),
        /** The rule it was pruned under: finished before `cutoff` (null: any age), beyond the `keepLast` newest (null: none kept). */
        cutoff: isoInstant().nullable(),
        keepLast: z.number().int().nonnegative().nullable(),
      })
      .strict(),
  },
  /** The output folder of a finished workflow run (`runs/<wfRunId>/`, every step attempt) was removed. */
  'wfrun.output_pruned': {
    v: 1,
    schema: () => z
      .object({
        wfRunId: z.string().min(1),
        workflowId: z.string().min(1),
        /** The workflow loop's run that started it, if a loop did. */
        loopRunId: z.string().min(1).nullable(),
        bytes: z.number().int().nonnegative(),
        cutoff: isoInstant().nullable(),
        keepLast: z.number().int().nonnegative().nullable(),
      })
      .strict(),
  },

  // ── annotations: recorded on a stream, seen by no machine (src/machines/fold.ts) ──
  /**
   * A run (loop run or workflow run, usually ended) was forked or rerun: `childRunId` is the new
   * run, `forkedFrom` what the child's start records. An annotation: its machine never sees it,
   * so a stream in a final state takes it.
   */
  'stream.forked': {
    v: 1,
    annotation: true,
    schema: () => z.object({ childRunId: z.string().min(1), forkedFrom: forkedFromSchema() }).strict(),
  },

  // ── any finished stream: its history moved to an archive file ───────────
  /**
   * The tombstone `loops prune --archive` leaves: versions `fromVersion`..`toVersion` of this stream
   * were written to `file` (under the data directory, its sha256 given) and deleted from the log.
   * Folding starts from it: `state` is the final state those events led to (the machine's context
   * is not kept — a final state accepts nothing, and nothing reads an ended stream's context), and
   * `rows` are the rows they had projected, without their bulky columns (output tails), which the
   * projections put in place of their rows — so a rebuild without the deleted events gives the
   * same tables. Always the stream's first event.
   */
  'stream.archived': {
    v: 1,
    schema: () => z
      .object({
        file: z.string().min(1),
        sha256: z.string().regex(/^[0-9a-f]{64}$/),
        fromVersion: z.number().int().min(1),
        toVersion: z.number().int().min(1),
        /** Events moved (toVersion − fromVersion + 1). */
        events: z.number().int().min(1),
        machine: z.object({ id: z.string().min(1), version: z.number().int().min(1) }).strict(),
        /** The machine's state value after `toVersion` (a final state). */
        state: z.unknown(),
        /** Projected rows of the stream, by table: column → value. */
        rows: z.record(z.string(), z.array(z.record(z.string(), z.union([z.string(), z.number(), z.null()])))),
      })
      .strict(),
  },
} as const;

type EventDefinitions = typeof eventDefinitions;

/**
 * Every event type: its schema version `v`, `annotation` where it is one, and its payload `schema`
 * — built on first access (a getter), then kept.
 */
export type EventSchemas = {
  readonly [K in keyof EventDefinitions]: Omit<EventDefinitions[K], 'schema'> & { readonly schema: ReturnType<EventDefinitions[K]['schema']> };
};

const builtSchemas: Partial<Record<EventType, z.ZodType>> = {};

/** The payload schema of `type`, built on its first use. */
function schemaOf<T extends EventType>(type: T): ReturnType<EventDefinitions[T]['schema']> {
  return (builtSchemas[type] ??= eventDefinitions[type].schema()) as ReturnType<EventDefinitions[T]['schema']>;
}

export const eventSchemas: EventSchemas = Object.fromEntries(
  Object.entries(eventDefinitions).map(([type, { schema: _build, ...rest }]) => [
    type,
    Object.defineProperty(rest, 'schema', { enumerable: true, get: () => schemaOf(type as EventType) }),
  ]),
) as EventSchemas;

export type EventType = keyof EventDefinitions;
export type EventData<T extends EventType> = z.infer<EventSchemas[T]['schema']>;
export type EventOf<T extends EventType> = { type: T; at: string; data: EventData<T> };
export type AnyEventData = { [K in EventType]: EventOf<K> }[EventType];

export function isEventType(type: string): type is EventType {
  return Object.prototype.hasOwnProperty.call(eventDefinitions, type);
}

/**
 * True for an annotation event type (`annotation: true` above): recorded on a stream whatever its
 * state, stepped over by every machine (src/machines/fold.ts), counted as matching by replay.
 */
export function isAnnotation(type: string): boolean {
  return isEventType(type) && 'annotation' in eventDefinitions[type];
}

export function schemaVersion(type: string): number {
  if (!isEventType(type)) throw new ValidationError(`unknown event type ${JSON.stringify(type)}`);
  return eventDefinitions[type].v;
}

/** Validates an event payload against its schema; the error names each bad field. */
export function validateEventData(type: string, data: unknown): unknown {
  if (!isEventType(type)) throw new ValidationError(`unknown event type ${JSON.stringify(type)}`);
  const result = schemaOf(type).safeParse(data);
  if (!result.success) {
    const issues = result.error.issues
      .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
      .join('; ');
    throw new ValidationError(`invalid ${type} event: ${issues}`);
  }
  return result.data;
}

/**
 * Upcasters turn an older stored payload into the current shape, keyed by `type@v` (the version
 * they upgrade from). Stored events are never rewritten: they are upcast when read.
 */
type Obj = Record<string, unknown>;

/**
 * Policies as written by v1 (timeout and kill grace only), completed with what a v1 loop actually
 * did: no retries, skip on overlap, catch-up latest. These are frozen facts about v1, deliberately
 * not shared with the current defaults in runtime/loops/commands.ts — changing a default later must not
 * change what old events mean.
 */
function policiesV1toV2(policies: unknown): Obj {
  return {
    overlap: 'skip',
    catchUp: 'latest',
    catchUpWindowMs: null,
    catchUpLimit: null,
    attempts: 1,
    retryDelayMs: 10_000,
    backoff: 2,
    maxRetryDelayMs: null,
    leaseMs: 30_000,
    ...(policies as Obj),
  };
}

const upcasters: Record<string, (data: unknown) => unknown> = {
  'loop.created@1': (data) => {
    const d = data as Obj;
    const schedule = d.schedule as Obj;
    return {
      ...d,
      schedule: schedule.kind === 'every' ? { anchor: 'fixed-rate', ...schedule } : schedule,
      timing: {
        tz: typeof schedule.tz === 'string' ? schedule.tz : 'UTC',
        jitterMs: null,
        startsAt: null,
        expiresAt: null,
        maxRuns: null,
      },
      policies: policiesV1toV2(d.policies),
    };
  },
  'run.claimed@1': (data) => {
    const d = data as Obj;
    return { ...d, policies: policiesV1toV2(d.policies) };
  },
  // A v1 run recorded no step decisions: its machine and projections derive them, as they did then.
  'wfrun.started@1': (data) => ({ ...(data as Obj), decisions: 'derived' }),
  // A v1 claim was always the notice's first.
  'notice.hook_claimed@1': (data) => ({ ...(data as Obj), replaces: null }),
};

export function upcast(type: string, v: number, data: unknown): unknown {
  let current = data;
  let version = v;
  for (;;) {
    const step = upcasters[`${type}@${version}`];
    if (!step) return current;
    current = step(current);
    version += 1;
  }
}
