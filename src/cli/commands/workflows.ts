/**
 * Read commands for workflows: `workflows list`, `show`, `runs`, `inspect`, `validate`, and
 * `schema workflow`. Reading the tables needs no zod, yaml or xstate; `validate` and `schema` load
 * the spec parser only when they run. Just over 500 lines: six read commands of one noun, a
 * section each.
 */
import { UsageError, ValidationError } from '../../events/errors.js';
import { NAME_HINT, NAME_RE } from '../../events/names.js';
import type { StepSpec, WorkflowSpec } from '../../workflow/spec.js';
import { formatDuration } from '../../events/durations.js';
import { shownRef } from '../../runtime/queries/refs.js';
import { openReader } from '../../runtime/store.js';
import {
  findWorkflow,
  findWorkflowRun,
  listWorkflowRuns,
  listWorkflows,
  runAgentTotals,
  stepAgentTotals,
  workflowRunSteps,
  workflowVersion,
  type WorkflowRunView,
  type WorkflowStepView,
} from '../../runtime/queries/workflows.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { agentUsage, durationText, paint, printJson, statusColor, table, truncate, when } from '../render.js';
import { agentTotalsText, renderTimeline, type ViewStep } from '../workflow-view.js';
import { stepSpawnLines } from '../workflow-view.js';

const RUN_STATUSES = ['running', 'succeeded', 'failed', 'cancelled', 'timed_out'];

// ── workflows list ──────────────────────────────────────────────────────────────────────────────

const listSpec: CommandSpec = {
  name: 'workflows list',
  summary: 'List workflows with their latest version, status and last run.',
  positionals: [],
  options: {
    all: { type: 'boolean', short: 'a', description: 'include archived workflows' },
    status: { type: 'string', value: '<status>', description: 'only workflows in this status: active or archived' },
    json: JSON_OPTION,
  },
  examples: ['loops workflows list', 'loops workflows list --all --json', 'loops workflows list --status archived'],
};

/** `--status active|archived` (the predecessor's flag), or null for the default. */
function workflowStatus(value: unknown): 'active' | 'archived' | null {
  if (value === undefined) return null;
  if (value === 'active' || value === 'archived') return value;
  throw new UsageError(`loops workflows list: --status ${shownRef(String(value))} is not a workflow status`, { hint: 'use active or archived (--all lists both)' });
}

