/**
 * Being told when a run ends — cron's MAILTO, systemd's `OnFailure=`:
 *
 *  - `--on-failure '<command>'`: after a run of the loop failed, timed out or was abandoned — its
 *    last attempt: an attempt that will be retried tells nobody — the command runs through /bin/sh
 *    with the ended run's LOOPS_* variables, as a run of its own (slot `hook:<notice>`, trigger
 *    manual: never retried, never told of itself), through the one attempt path;
 *  - `--notify-url URL` (`--notify-on failure,success`): a JSON summary of the run is POSTed, with
 *    an `Idempotency-Key` header (the notice's id), retried with back-off, each try with a timeout.
 *
 * Each is a notice, stream `notice:<id>` (src/machines/notice.ts): the intent (`notice.requested`,
 * under the notice's lease) is recorded right after the run's end, each outcome after it, so a
 * runner that stops midway leaves a pending notice that the next pass finishes (`pendingNotices`,
 * from the Dispatcher's recovery): delivered at least once. A notice's id is the run's id and the
 * channel, so a run's end is never told twice over one channel.
 *
 * This module does not import the attempt path (which calls it): the caller hands it the run
 * executor (`RunHook`).
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { hostname } from 'node:os';
import { cached } from '../../events/db.js';
import type { LoopNotify, LoopPolicies, Target } from '../../events/catalog.js';
import { ClaimLostError, ConcurrencyConflictError, LeaseLostError, LoopsError, ValidationError } from '../../events/errors.js';
import type { StoredEvent } from '../../events/types.js';
import type { noticeMachine } from '../../machines/notice.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { newId } from '../ids.js';
import { runnerHost } from '../host.js';
import { HeldLease } from '../leases.js';
import { findLoopRecord, findRun, type LoopRecord, type RunView } from '../queries/loops.js';
import { HOOK_SLOT, loopNotify } from '../queries/notices.js';
import type { Runtime } from '../runtime.js';

/** The outcomes `--notify-on` takes. */
export const NOTIFY_ON = ['failure', 'success'] as const;
export type NotifyOn = (typeof NOTIFY_ON)[number];

/** Run statuses that are a failure to be told of (cancelled is not: someone asked for it). */
const FAILED = new Set(['failed', 'timed_out', 'abandoned']);

/** Defaults of a notice's delivery; LOOPS_NOTIFY_* variables change them (recorded with each notice). */
export const NOTIFY_DEFAULTS = { attempts: 5, timeoutMs: 10_000, retryDelayMs: 1000, hookTimeoutMs: 10 * 60_000 } as const;

const NOTICE_LEASE_MS = 30_000;
/** Bytes of a run's output tails in a URL notice. */
const PAYLOAD_TAIL = 4096;

// ── the definition ─────────────────────────────────────────────────────────────────────────────

export interface NotifyInput {
  /** `--on-failure`: a /bin/sh command line. */
  onFailure?: string | null;
  /** `--notify-url`: an http(s) URL. */
  notifyUrl?: string | null;
  /** `--notify-on`: `failure`, `success` or both, comma-separated (default failure). */
  notifyOn?: string | null;
}

/** The loop's notify field from the flags, each checked; null when none is given (nothing recorded). */
export function buildNotify(input: NotifyInput): LoopNotify | null {
  const { onFailure, notifyUrl, notifyOn } = input;
  if (onFailure === undefined || onFailure === null) {
    if ((notifyUrl === undefined || notifyUrl === null) && (notifyOn === undefined || notifyOn === null)) return null;
  }
  let command: string | null = null;
  if (onFailure !== undefined && onFailure !== null) {
    if (onFailure.trim() === '') {
      throw new ValidationError('--on-failure: the command is empty', { hint: "give a /bin/sh command line, e.g. --on-failure 'notify-send \"$LOOPS_LOOP_NAME failed\"'" });
    }
    if (onFailure.includes('\0')) throw new ValidationError('--on-failure: the command contains a NUL character', { hint: 'give a /bin/sh command line' });
    command = onFailure;
  }
  let url: string | null = null;
  if (notifyUrl !== undefined && notifyUrl !== null) url = checkUrl(notifyUrl);
  let on: NotifyOn[] = ['failure'];
  if (notifyOn !== undefined && notifyOn !== null) {
    if (url === null) throw new ValidationError('--notify-on applies to --notify-url', { hint: 'add --notify-url URL, or drop --notify-on' });
    const parts = notifyOn.split(',').map((p) => p.trim());
    const bad = parts.find((p) => !(NOTIFY_ON as readonly string[]).includes(p));
    if (bad !== undefined || parts.length === 0) {
      throw new ValidationError(`--notify-on: unknown outcome ${JSON.stringify(bad ?? notifyOn)}`, { hint: 'use failure, success or failure,success' });
    }
    on = NOTIFY_ON.filter((o) => parts.includes(o));
  }
  return { onFailure: command, url, on };
}

