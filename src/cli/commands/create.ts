import { formatDuration } from '../../events/durations.js';
import { UsageError } from '../../events/errors.js';
import { describeSchedule } from '../../scheduling/describe.js';
import { CATCH_UP, OVERLAP, RETRY, type PolicyFamily } from '../../scheduling/policies.js';
import { providerList } from '../../runtime/agents/index.js';
import { secretFileWarnings } from '../../runtime/execution/secret-refs.js';
import { createAgentLoop, createCommandLoop, createWorkflowLoop } from '../../runtime/loops/commands.js';
import type { LoopView } from '../../runtime/queries/loops.js';
import { openRuntime, type Runtime } from '../../runtime/runtime.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, relativeTime } from '../render.js';

/** `skip (default), buffer-one, buffer-all, cancel-other or allow`: a family's names, for a flag's one-line help. */
function choices(family: PolicyFamily<string, object>): string {
  const names = Object.keys(family.policies).map((name) => (name === family.default ? `${name} (default)` : name));
  return names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names.join('');
}

/** Help lines listing a family's policies with their descriptions (from the policy table). */
function policyHelp(title: string, family: PolicyFamily<string, object>): string[] {
  const width = Math.max(...Object.keys(family.policies).map((name) => name.length)) + 2;
  return [
    `${title} (${family.flag}) — ${family.about}:`,
    ...Object.entries<{ description: string }>(family.policies).map(
      ([name, policy]) => `  ${name.padEnd(width)}${name === family.default ? '(default) ' : ''}${policy.description}`,
    ),
  ];
}

/** The policy section of every `create` command's help. */
const POLICY_HELP = ['', ...policyHelp('Overlap', OVERLAP), ...policyHelp('Catch-up', CATCH_UP)];