const list: CliCommand = {
  spec: listSpec,
  async run({ values }, ctx) {
    const status = workflowStatus(values.status);
    const reader = await openReader(ctx.dataDir);
    try {
      const workflows = listWorkflows(reader.db, { all: values.all === true || status !== null }).filter((w) => status === null || w.status === status);
      if (ctx.json) {
        printJson(ctx, workflows);
        return EXIT.ok;
      }
      if (workflows.length === 0 && status !== null) {
        ctx.err.write(`No ${status} workflows.\n`);
        return EXIT.ok;
      }
      if (workflows.length === 0) {
        const archived = values.all === true ? 0 : listWorkflows(reader.db, { all: true }).length;
        ctx.err.write(
          archived > 0
            ? `No active workflows (${archived} archived: loops workflows list --all shows them).\n`
            : 'No workflows yet. Store one with: loops workflows create <file.yaml>\n',
        );
        return EXIT.ok;
      }
      const c = ctx.color;
      ctx.out.write(
        table(
          ['NAME', 'STATUS', 'VERSION', 'STEPS', 'RUNS', 'LAST RUN', 'ID'],
          workflows.map((w) => [
            paint(c, 'bold', w.name),
            paint(c, statusColor(w.status), w.status),
            String(w.version),
            String(w.spec.steps.length),
            String(w.runCount),
            w.lastRun ? `${paint(c, statusColor(w.lastRun.status), w.lastRun.status ?? '-')} ${when(w.lastRun.at, ctx)}` : '-',
            paint(c, 'gray', w.id),
          ]),
          c,
        ),
      );
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

// ── workflows show ──────────────────────────────────────────────────────────────────────────────

const showSpec: CommandSpec = {
  name: 'workflows show',
  summary: 'Show one workflow: its spec (latest version, or --version N) and its steps.',
  positionals: [{ name: 'workflow', required: true, description: 'workflow name or id (or unique id prefix)' }],
  options: {
    version: { type: 'string', value: '<n>', description: 'show this version of the spec (default: the latest)' },
    json: JSON_OPTION,
  },
  examples: ['loops workflows show nightly', 'loops workflows show nightly --version 1', 'loops workflows show nightly --json'],
};

function quote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** One line saying what a step runs. */
export function targetSummary(step: StepSpec): string {
  const t = step.target;
  if (t.type === 'command') return t.shell ? `run: ${t.command}` : [t.command, ...t.args].map(quote).join(' ');
  const detail = [t.model ? `model ${t.model}` : null, t.agent ? `agent ${t.agent}` : null, t.promptFile ? `prompt ${t.promptFile}` : null]
    .filter(Boolean)
    .join(', ');
  return `agent: ${t.provider}${detail ? ` (${detail})` : ''}`;
}

function retriesText(step: StepSpec): string {
  const r = step.retries;
  if (r.attempts <= 1) return '-';
  const extra = [r.backoff !== 1 ? `×${r.backoff}` : null, r.maxDelayMs !== null ? `≤${formatDuration(r.maxDelayMs)}` : null].filter(Boolean);
  return `${r.attempts - 1} after ${r.delayMs > 0 ? formatDuration(r.delayMs) : '0s'}${extra.length ? ` ${extra.join(' ')}` : ''}`;
}

function inputsText(spec: WorkflowSpec): string | null {
  const entries = Object.entries(spec.inputs);
  if (entries.length === 0) return null;
  return entries
    .map(([name, input]) => `${name}${input.required ? ' (required)' : input.default !== null ? `=${quote(input.default)}` : ''}`)
    .join(', ');
}

const show: CliCommand = {
  spec: showSpec,
  async run({ values, positionals }, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const workflow = findWorkflow(reader.db, positionals[0]!, { includeArchived: true });
      const number = intOption(showSpec, 'version', values.version, workflow.version);
      const shown = number === workflow.version && values.version === undefined ? null : workflowVersion(reader.db, workflow.id, number);
      const spec = shown?.spec ?? workflow.spec;
      if (ctx.json) {
        printJson(ctx, {
          ...workflow,
          latestVersion: workflow.version,
          version: number,
          spec,
          sourceFile: shown ? shown.sourceFile : workflow.sourceFile,
          sha256: shown ? shown.sha256 : workflow.sha256,
        });
        return EXIT.ok;
      }
      const c = ctx.color;
      const lines = [
        `${paint(c, 'bold', workflow.name)}  ${paint(c, statusColor(workflow.status), workflow.status)}${workflow.reason ? ` (${workflow.reason})` : ''}`,
        `id          ${workflow.id}`,
        `version     ${number}${number === workflow.version ? ' (latest)' : ` (latest is ${workflow.version})`}`,
        ...(spec.description ? [`description ${spec.description}`] : []),
        ...((shown ? shown.sourceFile : workflow.sourceFile) ? [`file        ${shown ? shown.sourceFile : workflow.sourceFile}`] : []),
        ...(spec.versionLabel !== undefined ? [`label       ${spec.versionLabel} (the file's own version)`] : []),
        `limits      concurrency ${spec.concurrency}, timeout ${spec.timeoutMs ? formatDuration(spec.timeoutMs) : 'none'}`,
        ...(spec.execution === 'sequential' ? ['execution   sequential: one step at a time, the first failure skips the rest'] : []),
        ...(inputsText(spec) ? [`inputs      ${inputsText(spec)}`] : []),
        // Names only: values may be secret.
        ...(Object.keys(spec.env).length ? [`env         ${Object.keys(spec.env).join(', ')}`] : []),
        ...(spec.secrets.length ? [`secrets     ${spec.secrets.join(', ')}`] : []),
        `created     ${when(shown?.createdAt ?? workflow.createdAt, ctx)}`,
        `updated     ${when(workflow.updatedAt, ctx)}`,
        `run count   ${workflow.runCount}${workflow.lastRun ? ` (last ${workflow.lastRun.status ?? '-'} ${when(workflow.lastRun.at, ctx)}, ${workflow.lastRun.id})` : ''}`,
      ];
      ctx.out.write(lines.join('\n') + '\n\n');
      const width = ctx.out.isTTY ? 48 : 200;
      ctx.out.write(
        table(
          ['STEP', 'NEEDS', 'TARGET', 'IF', 'RETRIES', 'TIMEOUT'],
          spec.steps.map((step) => [
            paint(c, 'bold', step.id) + (step.continueOnError ? paint(c, 'gray', ' (may fail)') : ''),
            step.needs.length ? step.needs.join(', ') : '-',
            truncate(targetSummary(step), width),
            step.if ? truncate(step.if, 40) : '-',
            retriesText(step),
            step.timeoutMs ? formatDuration(step.timeoutMs) : '-',
          ]),
          c,
        ),
      );
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

// ── workflows runs ──────────────────────────────────────────────────────────────────────────────

const runsSpec: CommandSpec = {
  name: 'workflows runs',
  summary: 'List workflow runs, newest first, for all workflows or one.',
  positionals: [{ name: 'workflow', required: false, description: 'only runs of this workflow (name or id)' }],
  options: {
    limit: { type: 'string', short: 'n', value: '<n>', description: 'show at most n runs (default 20)' },
    status: { type: 'string', value: '<status>', description: `only runs with this status (${RUN_STATUSES.join(', ')})` },
    json: JSON_OPTION,
  },
  examples: ['loops workflows runs', 'loops workflows runs nightly --limit 5', 'loops workflows runs --status failed --json'],
};

/** A run's wall time: recorded once it ended, growing while it runs. */
function runDuration(run: WorkflowRunView, now: number): number | null {
  if (run.durationMs !== null) return run.durationMs;
  return run.status === 'running' ? Math.max(0, now - Date.parse(run.startedAt)) : null;
}

const runs: CliCommand = {
  spec: runsSpec,
  async run({ values, positionals }, ctx) {
    const limit = intOption(runsSpec, 'limit', values.limit, 20);
    const status = values.status as string | undefined;
    if (status !== undefined && !RUN_STATUSES.includes(status)) {
      throw new UsageError(`loops workflows runs: unknown status ${JSON.stringify(status)}`, { hint: `use one of ${RUN_STATUSES.join(', ')}` });
    }
    const reader = await openReader(ctx.dataDir);
    try {
      const workflow = positionals[0] ? findWorkflow(reader.db, positionals[0], { includeArchived: true }) : undefined;
      const list = listWorkflowRuns(reader.db, { limit, ...(workflow ? { workflowId: workflow.id } : {}), ...(status ? { status } : {}) });
      if (ctx.json) {
        printJson(ctx, list);
        return EXIT.ok;
      }
      if (list.length === 0) {
        ctx.err.write(
          workflow
            ? status
              ? `No runs of ${workflow.name} with status ${status}.\n`
              : `No runs of ${workflow.name} yet (loops workflows run ${workflow.name} runs it).\n`
            : status
              ? `No workflow runs with status ${status}.\n`
              : 'No workflow runs yet.\n',
        );
        return EXIT.ok;
      }
      ctx.out.write(
        table(
          ['RUN', 'WORKFLOW', 'STATUS', 'TRIGGER', 'STARTED', 'DURATION', 'ERROR'],
          list.map((r) => [
            r.id,
            `${r.workflowName}@${r.version}`,
            paint(ctx.color, statusColor(r.status), r.status),
            r.trigger,
            when(r.startedAt, ctx),
            durationText(runDuration(r, ctx.now)),
            r.error ? truncate(r.error, 60) : '',
          ]),
          ctx.color,
        ),
      );
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

// ── workflows inspect ───────────────────────────────────────────────────────────────────────────

const inspectSpec: CommandSpec = {
  name: 'workflows inspect',
  summary: 'Show one workflow run: its status and every step with its attempts, exit code, outputs and error.',
  description: [
    'Steps are listed in spec order. A step that never started is "pending" while the run goes on',
    'and "skipped" once the run ended, with the reason (read from the log). --timeline draws the steps on a shared time axis and marks',
    'the critical path (the longest chain of dependencies).',
    'DURATION is how long the step\'s processes ran, its attempts summed; the timeline (and the live view of',
    '`workflows run`) spans each step from its first start to its end: the start of its process and any wait',
    'between retries included.',
    'Agent steps show the tokens (in/out) and cost their CLI reported, summed over their attempts, and the',
    'run the total; --json has each report (`agent` on every step and attempt) and the run\'s sums (`agent`).',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'workflow run id (or unique prefix)' }],
  options: {
    timeline: { type: 'boolean', short: 't', description: 'also draw a timeline of the steps' },
    json: JSON_OPTION,
  },
  examples: ['loops workflows inspect wfrun_01m8pavs3mv5h5nscgtr49', 'loops workflows inspect wfrun_01m8 --timeline', 'loops workflows inspect wfrun_01m8 --json'],
};

const ACTIVE = new Set(['starting', 'spawning', 'running']);

/** A step's wall time over its attempts, with the running attempt counted up to now. */
function stepDuration(step: WorkflowStepView, now: number): number | null {
  const current = step.attempts.at(-1);
  if (ACTIVE.has(step.status) && current && current.finishedAt === null) {
    return (step.durationMs ?? 0) + Math.max(0, now - Date.parse(current.startedAt));
  }
  return step.durationMs;
}

/** The statuses the timeline knows: a retry back-off is `waiting`, a step being started is `running`. */
function viewStatus(status: string): string {
  if (status === 'retrying') return 'waiting';
  if (status === 'starting' || status === 'spawning') return 'running';
  return status;
}

export function toViewSteps(steps: WorkflowStepView[]): ViewStep[] {
  return steps.map((s) => ({
    id: s.stepId,
    needs: s.needs,
    status: viewStatus(s.status),
    startedAt: s.startedAt === null ? null : Date.parse(s.startedAt),
    endedAt: s.finishedAt === null ? null : Date.parse(s.finishedAt),
    attempts: s.attempt,
    exitCode: s.exitCode,
    continueOnError: s.continueOnError,
  }));
}

function outputsText(outputs: Record<string, string>): string {
  return Object.entries(outputs)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function renderInspect(ctx: CliContext, run: WorkflowRunView, steps: WorkflowStepView[], timeline: boolean, reasons: Record<string, string>): void {
  const c = ctx.color;
  const agentTotals = runAgentTotals(steps);
  // A TOKENS/COST column when the run has agent steps.
  const agents = steps.some((s) => s.targetType === 'agent');
  const trigger =
    run.trigger === 'schedule' || run.loopId
      ? `${run.trigger}${run.loopId ? ` (loop ${run.loopId}${run.slot ? `, slot ${run.slot}` : ''})` : ''}`
      : run.trigger;
  const inputs = Object.entries(run.inputs);
  const lines = [
    `${paint(c, 'bold', run.id)}  ${run.workflowName}@${run.version}  ${paint(c, statusColor(run.status), run.status)}`,
    `workflow    ${run.workflowName} (${run.workflowId}), version ${run.version}`,
    `trigger     ${trigger}${run.attempt > 1 ? `, attempt ${run.attempt}` : ''}`,
    `started     ${when(run.startedAt, ctx)}${ctx.out.isTTY ? ` (${run.startedAt})` : ''}`,
    ...(run.finishedAt ? [`finished    ${when(run.finishedAt, ctx)}`] : []),
    `duration    ${durationText(runDuration(run, ctx.now))}${run.status === 'running' ? ' so far' : ''}`,
    ...(inputs.length ? [`inputs      ${inputs.map(([k, v]) => `${k}=${quote(v)}`).join(' ')}`] : []),
    ...(agentTotals ? [`agents      ${agentTotalsText(agentTotals)}`] : []),
    ...(run.error ? [`error       ${paint(c, 'red', run.error)}`] : []),
    ...(run.archivedAt ? [`events      archived on ${run.archivedAt} with the steps' output tails (loops prune --archive): loops replay ${run.id} --archive`] : []),
  ];
  ctx.out.write(lines.join('\n') + '\n\n');
  const wide = !ctx.out.isTTY;
  ctx.out.write(
    table(
      ['STEP', 'STATUS', 'ATTEMPTS', 'EXIT', 'DURATION', ...(agents ? ['TOKENS/COST'] : []), 'OUTPUTS', 'ERROR'],
      steps.map((s) => {
        const ran = s.attempt > 0;
        const ended = ran && !ACTIVE.has(s.status);
        return [
          paint(c, 'bold', s.stepId),
          paint(c, statusColor(s.status), s.status),
          ran ? (s.maxAttempts > 1 ? `${s.attempt}/${s.maxAttempts}` : String(s.attempt)) : '-',
          ended ? (s.exitCode !== null ? String(s.exitCode) : (s.signal ?? '-')) : '-',
          durationText(stepDuration(s, ctx.now)),
          // Over every attempt of the step: a retried agent step cost each time.
          ...(agents ? [agentUsage(stepAgentTotals(s))] : []),
          truncate(outputsText(s.outputs), wide ? 200 : 40) || '-',
          s.status === 'skipped' && reasons[s.stepId] ? truncate(reasons[s.stepId]!, wide ? 200 : 60) : ended && s.error ? truncate(s.error, wide ? 200 : 60) : '',
        ];
      }),
      c,
    ),
  );
  if (timeline) {
    const columns = (ctx.out as { columns?: number }).columns;
    const width = typeof columns === 'number' && columns > 0 ? columns : 100;
    const drawn = renderTimeline(toViewSteps(steps), { width, now: ctx.now, color: c });
    if (drawn.length) ctx.out.write('\n' + drawn.join('\n') + '\n');
  }
}

const inspect: CliCommand = {
  spec: inspectSpec,
  async run({ values, positionals }, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const { workflowRunDetail, inspection } = await import('../../runtime/workflows/inspect.js');
      const detail = workflowRunDetail(reader.db, positionals[0]!);
      const { run, steps, reasons } = detail;
      if (ctx.json) {
        printJson(ctx, inspection(detail));
        return EXIT.ok;
      }
      renderInspect(ctx, run, steps, values.timeline === true, reasons);
      // Where each step attempt started and with which environment (names only), as step.spawned recorded.
      const spawned = stepSpawnLines(steps, detail.spawns, ctx.color);
      if (spawned.length) ctx.out.write('\n' + spawned.join('\n') + '\n');
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

// ── workflows validate ──────────────────────────────────────────────────────────────────────────

/** `--name <name>` of validate, create and convert: the predecessor's flag. */
export const NAME_OPTION = {
  type: 'string',
  value: '<name>',
  description: "the workflow's name, instead of the file's name: (which may then be absent)",
} as const;

/** The value of `--name`, checked like a name in a file; undefined when not given. */
export function nameOverride(command: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const name = String(value);
  if (!NAME_RE.test(name)) throw new UsageError(`loops ${command}: --name ${JSON.stringify(name)} is not a valid workflow name`, { hint: NAME_HINT });
  return name;
}

const validateSpec: CommandSpec = {
  name: 'workflows validate',
  summary: 'Check a workflow spec file (YAML or JSON) without storing it; print every problem.',
  description: [
    'Reads the file like `loops workflows create` would: YAML (anchors and merge keys allowed) or',
    'JSON by extension, the native format or the predecessor\'s. Every problem is printed on stderr',
    'as file:line:col: message, with a hint when there is one. Exit code 0 when the spec is valid,',
    '2 when it is not. --preflight also checks that the steps can start here: every executable is',
    'found on PATH, every working directory exists, every agent CLI is installed (exit 1 if not).',
  ].join('\n'),
  positionals: [{ name: 'file', required: true, description: 'the spec file (.yaml, .yml or .json)' }],
  options: {
    name: NAME_OPTION,
    preflight: { type: 'boolean', description: 'also check executables, directories and agent CLIs on this machine' },
    json: JSON_OPTION,
  },
  examples: ['loops workflows validate nightly.yaml', 'loops workflows validate nightly.yaml --json', 'loops workflows validate repo-morning.json --name morning'],
};

interface Problem {
  message: string;
  hint?: string;
}

const validate: CliCommand = {
  spec: validateSpec,
  async run({ positionals, values }, ctx) {
    const file = positionals[0]!;
    const name = nameOverride('workflows validate', values.name);
    const { loadWorkflowFile } = await import('../../runtime/workflows/files.js');
    let loaded;
    try {
      loaded = loadWorkflowFile(file, { name });
    } catch (error) {
      const problems = error instanceof ValidationError ? (error.details?.problems as Problem[] | undefined) : undefined;
      if (!problems || problems.length === 0) throw error;
      if (ctx.json) {
        printJson(ctx, { ok: false, file, problems });
        return EXIT.usage;
      }
      for (const problem of problems) {
        ctx.err.write(`${paintErr(ctx, 'red', problem.message)}\n${problem.hint ? `  hint: ${problem.hint}\n` : ''}`);
      }
      ctx.err.write(`loops: ${file}: ${problems.length} problem${problems.length === 1 ? '' : 's'}; the workflow is not valid\n`);
      return EXIT.usage;
    }
    const steps = loaded.spec.steps.length;
    const preflight = values.preflight === true ? (await import('../../runtime/workflows/preflight.js')).preflightWorkflow(loaded.spec, file) : null;
    if (preflight && preflight.length) {
      if (ctx.json) {
        printJson(ctx, { ok: false, file, name: loaded.spec.name, preflight });
        return EXIT.error;
      }
      for (const p of preflight) ctx.err.write(`${paintErr(ctx, 'red', `${file}: step "${p.step}": ${p.field}: ${p.message}`)}\n`);
      ctx.err.write(`loops: ${file}: the spec is valid, but ${preflight.length} step${preflight.length === 1 ? '' : 's'} cannot start on this machine\n`);
      return EXIT.error;
    }
    if (ctx.json) {
      printJson(ctx, {
        ok: true,
        ...(preflight ? { preflight: [] } : {}),
        file,
        name: loaded.spec.name,
        steps,
        format: loaded.format,
        warnings: loaded.warnings,
        sha256: loaded.sha256,
        spec: loaded.spec,
      });
      return EXIT.ok;
    }
    ctx.out.write(`ok: ${loaded.spec.name}, ${steps} step${steps === 1 ? '' : 's'} (${loaded.format} format)${preflight ? '; every step can start here' : ''}\n`);
    for (const warning of loaded.warnings) ctx.err.write(`${paintErr(ctx, 'yellow', 'warning:')} ${warning}\n`);
    return EXIT.ok;
  },
};

/** Colour for stderr follows stderr's own terminal, not stdout's. */
function paintErr(ctx: CliContext, color: 'red' | 'yellow', text: string): string {
  const enabled =
    !ctx.json &&
    (process.env.NO_COLOR === undefined || process.env.NO_COLOR === '') &&
    ((process.env.FORCE_COLOR !== undefined && process.env.FORCE_COLOR !== '0') || (ctx.err.isTTY === true && process.env.TERM !== 'dumb'));
  return paint(enabled, color, text);
}

// ── schema workflow ─────────────────────────────────────────────────────────────────────────────

const schemaSpec: CommandSpec = {
  name: 'schema workflow',
  summary: 'Print the JSON Schema of workflow spec files (for editors: $schema, yaml-language-server).',
  positionals: [],
  options: { json: { type: 'boolean', description: 'accepted for symmetry: the output is JSON either way' } },
  examples: ['loops schema workflow > workflow.schema.json', '# then, first line of a spec file:  # yaml-language-server: $schema=./workflow.schema.json'],
};

const schema: CliCommand = {
  spec: schemaSpec,
  async run(_parsed, ctx) {
    const { workflowJsonSchema } = await import('../../workflow/spec.js');
    ctx.out.write(JSON.stringify(workflowJsonSchema(), null, 2) + '\n');
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = {
  'workflows list': list,
  'workflows show': show,
  'workflows runs': runs,
  'workflows inspect': inspect,
  'workflows validate': validate,
  'schema workflow': schema,
};
