/**
 * The workflow language: the zod schemas of the native file shape, the normaliser that turns a
 * parsed spec file (native or predecessor shape) into the canonical spec (src/events/workflow-model.ts)
 * — collecting every problem it finds, each naming its step and field — and its JSON Schema.
 *
 * Pure: no I/O. Reading files, YAML and line:column positions live in src/runtime/workflows/files.ts.
 * Over 500 lines on purpose: one table of fields per level of the file, and the normaliser that
 * walks them, read together.
 */
import { z } from 'zod';
import { parseDuration } from '../events/durations.js';
import { ValidationError } from '../events/errors.js';
import { closest } from '../events/suggest.js';
import { ACCOUNT_NAME_HINT, ACCOUNT_NAME_RE } from '../events/names.js';
import { secretByConvention } from '../events/secret-names.js';
import {
  NAME_RE,
  STEP_ID_RE,
  ENV_KEY_RE,
  DURATION_RE,
  DEFAULT_CONCURRENCY,
  MAX_CONCURRENCY,
  MAX_RETRIES,
  DEFAULT_RETRY_DELAY_MS,
  DEFAULT_BACKOFF,
  NAME_HINT,
  ID_HINT,
  DURATION_HINT,
  workflowSpecSchema,
  type CommandTarget,
  type AgentTarget,
  type StepTarget,
  type RetryPolicy,
  type WorkflowInput,
  type WorkflowSpec,
  type SpecProblem,
} from '../events/workflow-model.js';
import { conditionReferences, hasTemplate, parseCondition, parseTemplate, templateReferences, type ExprRef } from './expr.js';

// The canonical shape is re-exported: callers read a spec's types where they parse it.
export {
  workflowSpecSchema,
  type AgentTarget,
  type CommandTarget,
  type RetryPolicy,
  type SpecProblem,
  type StepSpec,
  type StepTarget,
  type WorkflowInput,
  type WorkflowSpec,
} from '../events/workflow-model.js';

// ── file shape: field schemas, shared by the normaliser and the JSON Schema ──────────────────────────

const scalar = z
  .union([z.string(), z.number(), z.boolean()], { error: (iss) => `expected a string, number or boolean, got ${describe(iss.input)}` })
  .meta({ description: 'numbers and booleans are turned into strings' });
const envName = z.string().regex(ENV_KEY_RE, { error: (iss) => `invalid variable name ${JSON.stringify(iss.input)}: use letters, digits and _, not starting with a digit` });
const envMap = z.record(envName, scalar).meta({ description: 'environment variables; values are turned into strings' });
const text = z.string().min(1);
const nullableText = z.string().min(1).nullable();
const durationText = z.string().regex(DURATION_RE, { error: (iss) => `invalid duration ${JSON.stringify(iss.input)}` });
const duration = (description = 'a duration: 500ms, 90s, 15m, 1h30m, 2d') => deferred(durationText.meta({ description }));
const stepIdText = z.string().regex(STEP_ID_RE, { error: (iss) => `invalid step id ${JSON.stringify(iss.input)}` });
const keyText = z.string().regex(STEP_ID_RE, { error: (iss) => `invalid name ${JSON.stringify(iss.input)}: ${ID_HINT}` });

type FieldTable = Record<string, z.ZodType>;

/**
 * Field schemas the normaliser checks itself, with better messages than a zod issue (durations, nested
 * objects with their own unknown-field rules). `readFields` passes their raw values through.
 */
const DEFERRED = new WeakSet<z.ZodType>();
function deferred<T extends z.ZodType>(schema: T): T {
  // Note: `.meta()` and friends return a new schema: defer the final one.
  DEFERRED.add(schema);
  return schema;
}

const ROOT_FIELDS = {
  $schema: z.string().meta({ description: 'JSON Schema of this file, for editors; ignored' }),
  name: z.string().regex(NAME_RE, { error: (iss) => `invalid workflow name ${JSON.stringify(iss.input)}` }).meta({ description: NAME_HINT }),
  description: z.string().nullable(),
  env: envMap,
  secrets: z.array(envName).meta({ description: 'names of environment variables whose values are secret' }),
  concurrency: z.int().min(1).max(MAX_CONCURRENCY).meta({ description: 'at most this many steps run at once (default 4)' }),
  timeout: duration('timeout of the whole workflow run, e.g. 30m'),
  execution: z
    .enum(['parallel', 'sequential'])
    .meta({ description: 'parallel (default): steps whose needs ended run at once, up to concurrency; sequential: one at a time, stopping at the first failure (the predecessor\'s way)' }),
  version: z
    .union([z.number(), z.string().min(1)], { error: (iss) => `expected a version label (a number or a string), got ${describe(iss.input)}` })
    .meta({ description: "the file's own version label (the predecessor's spec version), kept and shown; loops numbers a spec's versions itself" }),
} satisfies FieldTable;

const INPUT_FIELDS = {
  default: scalar.nullable(),
  description: z.string().nullable(),
  required: z.boolean(),
} satisfies FieldTable;
const inputFileSchema = z.union([scalar, z.null(), z.object(INPUT_FIELDS).partial().strict()]);

const RETRY_FIELDS = {
  limit: z.int().min(0).max(MAX_RETRIES).meta({ description: 'number of retries (attempts = limit + 1)' }),
  delay: duration('delay before the first retry (default 10s)'),
  backoff: z.number().min(1).meta({ description: 'each later delay is this many times the previous one (default 2)' }),
  'max-delay': duration('upper bound on a delay'),
} satisfies FieldTable;
const retryCount = z.int().min(0).max(MAX_RETRIES);
const retriesFileSchema = z.union([retryCount, z.object(RETRY_FIELDS).partial().strict()]);

const accountName = z.string().regex(ACCOUNT_NAME_RE, { error: (iss) => `invalid account name ${JSON.stringify(iss.input)}: ${ACCOUNT_NAME_HINT}` });
/** A tool name as `accounts env --tool` takes it (src/runtime/agents/accounts.ts ACCOUNT_TOOL_RE). */
const accountTool = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, { error: (iss) => `invalid tool name ${JSON.stringify(iss.input)}: one word of letters, digits, ., _ or -` });
/** A credentials profile: its name, or the predecessor's `{ profile, tool }` (a command's needs the tool). */
const accountFileSchema = z
  .union([accountName, z.object({ profile: accountName, tool: accountTool }).partial({ tool: true }).strict()])
  .nullable()
  .meta({ description: 'a credentials profile: its name, or { profile, tool } (a command step needs the tool)' });
type AccountFile = string | { profile: string; tool?: string } | null;
function accountRef(value: AccountFile | undefined): { profile: string; tool: string | null } | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'string' ? { profile: value, tool: null } : { profile: value.profile, tool: value.tool ?? null };
}

/**
 * `config-isolation` in a file. Native: `login` (default), `empty` or `safe` (both: an empty
 * configuration directory — what `safe` meant in every spec written before `login` existed), `none`.
 * In the predecessor's shape `safe` is the predecessor's mode, which kept the user's login: `login`.
 */
const configIsolationFile = z.enum(['login', 'empty', 'safe', 'none']);
function configIsolationOf(value: string | null, legacy: boolean): AgentTarget['configIsolation'] {
  if (value === null) return 'login';
  if (value === 'empty') return 'safe';
  if (value === 'safe') return legacy ? 'login' : 'safe';
  return value as AgentTarget['configIsolation'];
}