function checkUrl(text: string): string {
  const hint = 'e.g. --notify-url https://hooks.example.com/loops (http or https)';
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new ValidationError(`--notify-url: ${JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)} is not a URL`, { hint });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ValidationError(`--notify-url: ${parsed.protocol.replace(/:$/, '')} URLs are not supported, only http and https`, { hint });
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new ValidationError('--notify-url: a user name or password in the URL would be stored in clear with the loop', {
      hint: 'give the receiver a URL without credentials (a secret path the receiver checks, or its own authentication)',
    });
  }
  return text;
}

// ── hooks are runs ─────────────────────────────────────────────────────────────────────────────


/** Is this the slot of an `--on-failure` command's run? */
export function isHookSlot(slot: string | null | undefined): boolean {
  return typeof slot === 'string' && slot.startsWith(HOOK_SLOT);
}

/** How a hook's run is executed: the attempt path's `executeRun`, handed in by its caller. */
export type RunHook = (
  loop: LoopRecord,
  options: { runId: string; slot: string; scheduledFor: string; trigger: 'manual'; attempt: number },
) => Promise<RunView>;

/** The LOOPS_* variables of an ended run, for its `--on-failure` command. */
export function endedRunEnv(run: RunView, noticeId: string): Record<string, string> {
  return {
    LOOPS_LOOP_ID: run.loopId,
    LOOPS_LOOP_NAME: run.loopName,
    LOOPS_RUN_ID: run.id,
    LOOPS_SCHEDULED_FOR: run.scheduledFor,
    LOOPS_ATTEMPT: String(run.attempt),
    LOOPS_TRIGGER: run.trigger,
    LOOPS_STATUS: run.status,
    LOOPS_EXIT_CODE: run.exitCode === null ? '' : String(run.exitCode),
    LOOPS_SIGNAL: run.signal ?? '',
    LOOPS_ERROR: run.error ?? '',
    LOOPS_STARTED_AT: run.startedAt ?? '',
    LOOPS_FINISHED_AT: run.finishedAt ?? '',
    LOOPS_DURATION_MS: run.durationMs === null ? '' : String(run.durationMs),
    LOOPS_HOOK: 'on-failure',
    LOOPS_IDEMPOTENCY_KEY: noticeId,
  };
}

/** The JSON a `--notify-url` receives: the run's end, its masked output tails, never a secret value. */
export function noticePayload(run: RunView, noticeId: string, outcome: NotifyOn): Record<string, unknown> {
  const tail = (s: string) => (s.length > PAYLOAD_TAIL ? s.slice(-PAYLOAD_TAIL) : s);
  return {
    type: outcome === 'failure' ? 'run.failed' : 'run.succeeded',
    noticeId,
    host: hostname(),
    loop: { id: run.loopId, name: run.loopName },
    run: {
      id: run.id,
      status: run.status,
      trigger: run.trigger,
      slot: run.slot,
      scheduledFor: run.scheduledFor,
      attempt: run.attempt,
      exitCode: run.exitCode,
      signal: run.signal,
      error: run.error,
      startedAt: run.startedAt,
      finishedAt: run.finishedAt,
      durationMs: run.durationMs,
      stdoutTail: tail(run.stdout),
      stderrTail: tail(run.stderr),
    },
  };
}

function settings(env: NodeJS.ProcessEnv = process.env) {
  const num = (name: string, fallback: number, min: number) => {
    const n = Number(env[name]);
    return env[name] !== undefined && env[name] !== '' && Number.isInteger(n) && n >= min ? n : fallback;
  };
  return {
    attempts: num('LOOPS_NOTIFY_ATTEMPTS', NOTIFY_DEFAULTS.attempts, 1),
    timeoutMs: num('LOOPS_NOTIFY_TIMEOUT_MS', NOTIFY_DEFAULTS.timeoutMs, 1),
    retryDelayMs: num('LOOPS_NOTIFY_RETRY_DELAY_MS', NOTIFY_DEFAULTS.retryDelayMs, 0),
  };
}

