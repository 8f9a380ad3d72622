/**
 * The canonical workflow spec: the shape stored in `workflow.created` / `workflow.updated` events and
 * run by the workflow machine — part of the log format, so it lives with the event catalogue. The
 * language that produces it (file shapes, the normaliser, expressions, diagnostics) is src/workflow.
 */
import { z } from 'zod';
import { NAME_HINT, NAME_RE } from './names.js';

// A workflow's name is a name like a loop's (./names.ts).
export { NAME_HINT, NAME_RE };

// ── canonical spec ─────────────────────────────────────────────────────────────────────────────────

/** Runs a process: `command` is shell text when `shell` is true, otherwise the executable and `args` its argv. */
export interface CommandTarget {
  type: 'command';
  /** With `shell: true` a shell command line; otherwise the executable. */
  command: string;
  /** Arguments, only with `shell: false`. */
  args: string[];
  shell: boolean;
  /** Working directory as written in the spec (may hold `${{ }}` templates); null = the runner's default. */
  cwd: string | null;
  /** Step environment (the workflow `env` is kept separately in {@link WorkflowSpec.env}). */
  env: Record<string, string>;
  /** The credentials profile the step runs under (absent in specs stored before it: none). */
  account?: string;
  /** The tool the profile is resolved for; set whenever `account` is. */
  accountTool?: string;
}

/** Runs an AI coding-agent CLI with a prompt. */
export interface AgentTarget {
  type: 'agent';
  /** The agent CLI, e.g. `claude`, `codex`. */
  provider: string;
  /** Prompt text (may hold `${{ }}` templates); exactly one of `prompt` and `promptFile` is set. */
  prompt: string | null;
  /** Path of a file holding the prompt. */
  promptFile: string | null;
  model: string | null;
  /** A named agent / profile of the provider. */
  agent: string | null;
  cwd: string | null;
  env: Record<string, string>;
  permissionMode: string | null;
  /** Extra argv passed to the provider CLI. */
  extraArgs: string[];
  /**
   * `login`: the CLI keeps the user's configuration directory (their login) and gets its own flags
   * that shut out user and project settings; `safe`: an empty configuration directory (what a
   * stored `safe` always meant; `config-isolation: empty` in a file); `none`: the user's own.
   */
  configIsolation: 'safe' | 'none' | 'login';
  account: string | null;
  /** The tool `account` is resolved for, when it is not the provider (absent: the provider). */
  accountTool?: string;
  maxTurns: number | null;
  maxCostUsd: number | null;
  /** Kill the agent after this long without output. */
  idleTimeoutMs: number | null;
}

/** What one step executes. */
export type StepTarget = CommandTarget | AgentTarget;

/** How a failed step attempt is retried. */
export interface RetryPolicy {
  /** Total attempts, at least 1 (1 = no retry). */
  attempts: number;
  /** Delay before the first retry. */
  delayMs: number;
  /** Each later delay is this many times the previous one (>= 1). */
  backoff: number;
  /** Upper bound on a delay, null for none. */
  maxDelayMs: number | null;
}

/** One step of a workflow, canonical. */
export interface StepSpec {
  /** Unique within the spec, `/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/`. */
  id: string;
  /** Display name. */
  name: string | null;
  target: StepTarget;
  /** Ids of the steps this one waits for (direct dependencies, file order, no duplicates). */
  needs: string[];
  /** Condition source text; null means `success()`. */
  if: string | null;
  /** A failure of this step does not fail the workflow nor count as a failure for its dependants. */
  continueOnError: boolean;
  timeoutMs: number | null;
  retries: RetryPolicy;
  /** Declared output keys; `[]` = not declared (any key may be referenced). */
  outputs: string[];
  /** What the step is for, as the file says (the predecessor's step `description`). Absent in specs stored before it existed. */
  description?: string | null;
}

/** A workflow input, given when a run starts. */
export interface WorkflowInput {
  description: string | null;
  default: string | null;
  required: boolean;
}

/** A workflow spec, canonical: what is stored in events and what the workflow machine runs. */
export interface WorkflowSpec {
  name: string;
  description: string | null;
  /** Environment for every step (a step's own `env` wins). */
  env: Record<string, string>;
  /** Names of environment variables whose values are secret (never logged verbatim). */
  secrets: string[];
  /** At most this many steps run at once (1..256, default 4). */
  concurrency: number;
  /** Timeout of the whole workflow run, null for none. */
  timeoutMs: number | null;
  inputs: Record<string, WorkflowInput>;
  /** In file order. */
  steps: StepSpec[];
  /**
   * How steps are run. Absent (every spec stored before this field existed) or `parallel`: every step
   * whose needs ended may start, up to `concurrency`, and a failure skips only its dependants.
   * `sequential` (a predecessor-shape file, or `execution: sequential`): one step at a time, in the
   * predecessor's order (depth-first over needs, in file order), and the first failure of a step
   * without `continueOnError` skips every step after it.
   */
  execution?: 'parallel' | 'sequential';
  /** The file's own `version` (the predecessor's spec version), kept as a label; loops numbers the versions of a spec itself. */
  versionLabel?: string;
}