/** Agent fields: canonical name, kebab-case name, schema. Both spellings are accepted in files. */
const AGENT_FIELDS: ReadonlyArray<readonly [keyof AgentTarget, string, z.ZodType]> = [
  ['provider', 'provider', text.meta({ description: 'the agent CLI, e.g. claude, codex' })],
  ['prompt', 'prompt', nullableText],
  ['promptFile', 'prompt-file', nullableText],
  ['model', 'model', nullableText],
  ['agent', 'agent', nullableText],
  ['cwd', 'cwd', nullableText],
  ['env', 'env', envMap],
  ['permissionMode', 'permission-mode', nullableText],
  ['extraArgs', 'extra-args', z.array(scalar)],
  ['configIsolation', 'config-isolation', configIsolationFile],
  ['account', 'account', accountFileSchema],
  ['maxTurns', 'max-turns', z.int().min(1).nullable()],
  ['maxCostUsd', 'max-cost-usd', z.number().positive().nullable()],
  ['idleTimeoutMs', 'idle-timeout-ms', z.int().positive().nullable()],
];
/** `idle-timeout: 5m`, the duration spelling of `idle-timeout-ms`. */
const AGENT_IDLE_TIMEOUT = 'idle-timeout';
/** Every accepted agent key → canonical name. */
const AGENT_KEYS = new Map<string, keyof AgentTarget | 'idleTimeout'>();
const AGENT_TABLE: FieldTable = {};
for (const [canonical, kebab, schema] of AGENT_FIELDS) {
  AGENT_KEYS.set(kebab, canonical);
  AGENT_KEYS.set(canonical, canonical);
  AGENT_TABLE[kebab] = schema;
  AGENT_TABLE[canonical] = schema;
}
AGENT_KEYS.set(AGENT_IDLE_TIMEOUT, 'idleTimeout');
AGENT_TABLE[AGENT_IDLE_TIMEOUT] = duration('kill the agent after this long without output');
const agentFileSchema = z.object(AGENT_TABLE).partial().required({ provider: true }).strict();

/** Checked by hand in the normaliser (an id that is not a step is "unknown", whatever its shape). */
const needsFileSchema = deferred(z.union([stepIdText, z.array(stepIdText)]).meta({ description: 'steps this one waits for' }));

/** Fields every native step may have, besides its target. */
const STEP_COMMON = {
  id: stepIdText.meta({ description: ID_HINT }),
  name: z.string().nullable(),
  description: z.string().nullable().meta({ description: 'what the step is for' }),
  needs: needsFileSchema,
  if: z.union([text, z.boolean()], { error: (iss) => `expected a condition, got ${describe(iss.input)}` }).meta({ description: "condition, e.g. failure(), steps.test.outputs.ok == 'yes' (default success())" }),
  'continue-on-error': z.boolean(),
  timeout: duration('timeout of one attempt of the step'),
  retries: deferred(retriesFileSchema.meta({ description: 'number of retries, or { limit, delay, backoff, max-delay }' })),
  outputs: z.array(keyText).meta({ description: 'declared output keys' }),
  cwd: text,
  env: envMap,
  account: accountFileSchema,
} satisfies FieldTable;
const STEP_TARGET_FIELDS = {
  run: text.meta({ description: 'shell text, run by a shell' }),
  command: text.meta({ description: 'executable (argv form), or shell text with shell: true' }),
  args: z.array(scalar),
  shell: z.boolean(),
  agent: deferred(agentFileSchema),
} satisfies FieldTable;
/** Predecessor-shape step fields. */
const LEGACY_STEP_FIELDS = {
  target: deferred(z.record(z.string(), z.unknown())),
  dependsOn: needsFileSchema,
  continueOnFailure: z.boolean(),
  timeoutMs: z.int().positive().nullable(),
} satisfies FieldTable;
const STEP_TABLE: FieldTable = { ...STEP_COMMON, ...STEP_TARGET_FIELDS, ...LEGACY_STEP_FIELDS };
const NATIVE_STEP_KEYS = [...Object.keys(STEP_COMMON), ...Object.keys(STEP_TARGET_FIELDS)];

const LEGACY_COMMAND_FIELDS = {
  type: z.literal('command'),
  command: text,
  args: z.array(scalar),
  shell: z.boolean(),
  cwd: nullableText,
  env: envMap,
  timeoutMs: z.int().positive().nullable(),
  account: accountFileSchema,
} satisfies FieldTable;

const stepCommonSchema = z.object(STEP_COMMON).partial().required({ id: true });
const stepFileSchema = z.union([
  stepCommonSchema.extend({ run: STEP_TARGET_FIELDS.run, shell: z.literal(true).optional() }).strict(),
  stepCommonSchema
    .extend({ command: STEP_TARGET_FIELDS.command, args: STEP_TARGET_FIELDS.args.optional(), shell: STEP_TARGET_FIELDS.shell.optional() })
    .strict(),
  stepCommonSchema.extend({ agent: STEP_TARGET_FIELDS.agent }).strict(),
]);

/**
 * The native workflow file shape as a zod schema (the source of {@link workflowJsonSchema}). It checks
 * shapes only; {@link normalizeWorkflowSpec} adds the cross-field rules (graph, references, durations).
 */
export const workflowFileSchema = z
  .object({
    ...ROOT_FIELDS,
    inputs: z.record(keyText, inputFileSchema).meta({ description: 'inputs: { name: default } or { name: { default, description, required } }' }),
    steps: z.array(stepFileSchema).min(1),
  })
  .partial()
  .required({ name: true, steps: true })
  .strict()
  .meta({ title: 'loops workflow', description: 'A loops workflow spec: a DAG of steps.' });

/** JSON Schema (draft 2020-12) of the native workflow file shape, generated from {@link workflowFileSchema}. */
export function workflowJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(workflowFileSchema, { target: 'draft-2020-12' }) as Record<string, unknown>;
}

// ── the normaliser ─────────────────────────────────────────────────────────────────────────────────

type Path = Array<string | number>;

interface Ctx {
  problems: SpecProblem[];
  warnings: string[];
}

/** Where problems are reported: a base path, the step (if any) and its label for messages. */
interface Scope {
  base: Path;
  step: string | null;
  label: string | null;
}

interface Reference {
  rel: Path;
  ref: ExprRef;
}

