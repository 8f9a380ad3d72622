/**
 * `loops workflows convert`: a spec file (the predecessor's JSON shape, or native) written out in the
 * native form, where how steps run is the file's explicit choice. A predecessor-shape file ran one
 * step at a time and stopped at the first failure; the converted file says so (`execution:
 * sequential`, `continue-on-error` where it had `continueOnFailure`), with a comment on how to let
 * independent steps run at once. The result is checked: read back, it must give the very spec the
 * source gives (else nothing is written and the field that would change is named).
 */
import { dirname, resolve } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { ValidationError } from '../../events/errors.js';
import { normalizeWorkflowSpec, type AgentTarget, type StepSpec, type WorkflowSpec } from '../../workflow/spec.js';
import { loadWorkflowFile, type LoadedWorkflow, type ParseOptions } from './files.js';
import { anchorPaths } from './specs.js';

type Doc = Record<string, unknown>;

export interface ConvertedWorkflow {
  /** The text to write: YAML with a leading comment, or JSON. */
  text: string;
  format: 'yaml' | 'json';
  /** The source file as read. */
  source: LoadedWorkflow;
  /** The spec the converted text gives (equal to the source's). */
  spec: WorkflowSpec;
}

/** A duration in the file's spelling: `90s`, `1h30m`, `1500ms` — exact, parsed back to the same milliseconds. */
export function durationSpelling(ms: number): string {
  let rest = ms;
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('') || '0ms';
}

/** The file spelling that gives each canonical `configIsolation`, asked of the normaliser itself. */
function isolationSpellings(): Map<string, string> {
  const out = new Map<string, string>();
  for (const candidate of ['login', 'empty', 'safe', 'none']) {
    try {
      const { spec } = normalizeWorkflowSpec({ name: 'probe', steps: [{ id: 'a', agent: { provider: 'claude', prompt: 'x', 'config-isolation': candidate } }] });
      const value = (spec.steps[0]!.target as AgentTarget).configIsolation;
      if (!out.has(value)) out.set(value, candidate);
    } catch {
      // not a spelling this version accepts
    }
  }
  return out;
}

function agentDoc(t: AgentTarget, isolation: Map<string, string>): Doc {
  const doc: Doc = { provider: t.provider };
  if (t.prompt !== null) doc.prompt = t.prompt;
  if (t.promptFile !== null) doc['prompt-file'] = t.promptFile;
  if (t.model !== null) doc.model = t.model;
  if (t.agent !== null) doc.agent = t.agent;
  if (t.permissionMode !== null) doc['permission-mode'] = t.permissionMode;
  if (t.extraArgs.length > 0) doc['extra-args'] = t.extraArgs;
  // Always written: the isolation the source meant stays the file's explicit choice.
  doc['config-isolation'] = isolation.get(t.configIsolation) ?? t.configIsolation;
  if (t.account !== null) doc.account = t.accountTool === undefined ? t.account : { profile: t.account, tool: t.accountTool };
  if (t.maxTurns !== null) doc['max-turns'] = t.maxTurns;
  if (t.maxCostUsd !== null) doc['max-cost-usd'] = t.maxCostUsd;
  if (t.idleTimeoutMs !== null) doc['idle-timeout'] = durationSpelling(t.idleTimeoutMs);
  return doc;
}

function stepDoc(step: StepSpec, isolation: Map<string, string>): Doc {
  const doc: Doc = { id: step.id };
  if (step.name !== null) doc.name = step.name;
  if (step.description !== undefined && step.description !== null) doc.description = step.description;
  if (step.needs.length === 1) doc.needs = step.needs[0];
  else if (step.needs.length > 1) doc.needs = step.needs;
  if (step.if !== null) doc.if = step.if;
  if (step.continueOnError) doc['continue-on-error'] = true;
  if (step.timeoutMs !== null) doc.timeout = durationSpelling(step.timeoutMs);
  const r = step.retries;
  if (r.attempts > 1) {
    doc.retries = {
      limit: r.attempts - 1,
      delay: durationSpelling(r.delayMs),
      backoff: r.backoff,
      ...(r.maxDelayMs !== null ? { 'max-delay': durationSpelling(r.maxDelayMs) } : {}),
    };
  }
  if (step.outputs.length > 0) doc.outputs = step.outputs;
  const t = step.target;
  if (t.cwd !== null) doc.cwd = t.cwd;
  if (Object.keys(t.env).length > 0) doc.env = t.env;
  if (t.type === 'command') {
    if (t.shell) doc.run = t.command;
    else {
      doc.command = t.command;
      if (t.args.length > 0) doc.args = t.args;
    }
    // A command's credentials profile names its tool (it has no provider to take it from).
    if (t.account !== undefined) doc.account = { profile: t.account, tool: t.accountTool ?? null };
  } else {
    doc.agent = agentDoc(t, isolation);
  }
  return doc;
}