// ── requesting ─────────────────────────────────────────────────────────────────────────────────

interface Requested {
  noticeId: string;
  lease: HeldLease | null;
}

/**
 * Records the notices a run's end calls for (none for a hook's own run, a cancelled run, or a
 * failed attempt that `followUp` retries). With `hold`, each is recorded under its lease, taken
 * in the same transaction, for the caller to deliver at once; without, the next pass delivers it.
 */
export async function requestNotices(runtime: Runtime, run: RunView, followUp: ReadonlyArray<StoredEvent>, options: { hold?: boolean } = {}): Promise<Requested[]> {
  if (isHookSlot(run.slot)) return [];
  const notify = loopNotify(runtime.db, run.loopId);
  if (!notify) return [];
  const retried = followUp.some((e) => e.type === 'slot.retry_scheduled' && (e.data as { after?: string }).after === run.id);
  const outcome: NotifyOn | null = run.status === 'succeeded' ? 'success' : FAILED.has(run.status) && !retried ? 'failure' : null;
  if (outcome === null) return [];
  const tune = settings();
  const wanted: Array<{ channel: 'command' | 'url'; noticeId: string }> = [];
  if (outcome === 'failure' && notify.onFailure !== null) wanted.push({ channel: 'command', noticeId: `${run.id}.hook` });
  if (notify.url !== null && notify.on.includes(outcome)) wanted.push({ channel: 'url', noticeId: `${run.id}.url` });
  const out: Requested[] = [];
  for (const { channel, noticeId } of wanted) {
    const streamId = `notice:${noticeId}`;
    const lease = options.hold ? new HeldLease(runtime, streamId, NOTICE_LEASE_MS) : null;
    const actor = DurableActor.create(runtime, streamId, 'notice', currentMachines.notice);
    const loopTimeout = run.loopId ? safeLoop(runtime, run.loopId)?.policies.timeoutMs ?? null : null;
    const data = {
      noticeId,
      loopId: run.loopId,
      loopName: run.loopName,
      runId: run.id,
      runStatus: run.status,
      channel,
      command: channel === 'command' ? notify.onFailure : null,
      env: channel === 'command' ? endedRunEnv(run, noticeId) : null,
      url: channel === 'url' ? notify.url : null,
      payload: channel === 'url' ? noticePayload(run, noticeId, outcome) : null,
      attempts: channel === 'url' ? tune.attempts : 1,
      timeoutMs: channel === 'url' ? tune.timeoutMs : Math.min(loopTimeout ?? NOTIFY_DEFAULTS.hookTimeoutMs, NOTIFY_DEFAULTS.hookTimeoutMs),
      retryDelayMs: tune.retryDelayMs,
    };
    try {
      await actor.record('notice.requested', data, lease ? lease.takeNew() : {});
    } catch (error) {
      // Told already (a recovery that recorded the same end twice): one notice per run and channel.
      if (error instanceof ConcurrencyConflictError || (error instanceof LoopsError && (error.code === 'conflict' || error.code === 'lease_lost'))) continue;
      throw error;
    }
    out.push({ noticeId, lease });
  }
  return out;
}

function safeLoop(runtime: Runtime, loopId: string): LoopRecord | null {
  try {
    return findLoopRecord(runtime.db, loopId, { includeRemoved: true });
  } catch {
    return null;
  }
}

/** What follows a run's end on the live path: its notices recorded, then delivered here (awaited). */
export async function tellRunEnded(runtime: Runtime, run: RunView, followUp: ReadonlyArray<StoredEvent>, hook: RunHook, options: { signal?: AbortSignal } = {}): Promise<void> {
  for (const { noticeId, lease } of await requestNotices(runtime, run, followUp, { hold: true })) {
    await deliverNotice(runtime, noticeId, hook, { ...options, ...(lease ? { lease } : {}) });
  }
}

// ── delivering ─────────────────────────────────────────────────────────────────────────────────