const spec: CommandSpec = {
  name: 'create command',
  summary: 'Create a loop that runs a command on a schedule.',
  description: [
    '--cmd is run by /bin/sh by default, so pipes and && work. With --no-shell, --cmd is the',
    'executable and each --arg one argument, passed verbatim with no shell involved.',
    'Give exactly one schedule: --every, --cron, --at, --manual or --dynamic. Times without an offset',
    'are read in --tz. loops next <name> previews the fire times. A duration without a unit is',
    'milliseconds (--every 5000 = 5s). Without --cwd, runs run in the directory create is run in.',
    'Preflight: the executable (for shell text, its first word when it is known without running it,',
    'e.g. restic in "restic backup ~/src") must be found on the effective PATH of runs, else nothing',
    'is created; --no-preflight creates the loop anyway.',
    '--account <profile> --account-tool <tool> runs it under a credentials profile (as agents do):',
    "the profile's variables and LOOPS_ACCOUNT_PROFILE/TOOL are set, and inherited credentials",
    '(API keys, GITHUB_TOKEN, GH_TOKEN, XDG_* directories) are not passed on.',
    ...POLICY_HELP,
  ].join('\n'),
  positionals: [{ name: 'name', required: true, description: 'unique name (letters, digits, . _ -)' }],
  options: {
    cmd: { type: 'string', value: '<command>', description: 'the command to run (required)' },
    'no-shell': { type: 'boolean', description: 'run --cmd as an executable with --arg arguments, no shell' },
    arg: { type: 'string', multiple: true, value: '<arg>', description: 'an argument for --no-shell' },
    cwd: { type: 'string', value: '<dir>', description: 'working directory (must exist; default: the directory create is run in, recorded as an absolute path)' },
    account: { type: 'string', value: '<profile>', description: 'run under a credentials profile (loops accounts add, or an external accounts command); needs --account-tool' },
    'account-tool': { type: 'string', value: '<tool>', description: 'the tool the profile is resolved for (e.g. claude, codex, gh)' },
    'no-preflight': {
      type: 'boolean',
      description: 'create the loop even if the command is not found now (e.g. it is installed before the first run, or only the daemon has it)',
    },
    env: { type: 'string', multiple: true, value: '<KEY=VALUE>', description: 'an environment variable for the run (stored with the loop)' },
    'secret-env': {
      type: 'string',
      multiple: true,
      value: '<NAME>',
      description: "a variable passed from the runner's environment as a secret: never stored, masked as *** in output",
    },
    'secret-file': {
      type: 'string',
      multiple: true,
      value: '<NAME=PATH>',
      description: 'a secret read from a file (outside the data directory) when each run starts, one trailing newline dropped: only the path is stored; masked as *** in output',
    },
    'secret-cmd': {
      type: 'string',
      multiple: true,
      value: '<NAME=COMMAND>',
      description: "a secret printed by a command (/bin/sh, 30 s at most) when each run starts, e.g. NAME='pass show x': the command is stored as written, never its output; masked as *** in output",
    },
    'not-secret': {
      type: 'string',
      multiple: true,
      value: '<NAME>',
      description: '--env NAME=… is not a secret although its name says so (such --env values are refused otherwise: they are stored in clear)',
    },
    timeout: { type: 'string', value: '<duration>', description: 'kill the run after this long, e.g. 30s, 10m, 1h30m' },
    'kill-grace': { type: 'string', value: '<duration>', description: 'time between SIGTERM and SIGKILL on timeout or cancel (default 5s)' },
    description: { type: 'string', short: 'd', value: '<text>', description: 'a description' },
    every: { type: 'string', value: '<duration>', description: 'run every interval, e.g. 15m, 1h, 2d' },
    cron: { type: 'string', value: '<expr>', description: "run on a cron schedule, e.g. '0 3 * * *'" },
    at: { type: 'string', value: '<time>', description: 'run once at an ISO-8601 time, e.g. 2026-12-01T09:00' },
    manual: { type: 'boolean', description: 'never run by itself; only with loops run-now' },
    dynamic: { type: 'boolean', description: 'run one minute after the previous run finished, the first one minute from now (= --every 1m --anchor fixed-delay)' },
    tz: { type: 'string', value: '<zone>', description: 'IANA time zone for --cron and local times (default: the system zone)' },
    anchor: { type: 'string', value: '<mode>', description: 'with --every: fixed-rate (default) or fixed-delay (measured from the previous finish)' },
    jitter: { type: 'string', value: '<duration>', description: 'spread each fire time by a deterministic offset in [0, duration)' },
    'starts-at': { type: 'string', value: '<time>', description: 'no run before this time (--every counts from it)' },
    'expires-at': { type: 'string', value: '<time>', description: 'no run after this time; the loop then ends' },
    'max-runs': { type: 'string', value: '<n>', description: 'the loop ends after n scheduled runs' },
    overlap: { type: 'string', value: '<policy>', description: `${OVERLAP.about}: ${choices(OVERLAP)}` },
    'catch-up': { type: 'string', value: '<policy>', description: `${CATCH_UP.about}: ${choices(CATCH_UP)}` },
    'catch-up-window': { type: 'string', value: '<duration>', description: 'do not catch up slots older than this' },
    'catch-up-limit': { type: 'string', value: '<n>', description: 'with --catch-up all: run at most the n most recent missed slots' },
    attempts: { type: 'string', value: '<n>', description: `${RETRY.attempts.description} (default ${RETRY.attempts.default})` },
    'retry-delay': { type: 'string', value: '<duration>', description: `${RETRY.retryDelay.description} (default ${formatDuration(RETRY.retryDelay.defaultMs)})` },
    backoff: { type: 'string', value: '<factor>', description: `each later retry waits this many times longer (default ${RETRY.backoff.default}; 1 = constant)` },
    'max-retry-delay': { type: 'string', value: '<duration>', description: RETRY.maxRetryDelay.description },
    lease: { type: 'string', value: '<duration>', description: 'run lease, renewed while it runs; recovered when a runner stops renewing it (default 30s)' },
    'on-failure': {
      type: 'string',
      value: '<command>',
      description: "run this /bin/sh command when a run fails or times out (after its last attempt), with the run's LOOPS_* variables; recorded as a run of its own",
    },
    'notify-url': { type: 'string', value: '<url>', description: 'POST a JSON summary of each failed run to this http(s) URL (retried, with an Idempotency-Key header)' },
    'notify-on': { type: 'string', value: '<outcomes>', description: 'with --notify-url: failure (default), success, or failure,success' },
    'runs-on': {
      type: 'string',
      multiple: true,
      value: '<labels>',
      description: "only runners with all these labels run it (comma-separated; a daemon's --labels, and its host id): e.g. --runs-on gpu",
    },
    json: JSON_OPTION,
  },
  examples: [
    "loops create command backup --cmd 'restic backup ~/src' --cron '0 3 * * *' --tz Europe/Berlin",
    "loops create command poll --cmd ./poll.sh --every 5m --jitter 30s --expires-at 2026-12-24T00:00",
    "loops create command tests --cmd 'make test && ./deploy' --every 1h --cwd ~/app --timeout 20m",
    'loops create command ping --no-shell --cmd curl --arg -fsS --arg https://example.com --every 5m',
    "loops create command sync --cmd ./sync.sh --every 1h --secret-file API_TOKEN=$HOME/.config/loops/api-token --secret-cmd DB_PASSWORD='pass show db'",
    "loops create command train --cmd ./train.sh --cron '0 1 * * *' --runs-on gpu   # on a fleet: only a daemon started with --labels gpu runs it",
  ],
};

