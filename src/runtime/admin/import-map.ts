/**
 * What a predecessor (`@hasna/loops` 0.3.x) record means here, as loops data: ids behind loops'
 * prefixes, targets (secret-named env values left out, accounts, isolation), schedules, policies,
 * statuses and output tails. Pure: ./import-hasna.ts plans and records with them.
 */
import { createHash } from 'node:crypto';
import type { EventData, LoopPolicies, Schedule, Target } from '../../events/catalog.js';
import { checkName } from '../../events/names.js';
import { CATCH_UP, OVERLAP } from '../../events/policies.js';
import { CRON_RULES, parseCronPattern } from '../../scheduling/cron.js';
import { isProviderId } from '../agents/index.js';
import { secretByConvention, type SecretMasker } from '../execution/secrets.js';
import { DEFAULT_KILL_GRACE_MS } from '../loops/commands.js';
import { PREDECESSOR, type PLoop } from './predecessor-db.js';

/** What the predecessor's executor used when a target set no timeout (its DEFAULT_TIMEOUT_MS). */
export const PREDECESSOR_TIMEOUT_MS = 30 * 60_000;
/** Output tails kept per stream, as a run of loops keeps them. */
const TAIL_BYTES = 64 * 1024;

/** A predecessor id behind loops' prefix: ids stay recognisable, and an import is repeatable. */
export function mapId(prefix: string, id: string): string {
  if (/^[0-9a-z]{1,64}$/.test(id)) return `${prefix}_${id}`;
  // Not the predecessor's usual hex: a stable, safe stand-in derived from it.
  return `${prefix}_${createHash('sha256').update(id).digest('hex').slice(0, 20)}`;
}

export function parseJson(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${what} is not valid JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} is not an object`);
  return value as Record<string, unknown>;
}

export function iso(value: string | null | undefined): string | null {
  if (value === null || value === undefined || value === '') return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

export const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
export const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
export const posInt = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null);

/** `env` without the secret-looking values (their names become secret-env names), and the values left out. */
export function splitEnv(raw: unknown): { env: Record<string, string>; secretEnv: string[]; secrets: string[] } {
  const env: Record<string, string> = {};
  const secretEnv: string[] = [];
  const secrets: string[] = [];
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
    for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
      if (typeof v !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) continue;
      if (secretByConvention(k, v)) {
        secretEnv.push(k);
        secrets.push(v);
      } else env[k] = v;
    }
  }
  return { env, secretEnv, secrets };
}

interface MappedTarget {
  target: Target;
  timeoutMs: number;
  notes: string[];
  /** Values not carried (secrets), masked in imported output. */
  secrets: string[];
}

export function mapTarget(raw: Record<string, unknown>, workflowIds: Map<string, { id: string; name: string }>): MappedTarget {
  const notes: string[] = [];
  const timeoutMs = posInt(raw.timeoutMs) ?? PREDECESSOR_TIMEOUT_MS;
  if (posInt(raw.timeoutMs) === null) notes.push('timeout 30m (the predecessor\'s default, now explicit)');
  const { env, secretEnv, secrets } = splitEnv(raw.env);
  if (secretEnv.length) {
    notes.push(`${secretEnv.join(', ')}: secret value${secretEnv.length > 1 ? 's' : ''} not stored; the runner's environment must provide ${secretEnv.length > 1 ? 'them' : 'it'} (--secret-env)`);
  }
  const secretPart = secretEnv.length ? { secretEnv } : {};
  const cwd = str(raw.cwd);
  if (raw.type === 'command') {
    const command = str(raw.command);
    if (command === null) throw new Error('its command target has no command');
    const shell = raw.shell === true;
    const account = accountOf(raw.account);
    if (account.account !== undefined && account.accountTool === undefined) {
      notes.push(`account ${account.account} has no tool: its runs fail before they start, as they did there; give it one with --account-tool`);
    }
    return { target: { kind: 'command', command, args: strings(raw.args), shell, cwd, env, ...secretPart, ...account }, timeoutMs, notes, secrets };
  }
  if (raw.type === 'agent') {
    const provider = str(raw.provider);
    if (provider === null || !isProviderId(provider)) throw new Error(`unknown agent provider ${JSON.stringify(raw.provider)}`);
    const prompt = str(raw.prompt);
    if (prompt === null) throw new Error('its agent target has no prompt');
    // The predecessor's `safe` (its default) kept the CLI's login and passed its own flags that shut
    // out user and project settings: loops' `login` mode; `none` is the same in both.
    const isolation = raw.configIsolation === 'none' ? 'none' : 'login';
    const { account: profile, accountTool } = accountOf(raw.account);
    return {
      target: {
        kind: 'agent',
        provider,
        prompt,
        promptFile: null,
        model: str(raw.model),
        agent: str(raw.agent),
        cwd,
        env,
        permissionMode: null,
        extraArgs: strings(raw.extraArgs),
        configIsolation: isolation,
        account: profile ?? null,
        ...(accountTool !== undefined && accountTool !== provider ? { accountTool } : {}),
        maxTurns: null,
        maxCostUsd: null,
        idleTimeoutMs: null,
        ...secretPart,
      },
      timeoutMs,
      notes,
      secrets,
    };
  }
  if (raw.type === 'workflow') {
    const wf = workflowIds.get(String(raw.workflowId));
    if (!wf) throw new Error(`its workflow ${JSON.stringify(raw.workflowId)} is not imported`);
    const input = raw.input && typeof raw.input === 'object' ? Object.keys(raw.input) : [];
    if (input.length) throw new Error(`its workflow input (${input.join(', ')}) has no equivalent: a loops workflow loop runs its workflow without inputs`);
    return { target: { kind: 'workflow', workflowId: wf.id, workflowName: wf.name }, timeoutMs, notes, secrets };
  }
  throw new Error(`unknown target type ${JSON.stringify(raw.type)}`);
}