interface StepDraft {
  index: number;
  scope: Scope;
  id: string | null;
  name: string | null;
  description: string | null;
  target: StepTarget | null;
  needs: Array<{ id: string; rel: Path }>;
  needsKey: string;
  if: string | null;
  continueOnError: boolean;
  timeoutMs: number | null;
  retries: RetryPolicy;
  outputs: string[];
  refs: Reference[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function has(obj: Record<string, unknown>, key: string): boolean {
  return Object.hasOwn(obj, key);
}

/** A short description of a value for messages: `a number (3)`, `a list`, `null`. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  switch (typeof value) {
    case 'string':
      return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`;
    case 'number':
      return `a number (${value})`;
    case 'boolean':
      return `${value}`;
    case 'object':
      return 'a mapping';
    default:
      return typeof value;
  }
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
  null: 'null',
};

/** Messages for zod's built-in checks (schema-level `error`s above take precedence). */
const errorMap = (iss: z.core.$ZodRawIssue): string | undefined => {
  switch (iss.code) {
    case 'invalid_type':
      return `expected ${TYPE_NAMES[iss.expected] ?? iss.expected}, got ${describe(iss.input)}`;
    case 'too_small':
    case 'too_big': {
      const bound = iss.code === 'too_small' ? (iss.minimum as number) : (iss.maximum as number);
      const least = iss.code === 'too_small';
      if (iss.origin === 'array') return least ? (bound === 1 ? 'must not be empty' : `must have at least ${bound} items`) : `must have at most ${bound} items`;
      if (iss.origin === 'string') return least ? (bound === 1 ? 'must not be empty' : `must be at least ${bound} characters`) : `must be at most ${bound} characters`;
      if (iss.inclusive === false) return `must be ${least ? 'greater' : 'less'} than ${bound}, got ${describe(iss.input)}`;
      return `must be ${least ? 'at least' : 'at most'} ${bound}, got ${describe(iss.input)}`;
    }
    case 'invalid_value':
      return `expected ${iss.values.map((v) => JSON.stringify(v)).join(' or ')}, got ${describe(iss.input)}`;
    case 'invalid_format':
      return `invalid value ${JSON.stringify(iss.input)}`;
    case 'invalid_union':
      return `${describe(iss.input)} is not allowed here`;
    default:
      return undefined;
  }
};

/**
 * An `env:` value written in the file under a name that says it holds a secret (the convention of
 * events/secret-names.ts): refused, since the spec is stored with the workflow in clear. Secrets
 * are named under `secrets:` and read from the environment the runs run in.
 */
function refuseInlineSecret(ctx: Ctx, scope: Scope, rel: Path, name: string, value: string): void {
  if (!secretByConvention(name, value) || value.includes('${{')) return;
  report(
    ctx,
    scope,
    rel,
    `${name}: its name says it holds a secret, and a workflow file's values are stored with the workflow, in clear`,
    `list ${name} under secrets: and set it in the environment the runs run in (where loops daemon runs); drop it from env:`,
  );
}

function report(ctx: Ctx, scope: Scope, rel: Path, message: string, hint?: string): void {
  const field = rel.filter((s): s is string => typeof s === 'string').join('.') || null;
  const prefix = `${scope.label ? `${scope.label}: ` : ''}${field ? `${field}: ` : ''}`;
  ctx.problems.push({ path: [...scope.base, ...rel], step: scope.step, field, message: `${prefix}${message}`, ...(hint ? { hint } : {}) });
}

function warn(ctx: Ctx, scope: Scope, rel: Path, message: string): void {
  const field = rel.filter((s): s is string => typeof s === 'string').join('.');
  ctx.warnings.push(`${scope.label ? `${scope.label}: ` : ''}${field ? `${field}: ` : ''}${message}`);
}

/** Validates `value` with a field schema; reports every issue; returns the value when valid. */
function check<T>(ctx: Ctx, scope: Scope, rel: Path, schema: z.ZodType<T>, value: unknown, hint?: string): T | undefined {
  const result = schema.safeParse(value, { error: errorMap, reportInput: true });
  if (result.success) return result.data;
  const seen = new Set<string>();
  for (const issue of result.error.issues) {
    const nested = issue.code === 'invalid_key' ? issue.issues[0] : undefined;
    const message = nested ? nested.message : issue.message;
    const path = [...rel, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    const key = `${path.join('\0')}\0${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    report(ctx, scope, path, message, hint);
  }
  return undefined;
}

/**
 * Reads the known fields of an object: reports unknown keys (as errors with a suggestion, or as
 * warnings) and validates each known field with its schema (deferred fields are passed through raw).
 * Returns the valid values and the keys present.
 */
function readFields(
  ctx: Ctx,
  scope: Scope,
  rel: Path,
  obj: Record<string, unknown>,
  table: FieldTable,
  options: { unknown: 'error' | 'warn'; what: string; suggest?: readonly string[]; listed?: readonly string[]; hints?: Record<string, string> },
): { values: Record<string, unknown>; present: Set<string> } {
  const values: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const present = new Set<string>();
  const candidates = options.suggest ?? Object.keys(table);
  for (const key of Object.keys(obj)) {
    if (!Object.hasOwn(table, key)) {
      const guess = closest(key, candidates);
      if (options.unknown === 'warn') {
        warn(ctx, scope, [...rel, key], `unknown ${options.what}, ignored${guess ? ` (did you mean "${guess}"?)` : ''}`);
      } else {
        report(ctx, scope, [...rel, key], `unknown ${options.what}`, guess ? `did you mean "${guess}"?` : `known fields: ${(options.listed ?? candidates).join(', ')}`);
      }
      continue;
    }
    present.add(key);
    const schema = table[key]!;
    if (DEFERRED.has(schema)) {
      values[key] = obj[key];
      continue;
    }
    const value = check(ctx, scope, [...rel, key], schema, obj[key], options.hints?.[key]);
    if (value !== undefined) values[key] = value;
  }
  return { values, present };
}

function stringify(value: unknown): string {
  return typeof value === 'string' ? value : String(value);
}

/** Env map with stringified values; keys are kept own (no prototype tricks with `__proto__`). */
function toEnv(value: unknown): Record<string, string> {
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, stringify(v)]));
}

/**
 * A duration field: `30s`, `1h30m`. A bare number is rejected (seconds or milliseconds?).
 * Returns null (after reporting) when invalid.
 */
function readDuration(ctx: Ctx, scope: Scope, rel: Path, raw: unknown): number | null {
  if (typeof raw === 'number') {
    report(ctx, scope, rel, `${raw} has no unit`, `a bare number is ambiguous: write ${raw}s, ${raw}m or ${raw}ms`);
    return null;
  }
  const text = check(ctx, scope, rel, durationText, raw, DURATION_HINT);
  if (text === undefined) return null;
  const field = rel.filter((s) => typeof s === 'string').join('.');
  try {
    return parseDuration(text, field);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const message = error.message.startsWith(`${field}: `) ? error.message.slice(field.length + 2) : error.message;
    report(ctx, scope, rel, message, error.hint ?? DURATION_HINT);
    return null;
  }
}

/** A nested mapping field (agent, target, retries object): reports anything else. */
function expectMapping(ctx: Ctx, scope: Scope, rel: Path, raw: unknown, example: string): raw is Record<string, unknown> {
  if (isRecord(raw)) return true;
  report(ctx, scope, rel, `expected a mapping, got ${describe(raw)}`, `e.g. ${example}`);
  return false;
}

const SHELL_TEMPLATE_HINT =
  'outputs are never spliced into shell text: pass the value through env: (e.g. env: { SUMMARY: "${{ steps.test.outputs.summary }}" }) and use "$SUMMARY" in the command';

/** Collects the references of a templated string (args, env, cwd, prompt, …); reports syntax errors. */
function templateRefs(ctx: Ctx, scope: Scope, rel: Path, text: string, refs: Reference[]): void {
  if (!hasTemplate(text)) return;
  try {
    parseTemplate(text);
    for (const ref of templateReferences(text)) refs.push({ rel, ref });
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    report(ctx, scope, rel, error.message, error.hint);
  }
}

function stepLabel(id: string | null, index: number): string {
  return id === null ? `step #${index + 1}` : `step "${id}"`;
}

/**
 * Turns `needs`/`dependsOn` (a step id or a list of them) into entries with their paths; reports
 * anything else; duplicates are warned about and dropped.
 */
function readNeeds(ctx: Ctx, scope: Scope, key: string, value: unknown): Array<{ id: string; rel: Path }> {
  let list: Array<{ id: string; rel: Path }>;
  if (typeof value === 'string') {
    list = [{ id: value, rel: [key] }];
  } else if (Array.isArray(value)) {
    list = [];
    value.forEach((id: unknown, j) => {
      if (typeof id === 'string') list.push({ id, rel: [key, j] });
      else report(ctx, scope, [key, j], `expected a step id, got ${describe(id)}`);
    });
  } else {
    report(ctx, scope, [key], `expected a step id or a list of step ids, got ${describe(value)}`, `e.g. ${key}: build, or ${key}: [build, lint]`);
    return [];
  }
  const seen = new Set<string>();
  return list.filter((need) => {
    if (seen.has(need.id)) {
      warn(ctx, scope, [key], `"${need.id}" is listed twice`);
      return false;
    }
    seen.add(need.id);
    return true;
  });
}

function readRetries(ctx: Ctx, scope: Scope, raw: unknown): RetryPolicy {
  const policy: RetryPolicy = { attempts: 1, delayMs: DEFAULT_RETRY_DELAY_MS, backoff: DEFAULT_BACKOFF, maxDelayMs: null };
  if (raw === undefined) return policy;
  if (typeof raw === 'number') {
    const count = check(ctx, scope, ['retries'], retryCount, raw, `retries is the number of retries, 0 to ${MAX_RETRIES}`);
    if (count !== undefined) policy.attempts = count + 1;
    return policy;
  }
  if (!isRecord(raw)) {
    report(ctx, scope, ['retries'], `expected a number of retries or a mapping, got ${describe(raw)}`, 'e.g. retries: 2, or retries: { limit: 2, delay: 10s, backoff: 2, max-delay: 1m }');
    return policy;
  }
  const { values, present } = readFields(ctx, scope, ['retries'], raw, RETRY_FIELDS, { unknown: 'error', what: 'retry field' });
  if (!present.has('limit')) {
    report(ctx, scope, ['retries'], 'limit is missing', 'e.g. retries: { limit: 2, delay: 10s }');
  } else if (typeof values.limit === 'number') {
    policy.attempts = values.limit + 1;
  }
  if (present.has('delay')) policy.delayMs = readDuration(ctx, scope, ['retries', 'delay'], raw.delay) ?? policy.delayMs;
  if (typeof values.backoff === 'number') policy.backoff = values.backoff;
  if (present.has('max-delay')) policy.maxDelayMs = readDuration(ctx, scope, ['retries', 'max-delay'], raw['max-delay']);
  if (policy.maxDelayMs !== null && policy.maxDelayMs < policy.delayMs) {
    report(ctx, scope, ['retries', 'max-delay'], 'must not be shorter than the delay');
  }
  if (values.limit === 0) {
    for (const key of ['delay', 'backoff', 'max-delay']) {
      if (present.has(key)) report(ctx, scope, ['retries', key], 'has no effect with limit 0', 'raise the limit, or drop it');
    }
  }
  return policy;
}

/**
 * Reads an agent object (native `agent:` or predecessor `target` of type agent). cwd and env are
 * returned as given; the caller merges them with the step's and checks their references.
 */
function readAgent(
  ctx: Ctx,
  scope: Scope,
  rel: Path,
  obj: Record<string, unknown>,
  legacy: boolean,
  refs: Reference[],
): { target: AgentTarget | null; timeoutMs: number | null | undefined } {
  const table: FieldTable = legacy ? { ...AGENT_TABLE, type: z.literal('agent'), timeoutMs: LEGACY_COMMAND_FIELDS.timeoutMs } : AGENT_TABLE;
  const suggest = legacy ? [...AGENT_KEYS.keys(), 'type', 'timeoutMs'] : [...AGENT_FIELDS.map(([, kebab]) => kebab), AGENT_IDLE_TIMEOUT];
  const { values, present } = readFields(ctx, scope, rel, obj, table, { unknown: legacy ? 'warn' : 'error', what: 'agent field', suggest });
  // One entry per canonical field, whichever spelling was used.
  const byField = new Map<string, { key: string; valid: boolean; value: unknown }>();
  let ok = true;
  for (const key of present) {
    if (key === 'type' || key === 'timeoutMs') continue;
    const canonical = AGENT_KEYS.get(key)!;
    const group = canonical === 'idleTimeout' ? 'idleTimeoutMs' : canonical;
    const other = byField.get(group);
    if (other) {
      report(ctx, scope, [...rel, key], `given twice (also as ${other.key})`, 'keep one spelling');
      ok = false;
      continue;
    }
    const valid = Object.hasOwn(values, key);
    if (!valid) ok = false;
    byField.set(group, { key, valid, value: values[key] });
  }
  const get = <T>(field: keyof AgentTarget): T | null => (byField.get(field)?.value ?? null) as T | null;
  const keyOf = (field: keyof AgentTarget): string => byField.get(field)?.key ?? field;

  if (!byField.has('provider')) {
    report(ctx, scope, rel, 'provider is missing', 'e.g. agent: { provider: claude, prompt: "…" }');
    ok = false;
  }
  const prompt = get<string>('prompt');
  const promptFile = get<string>('promptFile');
  const promptGiven = byField.get('prompt');
  const fileGiven = byField.get('promptFile');
  if (!promptGiven && !fileGiven) {
    report(ctx, scope, rel, 'prompt is missing', 'give prompt: "…" or prompt-file: path/to/prompt.md');
    ok = false;
  } else if (prompt !== null && promptFile !== null) {
    report(ctx, scope, [...rel, keyOf('promptFile')], 'prompt and prompt-file are both given', 'keep one of them');
    ok = false;
  } else if (prompt === null && promptFile === null && (promptGiven?.valid ?? true) && (fileGiven?.valid ?? true)) {
    report(ctx, scope, [...rel, promptGiven ? promptGiven.key : fileGiven!.key], 'is null, but the agent needs a prompt');
    ok = false;
  }

  let idleTimeoutMs = get<number>('idleTimeoutMs');
  const idle = byField.get('idleTimeoutMs');
  if (idle?.key === AGENT_IDLE_TIMEOUT) {
    idleTimeoutMs = readDuration(ctx, scope, [...rel, AGENT_IDLE_TIMEOUT], obj[AGENT_IDLE_TIMEOUT]);
    if (idleTimeoutMs === null) ok = false;
  }

  const env = get('env') === null ? {} : toEnv(get('env'));
  const extraArgs = (get<unknown[]>('extraArgs') ?? []).map(stringify);
  if (prompt !== null) templateRefs(ctx, scope, [...rel, keyOf('prompt')], prompt, refs);
  if (promptFile !== null) templateRefs(ctx, scope, [...rel, keyOf('promptFile')], promptFile, refs);
  extraArgs.forEach((arg, j) => templateRefs(ctx, scope, [...rel, keyOf('extraArgs'), j], arg, refs));

  let timeoutMs: number | null | undefined;
  if (legacy && present.has('timeoutMs')) timeoutMs = (values.timeoutMs as number | null | undefined) ?? null;
  if (!ok) return { target: null, timeoutMs };
  const provider = get<string>('provider')!;
  const account = accountRef(get<AccountFile>('account'));
  return {
    target: {
      type: 'agent',
      provider,
      prompt,
      promptFile,
      model: get<string>('model'),
      agent: get<string>('agent'),
      cwd: get<string>('cwd'),
      env,
      permissionMode: get<string>('permissionMode'),
      extraArgs,
      configIsolation: configIsolationOf(get<string>('configIsolation'), legacy),
      account: account?.profile ?? null,
      ...(account !== null && account.tool !== null && account.tool !== provider ? { accountTool: account.tool } : {}),
      maxTurns: get<number>('maxTurns'),
      maxCostUsd: get<number>('maxCostUsd'),
      idleTimeoutMs,
    },
    timeoutMs,
  };
}

const TARGET_KEYS = ['run', 'command', 'agent', 'target'] as const;

/** Builds a command target from its parts; reports the whitespace, args and shell-template rules. */
function commandTarget(
  ctx: Ctx,
  scope: Scope,
  parts: { command: string; commandRel: Path; args: string[]; argsRel: Path; shell: boolean; legacy?: boolean },
  refs: Reference[],
): CommandTarget | null {
  let ok = true;
  const { command, args, shell } = parts;
  // No command line can hold a NUL byte: refused here, rather than failing every run at its start.
  for (const [value, rel] of [[command, parts.commandRel], ...args.map((a, j) => [a, [...parts.argsRel, j]] as const)] as const) {
    if (value.includes('\0')) {
      report(ctx, scope, rel as Path, 'contains a NUL byte (\\0), which no command line can hold', 'remove it (a file written with a stray NUL, or an escaped \\u0000)');
      ok = false;
    }
  }
  if (shell) {
    if (hasTemplate(command)) {
      report(ctx, scope, parts.commandRel, '${{ }} in shell text', SHELL_TEMPLATE_HINT);
      ok = false;
    }
    if (args.length > 0) {
      report(ctx, scope, parts.argsRel, 'args are only used with shell: false', 'write the arguments into the shell text, or drop shell: true');
      ok = false;
    }
  } else {
    const bare = command.replace(/\$\{\{[\s\S]*?\}\}/g, 'x');
    if (/\s/.test(bare.trim())) {
      const words = command.trim().split(/\s+/);
      report(
        ctx,
        scope,
        parts.commandRel,
        `${JSON.stringify(command)} contains whitespace, but runs without a shell, as one executable`,
        parts.legacy
          ? `put the flags in args ("command": ${JSON.stringify(words[0])}, "args": ${JSON.stringify(words.slice(1))}), or set "shell": true to run it through a shell — the predecessor refused it too`
          : `use args: (command: ${words[0]}, args: [${words.slice(1).join(', ')}]), or run: / shell: true to run it through a shell`,
      );
      ok = false;
    }
    templateRefs(ctx, scope, parts.commandRel, command, refs);
    args.forEach((arg, j) => templateRefs(ctx, scope, [...parts.argsRel, j], arg, refs));
  }
  if (!ok) return null;
  return { type: 'command', command, args, shell, cwd: null, env: {} };
}

/** Reads the target of a step (exactly one of run, command, agent, target); returns it with the target's own timeout. */
function readTarget(
  ctx: Ctx,
  scope: Scope,
  raw: Record<string, unknown>,
  values: Record<string, unknown>,
  present: ReadonlySet<string>,
  refs: Reference[],
): { target: StepTarget | null; timeoutMs: number | null | undefined } {
  const none = { target: null, timeoutMs: undefined };
  const targets = TARGET_KEYS.filter((key) => present.has(key));
  if (targets.length === 0) {
    report(ctx, scope, [], 'no target', 'give one of run: (shell text), command: (an executable, with args:) or agent: { provider, prompt }');
    return none;
  }
  if (targets.length > 1) {
    report(ctx, scope, [targets[1]!], `a step has one target, but this one also has ${targets[0]}`, `keep one of ${targets.join(', ')}`);
    return none;
  }
  const kind = targets[0]!;
  for (const key of ['args', 'shell'] as const) {
    if (!present.has(key) || kind === 'command' || (kind === 'run' && key === 'shell' && raw.shell !== false)) continue;
    const hint =
      kind === 'agent'
        ? 'the agent CLI takes agent: { extra-args: [...] }'
        : kind === 'run'
          ? 'run: is shell text: write the arguments into it, or use command: with args: (no shell)'
          : 'put it inside target:';
    report(ctx, scope, [key], key === 'shell' && kind === 'run' ? 'shell: false contradicts run: (shell text)' : `not used with ${kind}:`, hint);
  }

  // The step's cwd/env, and the target's own (agent:, target:), merged; references checked once merged.
  const stepCwd = (values.cwd as string | undefined) ?? null;
  const stepEnv = values.env === undefined ? {} : toEnv(values.env);
  let cwd = stepCwd;
  let cwdRel: Path = ['cwd'];
  const env = new Map<string, { value: string; rel: Path }>(Object.entries(stepEnv).map(([k, v]) => [k, { value: v, rel: ['env', k] }]));
  const mergeOwn = (rel: Path, ownCwd: string | null, ownEnv: Record<string, string>) => {
    if (ownCwd !== null) {
      if (stepCwd !== null && ownCwd !== stepCwd) report(ctx, scope, [...rel, 'cwd'], `differs from the step's cwd ${JSON.stringify(stepCwd)}`, 'give cwd once');
      cwd = ownCwd;
      cwdRel = [...rel, 'cwd'];
    }
    for (const [k, v] of Object.entries(ownEnv)) {
      const step = env.get(k);
      if (step && step.value !== v) report(ctx, scope, [...rel, 'env', k], "also set, differently, in the step's env", 'set each variable once');
      env.set(k, { value: v, rel: [...rel, 'env', k] });
    }
  };

  let target: StepTarget | null = null;
  let timeoutMs: number | null | undefined;
  if (kind === 'run') {
    if (typeof values.run === 'string') target = commandTarget(ctx, scope, { command: values.run, commandRel: ['run'], args: [], argsRel: ['args'], shell: true }, refs);
  } else if (kind === 'command') {
    if (typeof values.command === 'string') {
      const args = ((values.args as unknown[] | undefined) ?? []).map(stringify);
      const shell = (values.shell as boolean | undefined) ?? false;
      target = commandTarget(ctx, scope, { command: values.command, commandRel: ['command'], args, argsRel: ['args'], shell }, refs);
    }
  } else if (kind === 'agent') {
    if (expectMapping(ctx, scope, ['agent'], raw.agent, 'agent: { provider: claude, prompt: "fix the failing tests" }')) {
      const agent = readAgent(ctx, scope, ['agent'], raw.agent, false, refs);
      if (agent.target) mergeOwn(['agent'], agent.target.cwd, agent.target.env);
      target = agent.target;
    }
  } else if (expectMapping(ctx, scope, ['target'], raw.target, 'target: { type: "command", command: "npm", args: ["test"] }')) {
    const legacyTarget = raw.target;
    const type = legacyTarget.type;
    if (type === 'agent') {
      const agent = readAgent(ctx, scope, ['target'], legacyTarget, true, refs);
      if (agent.target) mergeOwn(['target'], agent.target.cwd, agent.target.env);
      target = agent.target;
      timeoutMs = agent.timeoutMs;
    } else if (type === 'command') {
      const read = readFields(ctx, scope, ['target'], legacyTarget, LEGACY_COMMAND_FIELDS, { unknown: 'error', what: 'command target field' });
      if (!read.present.has('command')) {
        report(ctx, scope, ['target'], 'command is missing', 'e.g. target: { type: "command", command: "npm", args: ["test"] }');
      } else if (typeof read.values.command === 'string') {
        const args = ((read.values.args as unknown[] | undefined) ?? []).map(stringify);
        // The predecessor's default is no shell: `command` is the executable, and one with spaces is refused.
        const shell = (read.values.shell as boolean | undefined) ?? false;
        target = commandTarget(
          ctx,
          scope,
          { command: read.values.command, commandRel: ['target', 'command'], args, argsRel: ['target', 'args'], shell, legacy: true },
          refs,
        );
        const ownEnv = read.values.env === undefined ? {} : toEnv(read.values.env);
        if (target) mergeOwn(['target'], (read.values.cwd as string | null | undefined) ?? null, ownEnv);
        const account = accountRef(read.values.account as AccountFile | undefined);
        if (target && account) withAccount(ctx, scope, ['target', 'account'], target, account);
      }
      if (read.present.has('timeoutMs')) timeoutMs = (read.values.timeoutMs as number | null | undefined) ?? null;
    } else if (type === undefined) {
      report(ctx, scope, ['target'], 'type is missing', 'give type: "command" or type: "agent"');
    } else {
      report(ctx, scope, ['target', 'type'], `expected "command" or "agent", got ${describe(type)}`);
    }
  }
  if (target === null) return { target, timeoutMs };
  if (cwd !== null) templateRefs(ctx, scope, cwdRel, cwd, refs);
  for (const [name, { value, rel }] of env) {
    refuseInlineSecret(ctx, scope, rel, name, value);
    templateRefs(ctx, scope, rel, value, refs);
  }
  target.cwd = cwd;
  target.env = Object.fromEntries([...env].map(([k, { value }]) => [k, value]));
  return { target, timeoutMs };
}

/**
 * Sets a target's credentials profile. A command has no provider to take the tool from: its
 * account must name one (`{ profile, tool }`); an agent's tool defaults to its provider.
 */
function withAccount(ctx: Ctx, scope: Scope, rel: Path, target: StepTarget, account: { profile: string; tool: string | null }): void {
  if (target.type === 'command') {
    if (account.tool === null) {
      report(ctx, scope, rel, `account ${JSON.stringify(account.profile)} on a command needs the tool its profile is for`, `write account: { profile: ${account.profile}, tool: <tool> } (e.g. claude, codex, gh)`);
      return;
    }
    target.account = account.profile;
    target.accountTool = account.tool;
    return;
  }
  target.account = account.profile;
  if (account.tool !== null && account.tool !== target.provider) target.accountTool = account.tool;
  else delete target.accountTool;
}

function readStep(ctx: Ctx, index: number, raw: unknown): { draft: StepDraft | null; legacy: boolean } {
  const idValue = isRecord(raw) ? raw.id : undefined;
  const id = typeof idValue === 'string' && STEP_ID_RE.test(idValue) ? idValue : null;
  const scope: Scope = { base: ['steps', index], step: id, label: stepLabel(id, index) };
  if (!isRecord(raw)) {
    report(ctx, scope, [], `expected a mapping with id and a target, got ${describe(raw)}`, 'e.g. - { id: test, run: npm test }');
    return { draft: null, legacy: false };
  }
  const legacy = Object.keys(LEGACY_STEP_FIELDS).some((key) => has(raw, key));
  const { values, present } = readFields(ctx, scope, [], raw, STEP_TABLE, {
    unknown: 'error',
    what: 'field',
    suggest: [...NATIVE_STEP_KEYS, ...Object.keys(LEGACY_STEP_FIELDS)],
    listed: NATIVE_STEP_KEYS,
    hints: { id: ID_HINT },
  });
  if (!present.has('id')) report(ctx, scope, [], 'id is missing', `every step needs an id: ${ID_HINT}`);
  const refs: Reference[] = [];

  // ── dependencies ──
  let needs: Array<{ id: string; rel: Path }> = [];
  let needsKey = 'needs';
  if (present.has('needs') && present.has('dependsOn')) {
    report(ctx, scope, ['dependsOn'], 'needs and dependsOn are both given', 'dependsOn is the predecessor spelling of needs: keep one');
  } else if (present.has('needs') || present.has('dependsOn')) {
    needsKey = present.has('needs') ? 'needs' : 'dependsOn';
    needs = readNeeds(ctx, scope, needsKey, values[needsKey]);
  }

  // ── condition ──
  let condition: string | null = null;
  if (typeof values.if === 'string' || typeof values.if === 'boolean') {
    const source = String(values.if).trim();
    try {
      const expr = parseCondition(source);
      for (const ref of conditionReferences(expr)) refs.push({ rel: ['if'], ref });
      condition = source;
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      report(ctx, scope, ['if'], error.message.replace(/^if: /, ''), error.hint);
    }
  }

  // ── policies ──
  if (present.has('continue-on-error') && present.has('continueOnFailure')) {
    report(ctx, scope, ['continueOnFailure'], 'continue-on-error and continueOnFailure are both given', 'continueOnFailure is the predecessor spelling: keep one');
  }
  const continueOnError = (values['continue-on-error'] ?? values.continueOnFailure ?? false) as boolean;
  let timeoutMs: number | null = null;
  let timeoutKey: string | null = null;
  if (present.has('timeout') && present.has('timeoutMs')) {
    report(ctx, scope, ['timeoutMs'], 'timeout and timeoutMs are both given', 'timeoutMs is the predecessor spelling: keep one');
  } else if (present.has('timeout')) {
    timeoutMs = readDuration(ctx, scope, ['timeout'], raw.timeout);
    timeoutKey = 'timeout';
  } else if (present.has('timeoutMs')) {
    timeoutMs = (values.timeoutMs as number | null | undefined) ?? null;
    timeoutKey = 'timeoutMs';
  }
  const retries = readRetries(ctx, scope, present.has('retries') ? raw.retries : undefined);
  const outputs = (values.outputs as string[] | undefined) ?? [];
  outputs.forEach((key, j) => {
    if (outputs.indexOf(key) !== j) report(ctx, scope, ['outputs', j], `"${key}" is declared twice`);
  });

  // ── target ──
  const target = readTarget(ctx, scope, raw, values, present, refs);
  // The step's account wins over its target's (the predecessor's `step.account ?? target.account`).
  const stepAccount = accountRef(values.account as AccountFile | undefined);
  if (target.target && stepAccount) withAccount(ctx, scope, ['account'], target.target, stepAccount);
  // The step's own timeout overrides the target's (the predecessor's `step.timeoutMs ?? target.timeoutMs`).
  if (timeoutKey === null && target.timeoutMs !== undefined && target.timeoutMs !== null) timeoutMs = target.timeoutMs;

  const draft: StepDraft = {
    index,
    scope,
    id,
    name: (values.name as string | null | undefined) ?? null,
    description: (values.description as string | null | undefined) ?? null,
    target: target.target,
    needs,
    needsKey,
    if: condition,
    continueOnError,
    timeoutMs,
    retries,
    outputs,
    refs,
  };
  return { draft, legacy };
}

/** Steps as a list for hints: `steps: lint, test, fix`. */
function stepList(ids: readonly string[]): string {
  const shown = ids.slice(0, 20).join(', ');
  return `steps: ${shown}${ids.length > 20 ? `, … (${ids.length} in all)` : ''}`;
}

function unknownStepHint(name: string, ids: readonly string[]): string {
  const guess = closest(name, ids);
  return `${guess ? `did you mean "${guess}"? ` : ''}${stepList(ids)}`;
}

/** Finds the strongly connected components of the needs graph (Tarjan), in file order of their first member. */
function cycles(order: readonly string[], edges: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (start: string) => {
    // Iterative Tarjan: frames of (node, next edge index).
    const frames: Array<{ node: string; i: number }> = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (frames.length > 0) {
      const frame = frames.at(-1)!;
      const next = edges.get(frame.node) ?? [];
      if (frame.i < next.length) {
        const to = next[frame.i++]!;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          frames.push({ node: to, i: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      frames.pop();
      const parent = frames.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1) components.push(component);
      }
    }
  };
  for (const id of order) if (!index.has(id)) visit(id);
  const position = new Map(order.map((id, i) => [id, i]));
  return components
    .map((c) => c.sort((a, b) => position.get(a)! - position.get(b)!))
    .sort((a, b) => position.get(a[0]!)! - position.get(b[0]!)!);
}

/** A shortest cycle through `start` within `members`, as a path start → … → start. */
function cycleThrough(start: string, members: ReadonlySet<string>, edges: ReadonlyMap<string, readonly string[]>): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head]!;
    for (const to of edges.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== undefined && at !== start; at = parent.get(at)) path.splice(1, 0, at);
        path.push(start);
        return path;
      }
      if (!parent.has(to)) {
        parent.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start, start];
}

function ancestorsOf(order: readonly string[], edges: ReadonlyMap<string, readonly string[]>): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  for (const id of order) {
    const seen = new Set<string>();
    const stack = [...(edges.get(id) ?? [])];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (seen.has(next)) continue;
      seen.add(next);
      stack.push(...(edges.get(next) ?? []));
    }
    result.set(id, new Set(order.filter((other) => seen.has(other))));
  }
  return result;
}