function parseEnv(values: string[] | undefined): Record<string, string> {
  // A Map, then own properties: a variable named __proto__ (or constructor) is a variable like any other.
  const env = new Map<string, string>();
  for (const item of values ?? []) {
    const eq = item.indexOf('=');
    if (eq <= 0) {
      throw new UsageError(`loops create command: --env ${JSON.stringify(item)} is not KEY=VALUE`, { hint: 'e.g. --env NODE_ENV=production' });
    }
    env.set(item.slice(0, eq), item.slice(eq + 1));
  }
  return Object.fromEntries(env);
}

/** `--secret-file NAME=PATH` / `--secret-cmd NAME=COMMAND` values, split at the first `=`. */
function parseSecretRefs(values: Record<string, unknown>) {
  const split = (flag: string, what: string) =>
    ((values[flag] as string[] | undefined) ?? []).map((item) => {
      const eq = item.indexOf('=');
      if (eq <= 0) {
        throw new UsageError(`--${flag} ${JSON.stringify(item)} is not NAME=${what}`, {
          hint: flag === 'secret-file' ? 'e.g. --secret-file API_TOKEN=$HOME/.config/loops/api-token' : "e.g. --secret-cmd API_TOKEN='pass show api/token'",
        });
      }
      return [item.slice(0, eq), item.slice(eq + 1)] as const;
    });
  return {
    secretFiles: split('secret-file', 'PATH').map(([name, path]) => ({ name, path })),
    secretCmds: split('secret-cmd', 'COMMAND').map(([name, command]) => ({ name, command })),
  };
}

const createCommand: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const cmd = values.cmd as string | undefined;
    if (cmd === undefined) {
      throw new UsageError('loops create command: --cmd is required', { hint: "e.g. --cmd 'echo hello'" });
    }
    const env = parseEnv(values.env as string[] | undefined);
    return createAndPrint(ctx, (runtime) =>
      createCommandLoop(runtime, {
        name: positionals[0]!,
        command: cmd,
        args: (values.arg as string[] | undefined) ?? [],
        shell: values['no-shell'] !== true,
        cwd: (values.cwd as string | undefined) ?? runDirectory(),
        env,
        secretEnv: (values['secret-env'] as string[] | undefined) ?? [],
        ...parseSecretRefs(values),
        notSecret: (values['not-secret'] as string[] | undefined) ?? [],
        timeout: (values.timeout as string | undefined) ?? null,
        killGrace: (values['kill-grace'] as string | undefined) ?? null,
        account: (values.account as string | undefined) ?? null,
        accountTool: (values['account-tool'] as string | undefined) ?? null,
        preflight: values['no-preflight'] !== true,
        ...loopOptions(values),
      }),
    );
  },
};