/**
 * Pending notices no live runner holds (their runner stopped, or nobody started them): for the next
 * pass. `live`: the live `notice:` leases (`runtime.leases.live('notice:', now)`).
 */
export function pendingNotices(runtime: Runtime, live: ReadonlyMap<string, unknown>): Array<{ noticeId: string; loopId: string; loopName: string }> {
  return cached<[], { id: string; loop_id: string; loop_name: string | null }>(
    runtime.db,
    `SELECT n.id, n.loop_id, l.name AS loop_name FROM notices n LEFT JOIN loops l ON l.id = n.loop_id
     WHERE n.status = 'pending' ORDER BY n.requested_at, n.id`,
  )
    .all()
    .filter((r) => !live.has(`notice:${r.id}`))
    .map((r) => ({ noticeId: r.id, loopId: r.loop_id, loopName: r.loop_name ?? r.loop_id }));
}

export interface DeliverOptions {
  /** The notice's lease, held since its request; otherwise it is taken over (a live holder: nothing is done). */
  lease?: HeldLease;
  /** Aborting stops between tries, leaving the notice pending for the next runner. */
  signal?: AbortSignal;
}

/** Finishes a pending notice: runs its hook command, or POSTs it until delivered or out of attempts. */
export async function deliverNotice(runtime: Runtime, noticeId: string, hook: RunHook, options: DeliverOptions = {}): Promise<void> {
  const streamId = `notice:${noticeId}`;
  const actor = await DurableActor.load(runtime, streamId, {}, currentMachines.notice);
  if (actor.snapshot.status === 'done') return;
  let lease = options.lease;
  if (!lease) {
    lease = new HeldLease(runtime, streamId, NOTICE_LEASE_MS);
    try {
      await lease.takeOver();
    } catch (error) {
      if (error instanceof LoopsError && error.code === 'conflict') return; // another runner delivers it
      throw error;
    }
  }
  lease.keepAlive();
  try {
    if (actor.context.request?.channel === 'command') await runHook(runtime, actor, lease, hook);
    else await post(runtime, actor, lease, options.signal);
  } catch (error) {
    if (error instanceof LeaseLostError) return; // taken over: theirs now
    throw error;
  } finally {
    lease.stop();
    if ((actor.snapshot.status as string) !== 'done') await lease.release().catch(() => undefined);
  }
}

type NoticeActor = DurableActor<typeof noticeMachine>;

async function runHook(runtime: Runtime, actor: NoticeActor, lease: HeldLease, hook: RunHook): Promise<void> {
  const request = actor.context.request!;
  let hookRunId = actor.context.hookRunId;
  let ended: RunView | null = hookRunId === null ? null : existingRun(runtime, hookRunId);
  // Not yet claimed; or claimed by a runner that stopped before the command's process started
  // (recovery abandoned that run: nothing ran), so it runs now, as a new run that replaces it.
  if (hookRunId === null || (ended !== null && (await neverStarted(runtime, ended)))) {
    const replaces = hookRunId;
    hookRunId = newId('run', runtime.clock.now());
    await actor.record('notice.hook_claimed', { hookRunId, replaces }, lease.fence());
    ended = null;
  }
  if (ended === null) {
    const loop = safeLoop(runtime, request.loopId);
    if (loop === null) {
      await actor.record('notice.given_up', { attempts: 1, error: `loop ${request.loopName} is gone` }, lease.fence());
      return;
    }
    const cwd = loop.target.kind === 'workflow' ? null : loop.target.cwd;
    const target: Target = { kind: 'command', command: request.command!, args: [], shell: true, cwd, env: request.env ?? {} };
    const policies: LoopPolicies = { ...loop.policies, attempts: 1, timeoutMs: request.timeoutMs };
    try {
      ended = await hook(
        { ...loop, target, policies, timeoutMs: request.timeoutMs },
        {
          runId: hookRunId,
          slot: `${HOOK_SLOT}${request.noticeId}`,
          scheduledFor: request.env?.LOOPS_SCHEDULED_FOR || new Date(runtime.clock.now()).toISOString(),
          trigger: 'manual',
          // A run that replaces one that never started is the slot's next attempt.
          attempt: actor.context.hookAttempt,
        },
      );
    } catch (error) {
      if (!(error instanceof ClaimLostError)) throw error;
      ended = existingRun(runtime, hookRunId);
    }
  }
  // Still going under another runner (or left by one that stopped: recovery ends it, and the next pass records it here).
  if (ended === null || !['succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned'].includes(ended.status)) return;
  await actor.record('notice.hook_ended', { hookRunId, status: ended.status, error: ended.error }, lease.fence());
}