function readInputs(ctx: Ctx, raw: unknown): Record<string, WorkflowInput> | null {
  const root: Scope = { base: [], step: null, label: null };
  if (raw === undefined) return {};
  if (!isRecord(raw)) {
    report(ctx, root, ['inputs'], `expected a mapping of input names, got ${describe(raw)}`, 'e.g. inputs: { branch: main }');
    return null;
  }
  const entries: Array<[string, WorkflowInput]> = [];
  let ok = true;
  for (const [name, value] of Object.entries(raw)) {
    if (check(ctx, root, ['inputs', name], keyText, name) === undefined) {
      ok = false;
      continue;
    }
    if (isRecord(value)) {
      const { values } = readFields(ctx, root, ['inputs', name], value, INPUT_FIELDS, { unknown: 'error', what: 'input field' });
      const input: WorkflowInput = {
        description: (values.description as string | null | undefined) ?? null,
        default: values.default === undefined || values.default === null ? null : stringify(values.default),
        required: (values.required as boolean | undefined) ?? false,
      };
      if (input.required && input.default !== null) warn(ctx, root, ['inputs', name], 'required has no effect with a default');
      entries.push([name, input]);
    } else if (check(ctx, root, ['inputs', name], scalar.nullable(), value, 'give a default value, or { default, description, required }') !== undefined) {
      entries.push([name, { description: null, default: value === null ? null : stringify(value), required: false }]);
    } else {
      ok = false;
    }
  }
  return ok ? Object.fromEntries(entries) : null;
}