/**
 * Where a command or agent loop created without --cwd runs: the absolute directory `create` was
 * run in, recorded with the loop (a relative command that passes the check here then finds its
 * files under the daemon too). Loops stored before keep their recorded null (the runner's directory).
 */
function runDirectory(): string {
  try {
    return process.cwd();
  } catch {
    throw new UsageError('loops create: the current directory no longer exists', { hint: 'cd to a directory that exists, or give --cwd <dir>' });
  }
}

/** The schedule and policy flags every kind of loop takes. */
function loopOptions(values: Record<string, unknown>) {
  return {
    description: (values.description as string | undefined) ?? null,
    schedule: {
      every: values.every as string | undefined,
      cron: values.cron as string | undefined,
      at: values.at as string | undefined,
      manual: values.manual === true,
      dynamic: values.dynamic === true,
      tz: values.tz as string | undefined,
      anchor: values.anchor as string | undefined,
      jitter: values.jitter as string | undefined,
      startsAt: values['starts-at'] as string | undefined,
      expiresAt: values['expires-at'] as string | undefined,
      maxRuns: values['max-runs'] as string | undefined,
    },
    overlap: (values.overlap as string | undefined) ?? null,
    catchUp: (values['catch-up'] as string | undefined) ?? null,
    catchUpWindow: (values['catch-up-window'] as string | undefined) ?? null,
    catchUpLimit: (values['catch-up-limit'] as string | undefined) ?? null,
    attempts: (values.attempts as string | undefined) ?? null,
    retryDelay: (values['retry-delay'] as string | undefined) ?? null,
    backoff: (values.backoff as string | undefined) ?? null,
    maxRetryDelay: (values['max-retry-delay'] as string | undefined) ?? null,
    lease: (values.lease as string | undefined) ?? null,
    onFailure: (values['on-failure'] as string | undefined) ?? null,
    notifyUrl: (values['notify-url'] as string | undefined) ?? null,
    notifyOn: (values['notify-on'] as string | undefined) ?? null,
    runsOn: (values['runs-on'] as string[] | undefined) ?? null,
  };
}

/** Opens the runtime, creates the loop, prints it (or its JSON). */
async function createAndPrint(ctx: CliContext, create: (runtime: Runtime) => Promise<LoopView>): Promise<number> {
  const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
  try {
    const loop = await create(runtime);
    if (loop.target.kind !== 'workflow') for (const w of secretFileWarnings(loop.target.secretRefs)) ctx.err.write(`warning: ${w}\n`);
    printCreated(ctx, loop, runtime.clock.now());
    return EXIT.ok;
  } finally {
    runtime.close();
  }
}

function printCreated(ctx: CliContext, loop: LoopView, nowMs: number): void {
  if (ctx.json) printJson(ctx, loop);
  else {
    const next = loop.nextRunAt ? `, next run ${relativeTime(loop.nextRunAt, nowMs)} (${loop.nextRunAt})` : '';
    const what =
      loop.target.kind === 'workflow' ? ` runs workflow ${loop.target.workflowName}` : loop.target.kind === 'agent' ? ` runs ${loop.target.provider}` : '';
    const where = loop.runsOn ? `, on runners labelled ${loop.runsOn.join(',')}` : '';
    ctx.out.write(`Created loop ${paint(ctx.color, 'bold', loop.name)} (${loop.id})${what}: ${describeSchedule(loop.schedule)}${where}${next}\n`);
  }
}