/** The native document of a canonical spec (key order: as a person would write it). */
export function nativeDocument(spec: WorkflowSpec): Doc {
  const isolation = isolationSpellings();
  const doc: Doc = { name: spec.name };
  if (spec.versionLabel !== undefined) doc.version = spec.versionLabel;
  if (spec.description !== null) doc.description = spec.description;
  if (spec.execution !== undefined) doc.execution = spec.execution;
  if (spec.execution !== 'sequential' && spec.concurrency !== 4) doc.concurrency = spec.concurrency;
  if (spec.timeoutMs !== null) doc.timeout = durationSpelling(spec.timeoutMs);
  if (Object.keys(spec.inputs).length > 0) {
    doc.inputs = Object.fromEntries(
      Object.entries(spec.inputs).map(([name, input]) => [
        name,
        input.description === null && !input.required ? input.default : { ...(input.default !== null ? { default: input.default } : {}), ...(input.description !== null ? { description: input.description } : {}), ...(input.required ? { required: true } : {}) },
      ]),
    );
  }
  if (Object.keys(spec.env).length > 0) doc.env = spec.env;
  if (spec.secrets.length > 0) doc.secrets = spec.secrets;
  doc.steps = spec.steps.map((step) => stepDoc(step, isolation));
  return doc;
}

function header(source: LoadedWorkflow, spec: WorkflowSpec): string {
  const lines = [`Converted from ${source.file} by loops workflows convert (${source.format === 'legacy' ? "the predecessor's shape" : 'native'}).`];
  if (spec.execution === 'sequential') {
    lines.push(
      'execution: sequential keeps the way it ran: one step at a time, in dependency order, and the',
      'first failure of a step without continue-on-error skips every step after it.',
      'To run independent steps at once, change it to execution: parallel (or delete the line): each',
      'step then starts as soon as the steps it needs have ended, up to concurrency (default 4), and a',
      'failure skips only the steps that need it.',
    );
  } else {
    lines.push('Independent steps run at once (up to concurrency); add execution: sequential to run one at a time.');
  }
  return lines.map((l) => `# ${l}`).join('\n') + '\n';
}

/** The first place where two specs differ, as a dotted path (for a conversion that would change the meaning). */
function firstDifference(a: unknown, b: unknown, path = ''): string | null {
  if (a === b) return null;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return path || '(the spec)';
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const found = firstDifference((a as Doc)[key], (b as Doc)[key], path ? `${path}.${key}` : key);
    if (found !== null) return found;
  }
  return null;
}

/**
 * Reads `file` and writes it in the native form (`format`: YAML, or JSON without the comment).
 * `outFile` (when the text is written to a file) anchors relative paths: when it is in another
 * directory than the source, relative `cwd` / `prompt-file` are written absolute, as `create` would
 * store them.
 * @throws ValidationError for every problem of the source, or when the converted text would not
 *   give the same spec (naming the field).
 */
export function convertWorkflowFile(file: string, options: ParseOptions & { format?: 'yaml' | 'json'; outFile?: string | null } = {}): ConvertedWorkflow {
  const source = loadWorkflowFile(file, { name: options.name });
  const sameDir = options.outFile === undefined || options.outFile === null || dirname(resolve(options.outFile)) === dirname(resolve(file));
  const spec = sameDir ? source.spec : anchorPaths(source.spec, file);
  // A predecessor-shape file says how it runs; a native one keeps what it said (or nothing: parallel).
  const doc = nativeDocument(spec);
  const format = options.format ?? 'yaml';
  const text = format === 'json' ? JSON.stringify(doc, null, 2) + '\n' : header(source, spec) + toYaml(doc, { lineWidth: 0 });
  const back = normalizeWorkflowSpec(doc).spec;
  const differs = firstDifference(spec, back);
  if (differs !== null) {
    throw new ValidationError(`${file}: cannot be converted without changing its meaning: ${differs} would differ`, {
      hint: 'keep the file as it is (loops reads it as it is), and report this as a bug of loops workflows convert',
      details: { field: differs },
    });
  }
  return { text, format, source, spec: back };
}