function fail(ctx: Ctx, source: { file?: string }): ValidationError {
  const problems = ctx.problems;
  const first = problems[0]!;
  const more = problems.length - 1;
  const message = `${source.file ? `${source.file}: ` : ''}${first.message}${more > 0 ? ` (and ${more} more problem${more === 1 ? '' : 's'})` : ''}`;
  return new ValidationError(message, { hint: first.hint, details: { problems, ...(source.file ? { file: source.file } : {}) } });
}

/**
 * Turns a parsed spec file — native (terse, YAML-friendly) or the predecessor's JSON shape — into the
 * canonical {@link WorkflowSpec}.
 *
 * @param input the parsed document (`JSON.parse` / YAML `toJS()` output).
 * @param source `file` prefixes the thrown error's message (not the problems' messages).
 * @returns the spec, warnings (e.g. ignored unknown fields of predecessor agent targets), and the
 *   format: `legacy` when any step uses `target`, `dependsOn`, `continueOnFailure` or `timeoutMs`.
 * @throws ValidationError whose `details.problems` lists every {@link SpecProblem} found; its message is
 *   the first problem, plus `(and N more problems)`.
 */
export function normalizeWorkflowSpec(
  input: unknown,
  source: { file?: string } = {},
): { spec: WorkflowSpec; warnings: string[]; format: 'native' | 'legacy' } {
  const ctx: Ctx = { problems: [], warnings: [] };
  const root: Scope = { base: [], step: null, label: null };
  if (!isRecord(input)) {
    report(ctx, root, [], `a workflow spec must be a mapping with name and steps, got ${describe(input)}`, 'e.g. name: nightly and steps: [{ id: test, run: npm test }]');
    throw fail(ctx, source);
  }
  const rootTable: FieldTable = { ...ROOT_FIELDS, inputs: z.unknown(), steps: z.unknown() };
  const { values, present } = readFields(ctx, root, [], input, rootTable, { unknown: 'error', what: 'field', hints: { name: NAME_HINT } });
  if (!present.has('name')) report(ctx, root, [], 'name is missing', `add name: (${NAME_HINT})`);
  const timeoutMs = present.has('timeout') ? readDuration(ctx, root, ['timeout'], input.timeout) : null;
  const env = values.env === undefined ? {} : toEnv(values.env);
  for (const [name, value] of Object.entries(env)) refuseInlineSecret(ctx, root, ['env', name], name, value);
  const inputs = readInputs(ctx, input.inputs);

  // ── steps ──
  const drafts: StepDraft[] = [];
  let legacy = false;
  if (!present.has('steps')) {
    report(ctx, root, [], 'steps is missing', 'add steps: with at least one step, e.g. - { id: test, run: npm test }');
  } else if (!Array.isArray(input.steps)) {
    report(ctx, root, ['steps'], `expected a list of steps, got ${describe(input.steps)}`);
  } else if (input.steps.length === 0) {
    report(ctx, root, ['steps'], 'no steps', 'add at least one step, e.g. - { id: test, run: npm test }');
  } else {
    input.steps.forEach((raw, i) => {
      const { draft, legacy: isLegacy } = readStep(ctx, i, raw);
      legacy ||= isLegacy;
      if (draft) drafts.push(draft);
    });
  }

  // ── graph ──
  const firstIndex = new Map<string, number>();
  for (const draft of drafts) {
    if (draft.id === null) continue;
    const first = firstIndex.get(draft.id);
    if (first === undefined) firstIndex.set(draft.id, draft.index);
    else report(ctx, draft.scope, ['id'], `duplicate step id (step #${first + 1} has it too)`, 'step ids must be unique');
  }
  const ids = [...firstIndex.keys()];
  const edges = new Map<string, string[]>();
  for (const draft of drafts) {
    const valid: string[] = [];
    for (const need of draft.needs) {
      if (need.id === draft.id) report(ctx, draft.scope, need.rel, 'a step cannot depend on itself');
      else if (!firstIndex.has(need.id)) report(ctx, draft.scope, need.rel, `unknown step "${need.id}"`, unknownStepHint(need.id, ids));
      else valid.push(need.id);
    }
    // The graph is built from the first step of each id (a duplicate is already a problem).
    if (draft.id !== null && firstIndex.get(draft.id) === draft.index) edges.set(draft.id, valid);
  }
  const byId = new Map(drafts.filter((d) => d.id !== null && firstIndex.get(d.id) === d.index).map((d) => [d.id!, d]));
  for (const component of cycles(ids, edges)) {
    const path = cycleThrough(component[0]!, new Set(component), edges);
    const from = byId.get(path[0]!)!;
    const need = from.needs.find((n) => n.id === path[1]);
    report(ctx, from.scope, need?.rel ?? [from.needsKey], `cycle: ${path.join(' → ')}`, 'a step cannot need itself, directly or through other steps: remove one of these needs');
  }

  // ── references ──
  // Whether a referenced step is among a step's (transitive) needs: a search from the step that
  // stops when it meets it, only for the references there are — building every step's ancestor set
  // would cost n² on a 9,000-step chain that has no reference at all.
  const isAncestor = (step: string, of: string): boolean => {
    const seen = new Set<string>();
    const stack = [...(edges.get(of) ?? [])];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (next === step) return true;
      if (seen.has(next)) continue;
      seen.add(next);
      for (const need of edges.get(next) ?? []) stack.push(need);
    }
    return false;
  };
  const inputNames = inputs === null ? null : Object.keys(inputs);
  const checkRef = (scope: Scope, own: string | null, ancestry: ((step: string) => boolean) | null, { rel, ref }: Reference) => {
    if (ref.kind === 'input') {
      if (inputNames !== null && !inputNames.includes(ref.name)) {
        const guess = closest(ref.name, inputNames);
        report(
          ctx,
          scope,
          rel,
          `unknown input "${ref.name}"`,
          inputNames.length === 0 ? `declare it: inputs: { ${ref.name}: { default: … } }` : `${guess ? `did you mean "${guess}"? ` : ''}inputs: ${inputNames.join(', ')}`,
        );
      }
      return;
    }
    if (ancestry === null) {
      report(ctx, scope, rel, `refers to step "${ref.step}", but the workflow env can only use inputs`, 'move it to the env of the steps that need it');
      return;
    }
    if (ref.step === own) {
      report(ctx, scope, rel, `refers to the step itself (steps.${ref.step})`, 'a step can only use the results of the steps it needs');
      return;
    }
    if (!firstIndex.has(ref.step)) {
      report(ctx, scope, rel, `unknown step "${ref.step}"`, unknownStepHint(ref.step, ids));
      return;
    }
    if (!ancestry(ref.step)) {
      report(ctx, scope, rel, `refers to step "${ref.step}", which is not among its needs`, `add needs: ${ref.step} (directly, or through a step that needs it)`);
      return;
    }
    const declared = byId.get(ref.step)!.outputs;
    if (ref.property === 'outputs' && ref.key !== null && declared.length > 0 && !declared.includes(ref.key)) {
      const guess = closest(ref.key, declared);
      report(ctx, scope, rel, `step "${ref.step}" has no output "${ref.key}"`, `${guess ? `did you mean "${guess}"? ` : ''}its outputs: ${declared.join(', ')}`);
    }
  };
  for (const draft of drafts) {
    const own = draft.id;
    const ancestry = (step: string) => own !== null && isAncestor(step, own);
    for (const reference of draft.refs) checkRef(draft.scope, own, ancestry, reference);
  }
  for (const [k, v] of Object.entries(env)) {
    const refs: Reference[] = [];
    templateRefs(ctx, root, ['env', k], v, refs);
    for (const reference of refs) checkRef(root, null, null, reference);
  }

  // A predecessor-shape file runs as the predecessor ran it, unless the file says otherwise.
  const execution = (values.execution as 'parallel' | 'sequential' | undefined) ?? (legacy ? 'sequential' : undefined);
  if (execution === 'sequential' && typeof values.concurrency === 'number' && values.concurrency > 1) {
    report(
      ctx,
      root,
      ['concurrency'],
      `${values.concurrency} has no effect: ${present.has('execution') ? 'execution: sequential' : 'a predecessor-shape file'} runs one step at a time`,
      present.has('execution') ? 'drop concurrency, or use execution: parallel' : 'drop concurrency, or add execution: parallel to run independent steps at once',
    );
  }

  if (ctx.problems.length > 0) {
    // Document order: workflow fields first, then steps in file order (stable within each).
    const rank = (p: SpecProblem) => (p.path[0] === 'steps' && typeof p.path[1] === 'number' ? p.path[1] + 1 : 0);
    ctx.problems = ctx.problems.map((p, i) => ({ p, i })).sort((a, b) => rank(a.p) - rank(b.p) || a.i - b.i).map(({ p }) => p);
    throw fail(ctx, source);
  }

  const spec: WorkflowSpec = {
    name: values.name as string,
    description: (values.description as string | null | undefined) ?? null,
    env,
    secrets: [...new Set((values.secrets as string[] | undefined) ?? [])],
    concurrency: (values.concurrency as number | undefined) ?? (execution === 'sequential' ? 1 : DEFAULT_CONCURRENCY),
    timeoutMs,
    inputs: inputs ?? {},
    steps: drafts.map((draft) => ({
      id: draft.id!,
      name: draft.name,
      target: draft.target!,
      needs: draft.needs.map((n) => n.id),
      if: draft.if,
      continueOnError: draft.continueOnError,
      timeoutMs: draft.timeoutMs,
      retries: draft.retries,
      outputs: draft.outputs,
      ...(draft.description !== null ? { description: draft.description } : {}),
    })),
    ...(execution !== undefined ? { execution } : {}),
    ...(values.version !== undefined ? { versionLabel: String(values.version) } : {}),
  };
  // A normaliser bug must not reach the log: the result must satisfy the canonical schema.
  const checked = workflowSpecSchema.safeParse(spec);
  if (!checked.success) throw new Error(`internal: normalised workflow spec is invalid: ${checked.error.message}`);
  return { spec, warnings: ctx.warnings, format: legacy ? 'legacy' : 'native' };
}