const COMMAND_ONLY = new Set(['cmd', 'no-shell', 'arg', 'cwd', 'account', 'account-tool', 'no-preflight', 'env', 'secret-env', 'secret-file', 'secret-cmd', 'not-secret', 'timeout', 'kill-grace']);

const workflowSpec: CommandSpec = {
  name: 'create workflow',
  summary: 'Create a loop that runs a stored workflow on a schedule.',
  description: [
    'Each run of the loop is one run of the workflow (its latest version when the run starts):',
    'a slot + attempt maps to exactly one workflow run. The run ends as the workflow run ends, and',
    "the loop's retries, overlap and catch-up policies apply to it like to a command's runs. A",
    'cancelled workflow run is never retried. Store the workflow first: loops workflows create <file>.',
    ...POLICY_HELP,
  ].join('\n'),
  positionals: [{ name: 'name', required: true, description: 'unique loop name (letters, digits, . _ -)' }],
  options: {
    workflow: { type: 'string', value: '<workflow>', description: 'the workflow to run (name or id; required)' },
    ...Object.fromEntries(Object.entries(spec.options).filter(([k]) => !COMMAND_ONLY.has(k))),
  },
  examples: [
    'loops workflows create nightly.yaml',
    "loops create workflow nightly-run --workflow nightly --cron '0 2 * * *' --tz Europe/Berlin",
    'loops create workflow ci --workflow ci --every 30m --overlap buffer-one --attempts 2',
  ],
};

const createWorkflowCommand: CliCommand = {
  spec: workflowSpec,
  async run({ values, positionals }, ctx) {
    const workflow = values.workflow as string | undefined;
    if (workflow === undefined) {
      throw new UsageError('loops create workflow: --workflow is required', { hint: 'the name of a workflow stored with loops workflows create <file>' });
    }
    return createAndPrint(ctx, (runtime) =>
      createWorkflowLoop(runtime, { name: positionals[0]!, workflow, ...loopOptions(values) }),
    );
  },
};