/**
 * A hook run abandoned before its process started: its runner stopped before it recorded a
 * process, and recovery found none (a process forked but not yet recorded is found by its wrapper
 * and recorded, never abandoned so). On a fleet, a run with a spawn intent only when the runner
 * that abandoned it ran on the run's host: a process on another host was not looked for, so the
 * run stays as recorded.
 */
async function neverStarted(runtime: Runtime, run: RunView): Promise<boolean> {
  if (run.status !== 'abandoned' || run.pid !== null) return false;
  if (!runtime.fleet) return true; // one machine's data directory: recovery looked on it
  const events = await runtime.log.readStream(`run:${run.id}`);
  if (!events.some((e) => e.type === 'process.spawn_requested')) return true; // no spawn intent: nothing could start
  const by = events.findLast((e) => e.type === 'run.abandoned')?.meta.runnerId;
  const host = runnerHost(run.runnerId);
  return host !== null && by !== undefined && runnerHost(by) === host;
}

function existingRun(runtime: Runtime, runId: string): RunView | null {
  try {
    return findRun(runtime.db, runId);
  } catch {
    return null;
  }
}

async function post(runtime: Runtime, actor: NoticeActor, lease: HeldLease, signal?: AbortSignal): Promise<void> {
  const request = actor.context.request!;
  const body = JSON.stringify(request.payload ?? {});
  for (;;) {
    const attempt = actor.context.failedAttempts + 1;
    const retryAt = actor.context.retryAt;
    if (retryAt !== null) {
      const wait = Date.parse(retryAt) - runtime.clock.now();
      if (wait > 0 && !(await sleep(runtime, wait, signal))) return;
    }
    if (signal?.aborted) return;
    const result = await postOnce(runtime, request.url!, body, { noticeId: request.noticeId, attempt, timeoutMs: request.timeoutMs });
    if (result.ok) {
      await actor.record('notice.delivered', { attempt, httpStatus: result.status! }, lease.fence());
      return;
    }
    if (attempt >= request.attempts) {
      await actor.recordAll(
        [
          { type: 'notice.attempt_failed', data: { attempt, error: result.error, httpStatus: result.status, retryAt: null } },
          { type: 'notice.given_up', data: { attempts: attempt, error: result.error } },
        ],
        lease.fence(),
      );
      return;
    }
    const delay = request.retryDelayMs * 2 ** (attempt - 1);
    const next = new Date(runtime.clock.now() + delay).toISOString();
    await actor.record('notice.attempt_failed', { attempt, error: result.error, httpStatus: result.status, retryAt: next }, lease.fence());
  }
}

function sleep(runtime: Runtime, ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      runtime.clock.clearTimeout(handle);
      resolve(false);
    };
    const handle = runtime.clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One POST: ok on a 2xx answer; otherwise why not (the status, a refused connection, no answer in time). */
function postOnce(
  runtime: Runtime,
  url: string,
  body: string,
  o: { noticeId: string; attempt: number; timeoutMs: number },
): Promise<{ ok: boolean; status: number | null; error: string }> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: { ok: boolean; status: number | null; error: string }) => {
      if (settled) return;
      settled = true;
      runtime.clock.clearTimeout(timer);
      resolve(r);
    };
    const parsed = new URL(url);
    const send = parsed.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(parsed, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'user-agent': 'loops-notify',
        'idempotency-key': o.noticeId,
        'x-loops-notice-id': o.noticeId,
        'x-loops-attempt': String(o.attempt),
      },
    });
    const timer = runtime.clock.setTimeout(() => {
      done({ ok: false, status: null, error: `no answer within ${o.timeoutMs} ms` });
      req.destroy();
    }, o.timeoutMs);
    req.on('response', (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      done({ ok, status, error: ok ? '' : `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}` });
    });
    req.on('error', (error: NodeJS.ErrnoException) => done({ ok: false, status: null, error: error.code ? `${error.code}: ${error.message}` : error.message }));
    req.end(body);
  });
}