// ── graph helpers on canonical specs ───────────────────────────────────────────────────────────────

/** Every step's transitive `needs` (its ancestors), each set in file order. */
export function stepAncestors(spec: WorkflowSpec): Map<string, Set<string>> {
  const ids = spec.steps.map((s) => s.id);
  return ancestorsOf(ids, new Map(spec.steps.map((s) => [s.id, s.needs])));
}

/**
 * A topological order of the steps (every step after all it needs). Stable: whenever several steps are
 * ready, the one earliest in the file comes first.
 * @throws ValidationError on an unknown dependency or a cycle (impossible in a normalised spec).
 */
export function topologicalOrder(spec: WorkflowSpec): string[] {
  const ids = new Set(spec.steps.map((s) => s.id));
  for (const step of spec.steps) {
    const missing = step.needs.find((id) => !ids.has(id));
    if (missing !== undefined) throw new ValidationError(`step "${step.id}": needs: unknown step "${missing}"`);
  }
  const done = new Set<string>();
  const order: string[] = [];
  const remaining = [...spec.steps];
  while (remaining.length > 0) {
    const i = remaining.findIndex((step) => step.needs.every((id) => done.has(id)));
    if (i < 0) throw new ValidationError(`cycle among steps: ${remaining.map((s) => s.id).join(', ')}`);
    const [step] = remaining.splice(i, 1);
    done.add(step!.id);
    order.push(step!.id);
  }
  return order;
}