const agentSpec: CommandSpec = {
  name: 'create agent',
  summary: 'Create a loop that runs an AI coding-agent CLI (claude, codex, cursor, …) on a schedule.',
  description: [
    `Providers: ${providerList({ binaries: true })}.`,
    'The exact command line each one gets is in docs/agents.md. The prompt reaches the CLI on stdin',
    '(closed after it) or from a file, never in argv where the CLI has another way. What the CLI',
    'reports (model, session, turns, tokens, cost, final message) is recorded with each run.',
    "--config-isolation login (default) keeps the user's login (the CLI's own configuration directory)",
    "and passes the CLI's own flags that shut out user and project settings (claude --setting-sources",
    'local --strict-mcp-config, codex --ignore-user-config --ignore-rules, opencode --pure; none where',
    "the CLI has no such flag); empty gives the CLI an empty configuration directory under the data",
    "directory (recorded as safe, which loops stored before login keep); none lets it use the user's",
    "settings. safe is accepted as the predecessor's name for login. The CLI must be installed (checked on the effective PATH)",
    'and --account must resolve; --no-preflight skips both checks (not the check of the arguments).',
    ...POLICY_HELP,
  ].join('\n'),
  positionals: [{ name: 'name', required: true, description: 'unique loop name (letters, digits, . _ -)' }],
  options: {
    provider: { type: 'string', value: '<provider>', description: `${providerList({ last: 'or' })} (required)` },
    prompt: { type: 'string', value: '<text>', description: 'the prompt' },
    'prompt-file': { type: 'string', value: '<path>', description: 'a file holding the prompt, read when each run starts' },
    model: { type: 'string', value: '<model>', description: 'the model to use' },
    agent: { type: 'string', value: '<agent>', description: 'a named agent / profile of the CLI' },
    'permission-mode': { type: 'string', value: '<mode>', description: "the CLI's permission / sandbox mode (see docs/agents.md)" },
    'extra-arg': { type: 'string', multiple: true, value: '<arg>', description: 'an extra argument for the CLI, passed verbatim' },
    'config-isolation': { type: 'string', value: '<mode>', description: "login (default), empty or none (safe: the predecessor's name for login)" },
    'max-turns': { type: 'string', value: '<n>', description: 'stop after n agent turns (a CLI flag, or enforced by loops where the CLI reports turns)' },
    'max-cost-usd': { type: 'string', value: '<usd>', description: 'a budget per run in USD (a CLI flag, or enforced by loops from the cost the CLI reports)' },
    'idle-timeout': { type: 'string', value: '<duration>', description: 'stop a run that prints nothing for this long' },
    account: { type: 'string', value: '<profile>', description: 'run under a credentials profile (loops accounts add); inherited credentials are dropped' },
    'account-tool': { type: 'string', value: '<tool>', description: "the tool the profile is resolved for (default: the provider)" },
    cwd: spec.options.cwd!,
    'no-preflight': {
      type: 'boolean',
      description: 'create the loop even if the CLI is not found or --account does not resolve now',
    },
    env: spec.options.env!,
    'secret-env': spec.options['secret-env']!,
    'secret-file': spec.options['secret-file']!,
    'secret-cmd': spec.options['secret-cmd']!,
    'not-secret': spec.options['not-secret']!,
    timeout: spec.options.timeout!,
    'kill-grace': spec.options['kill-grace']!,
    ...Object.fromEntries(Object.entries(spec.options).filter(([k]) => !COMMAND_ONLY.has(k))),
  },
  examples: [
    "loops create agent nightly-fix --provider codex --prompt-file ./prompts/fix.md --cwd ~/src/app --cron '0 2 * * *'",
    "loops create agent review --provider claude --prompt 'review the last commit' --model sonnet --every 1h --idle-timeout 10m",
  ],
};

const createAgentCommand: CliCommand = {
  spec: agentSpec,
  async run({ values, positionals }, ctx) {
    const provider = values.provider as string | undefined;
    if (provider === undefined) {
      throw new UsageError('loops create agent: --provider is required', { hint: `one of ${providerList()}` });
    }
    return createAndPrint(ctx, (runtime) =>
      createAgentLoop(runtime, {
        name: positionals[0]!,
        provider,
        prompt: (values.prompt as string | undefined) ?? null,
        promptFile: (values['prompt-file'] as string | undefined) ?? null,
        model: (values.model as string | undefined) ?? null,
        agent: (values.agent as string | undefined) ?? null,
        permissionMode: (values['permission-mode'] as string | undefined) ?? null,
        extraArgs: (values['extra-arg'] as string[] | undefined) ?? [],
        configIsolation: (values['config-isolation'] as string | undefined) ?? null,
        account: (values.account as string | undefined) ?? null,
        accountTool: (values['account-tool'] as string | undefined) ?? null,
        maxTurns: (values['max-turns'] as string | undefined) ?? null,
        maxCostUsd: (values['max-cost-usd'] as string | undefined) ?? null,
        idleTimeout: (values['idle-timeout'] as string | undefined) ?? null,
        cwd: (values.cwd as string | undefined) ?? runDirectory(),
        env: parseEnv(values.env as string[] | undefined),
        secretEnv: (values['secret-env'] as string[] | undefined) ?? [],
        ...parseSecretRefs(values),
        notSecret: (values['not-secret'] as string[] | undefined) ?? [],
        timeout: (values.timeout as string | undefined) ?? null,
        killGrace: (values['kill-grace'] as string | undefined) ?? null,
        preflight: values['no-preflight'] !== true,
        ...loopOptions(values),
      }),
    );
  },
};

export const commands: Record<string, CliCommand> = {
  'create command': createCommand,
  'create workflow': createWorkflowCommand,
  'create agent': createAgentCommand,
};