/** One problem found in a spec. `path` addresses the offending value in the parsed input document. */
export interface SpecProblem {
  path: Array<string | number>;
  /** The step's id, when the problem is inside a step that has a valid id. */
  step: string | null;
  /** Dotted field path under the step (or the root), without list indexes, e.g. `needs`, `agent.model`, `env.FOO`. */
  field: string | null;
  /** Complete one-line message, e.g. `step "test": needs: unknown step "lnt"`. */
  message: string;
  hint?: string;
}

// ── patterns and defaults ──────────────────────────────────────────────────────────────────────────

// Not `__proto__`: step ids key plain objects (a run's steps map), where assigning it would set the
// prototype instead of a step.
export const STEP_ID_RE = /^(?!__proto__$)[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
export const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Shape of a duration; `parseDuration` does the exact check (unit order, > 0). */
export const DURATION_RE = /^\s*([0-9]+(\.[0-9]+)?([mM][sS]|[smhdwSMHDW]))+\s*$/;

export const DEFAULT_CONCURRENCY = 4;
export const MAX_CONCURRENCY = 256;
export const MAX_RETRIES = 100;
/** The same retry defaults as loops (`--retry-delay 10s`, `--backoff 2`). */
export const DEFAULT_RETRY_DELAY_MS = 10_000;
export const DEFAULT_BACKOFF = 2;

export const ID_HINT = 'use 1-64 letters, digits, _ or -, starting with a letter or _ (not __proto__)';
export const DURATION_HINT = 'use a number with a unit, e.g. 500ms, 90s, 15m, 1h30m, 2d';

// ── canonical zod schema ───────────────────────────────────────────────────────────────────────────

export const canonicalEnv = z.record(z.string().regex(ENV_KEY_RE), z.string());
export const positiveMs = z.number().int().positive();

export const canonicalCommandTarget = z
  .object({
    type: z.literal('command'),
    command: z.string().min(1),
    args: z.array(z.string()),
    shell: z.boolean(),
    cwd: z.string().nullable(),
    env: canonicalEnv,
    account: z.string().min(1).optional(),
    accountTool: z.string().min(1).optional(),
  })
  .strict();

export const canonicalAgentTarget = z
  .object({
    type: z.literal('agent'),
    provider: z.string().min(1),
    prompt: z.string().nullable(),
    promptFile: z.string().nullable(),
    model: z.string().nullable(),
    agent: z.string().nullable(),
    cwd: z.string().nullable(),
    env: canonicalEnv,
    permissionMode: z.string().nullable(),
    extraArgs: z.array(z.string()),
    configIsolation: z.enum(['safe', 'none', 'login']),
    account: z.string().nullable(),
    accountTool: z.string().min(1).optional(),
    maxTurns: z.number().int().positive().nullable(),
    maxCostUsd: z.number().positive().nullable(),
    idleTimeoutMs: positiveMs.nullable(),
  })
  .strict();

export const canonicalStep = z
  .object({
    id: z.string().regex(STEP_ID_RE),
    name: z.string().nullable(),
    target: z.discriminatedUnion('type', [canonicalCommandTarget, canonicalAgentTarget]),
    needs: z.array(z.string().regex(STEP_ID_RE)),
    if: z.string().min(1).nullable(),
    continueOnError: z.boolean(),
    timeoutMs: positiveMs.nullable(),
    retries: z
      .object({
        attempts: z.number().int().min(1).max(MAX_RETRIES + 1),
        delayMs: z.number().int().nonnegative(),
        backoff: z.number().min(1),
        maxDelayMs: positiveMs.nullable(),
      })
      .strict(),
    outputs: z.array(z.string().regex(STEP_ID_RE)),
    description: z.string().nullable().optional(),
  })
  .strict();

/** The canonical {@link WorkflowSpec} as a zod schema (used by the event catalogue). */
export const workflowSpecSchema = z
  .object({
    name: z.string().regex(NAME_RE),
    description: z.string().nullable(),
    env: canonicalEnv,
    secrets: z.array(z.string().regex(ENV_KEY_RE)),
    concurrency: z.number().int().min(1).max(MAX_CONCURRENCY),
    timeoutMs: positiveMs.nullable(),
    inputs: z.record(
      z.string().regex(STEP_ID_RE),
      z.object({ description: z.string().nullable(), default: z.string().nullable(), required: z.boolean() }).strict(),
    ),
    steps: z.array(canonicalStep).min(1),
    execution: z.enum(['parallel', 'sequential']).optional(),
    versionLabel: z.string().min(1).optional(),
  })
  .strict();

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
// The interfaces above are the contract; the schema must describe exactly them.
true satisfies Equals<z.infer<typeof workflowSpecSchema>, WorkflowSpec>;