/** The predecessor's `{ profile, tool }` account (or a bare profile name) as a target's account fields. */
export function accountOf(raw: unknown): { account?: string; accountTool?: string } {
  const ref = typeof raw === 'string' ? { profile: raw } : raw && typeof raw === 'object' ? (raw as { profile?: unknown; tool?: unknown }) : null;
  const profile = ref ? str(ref.profile) : null;
  if (profile === null) return {};
  checkName('account', profile, 'account');
  const tool = str(ref!.tool);
  return { account: profile, ...(tool !== null ? { accountTool: tool } : {}) };
}

export function mapSchedule(raw: Record<string, unknown>, anchorAt: string, tz: string): Schedule {
  switch (raw.type) {
    case 'once': {
      const at = iso(str(raw.at));
      if (at === null) throw new Error('its one-shot schedule has no valid time');
      return { kind: 'at', at };
    }
    case 'interval': {
      const everyMs = posInt(raw.everyMs);
      if (everyMs === null) throw new Error('its interval is not a positive number of ms');
      return { kind: 'every', everyMs, anchorAt, anchor: raw.anchor === 'fixed_delay' ? 'fixed-delay' : 'fixed-rate' };
    }
    case 'cron': {
      const expr = str(raw.expression);
      if (expr === null) throw new Error('its cron schedule has no expression');
      try {
        parseCronPattern(expr, 'cron');
      } catch (error) {
        throw new Error(`its cron expression ${JSON.stringify(expr)} is not valid here: ${firstLine(error)}`);
      }
      // Today's cron rules (Vixie's DST handling, docs/schedules.md), as a loop created now gets.
      return { kind: 'cron', expr, tz, rules: CRON_RULES };
    }
    case 'dynamic':
      // The predecessor's dynamic cadence: the next run `minIntervalMs` after the last one finished.
      return { kind: 'every', everyMs: posInt(raw.minIntervalMs) ?? 60_000, anchorAt, anchor: 'fixed-delay' };
    default:
      throw new Error(`unknown schedule type ${JSON.stringify(raw.type)}`);
  }
}

export function mapPolicies(l: PLoop, timeoutMs: number): LoopPolicies {
  const catchUp = l.catch_up in CATCH_UP.policies ? (l.catch_up as LoopPolicies['catchUp']) : 'latest';
  const overlap = l.overlap in OVERLAP.policies ? (l.overlap as LoopPolicies['overlap']) : 'skip';
  const attempts = posInt(l.max_attempts) ?? 1;
  return {
    timeoutMs,
    killGraceMs: DEFAULT_KILL_GRACE_MS,
    overlap,
    catchUp,
    catchUpWindowMs: null,
    catchUpLimit: CATCH_UP.policies[catchUp].limit ? posInt(l.catch_up_limit) : null,
    attempts,
    // The predecessor waited the same delay before every retry.
    retryDelayMs: Math.max(0, Math.floor(l.retry_delay_ms ?? 0)),
    backoff: 1,
    maxRetryDelayMs: null,
    // loops renews a short lease instead of the predecessor's 30-minute one (docs/migrating.md).
    leaseMs: 30_000,
  };
}

/** The tail of `text` that fits `TAIL_BYTES`, masked, and the full size. */
export function tail(text: string | null, masker: SecretMasker): { text: string; bytes: number } {
  const full = text ?? '';
  const bytes = Buffer.byteLength(full, 'utf8');
  let out = full;
  if (bytes > TAIL_BYTES) {
    const buf = Buffer.from(full, 'utf8');
    out = buf.subarray(buf.length - TAIL_BYTES).toString('utf8').replace(/^\uFFFD+/, '');
  }
  return { text: masker.mask(out), bytes };
}

/** The event that gives an imported loop its status (null: active), undefined for an unknown status. */
export function statusEvent(status: string): { type: string; data: unknown } | null | undefined {
  const reason = `${status} in ${PREDECESSOR}`;
  switch (status) {
    case 'active':
      return null;
    case 'paused':
      return { type: 'loop.paused', data: { reason } };
    case 'stopped':
      return { type: 'loop.stopped', data: { reason } };
    case 'expired':
      return { type: 'loop.expired', data: { reason: 'no more slots' } };
    default:
      return undefined;
  }
}

export const RUN_STATUS: Record<string, EventData<'run.imported'>['status']> = {
  succeeded: 'succeeded',
  failed: 'failed',
  timed_out: 'timed_out',
  abandoned: 'abandoned',
  cancelled: 'cancelled',
  // Unfinished there: its daemon stopped during it, and nothing knows how it ended.
  running: 'abandoned',
};

export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!;
}