const SEQUENTIAL_ORDERS = new WeakMap<object, string[]>();

/**
 * The order in which a `sequential` spec runs its steps — the predecessor's (its
 * `workflowExecutionOrder`): depth-first over `needs`, steps taken in file order, each step right
 * after the steps it needs. `[x needs c, b, c]` runs c, x, b (where {@link topologicalOrder} gives
 * b, c, x). Cached per spec object: the workflow-run machine asks after every event.
 */
export function sequentialOrder(spec: Pick<WorkflowSpec, 'steps'>): string[] {
  const cached = SEQUENTIAL_ORDERS.get(spec);
  if (cached) return cached;
  const byId = new Map(spec.steps.map((s) => [s.id, s]));
  const visited = new Set<string>();
  const order: string[] = [];
  for (const first of spec.steps) {
    if (visited.has(first.id)) continue;
    // Iterative: a long chain must not overflow the stack. A cycle cannot occur in a normalised spec.
    visited.add(first.id);
    const frames: Array<{ id: string; i: number }> = [{ id: first.id, i: 0 }];
    while (frames.length > 0) {
      const frame = frames.at(-1)!;
      const needs = byId.get(frame.id)?.needs ?? [];
      if (frame.i < needs.length) {
        const next = needs[frame.i++]!;
        if (!visited.has(next) && byId.has(next)) {
          visited.add(next);
          frames.push({ id: next, i: 0 });
        }
        continue;
      }
      frames.pop();
      order.push(frame.id);
    }
  }
  SEQUENTIAL_ORDERS.set(spec, order);
  return order;
}
