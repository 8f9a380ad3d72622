import { addAccount, listAccounts, removeAccount } from '../../runtime/agents/accounts.js';
import { openRuntime } from '../../runtime/runtime.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { UsageError } from '../../events/errors.js';
import { printJson, table } from '../render.js';

const addSpec: CommandSpec = {
  name: 'accounts add',
  summary: "Register a credentials profile: a directory an agent CLI's configuration variable points at.",
  description: [
    'A run of an agent loop created with --account <name> gets the CLI\'s configuration variable',
    '(CLAUDE_CONFIG_DIR, CODEX_HOME, …) set to this directory, and none of the inherited',
    'credential variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, …). Log the CLI in once with that',
    'variable set to the directory. Names not registered here are resolved through an external',
    '`accounts env <name> --tool <tool>` command when one is installed.',
  ].join('\n'),
  positionals: [{ name: 'name', required: true, description: 'profile name' }],
  options: {
    tool: { type: 'string', value: '<provider>', description: 'claude, codex, cursor, opencode, gemini, codewith or aicopilot (required)' },
    dir: { type: 'string', value: '<path>', description: 'the profile directory (required; must exist)' },
    json: JSON_OPTION,
  },
  examples: ['loops accounts add work --tool claude --dir ~/.claude-work', 'loops create agent review --provider claude --account work --prompt … --every 1h'],
};

const listSpec: CommandSpec = { name: 'accounts list', summary: 'List the registered credentials profiles.', positionals: [], options: { json: JSON_OPTION } };

const removeSpec: CommandSpec = {
  name: 'accounts remove',
  summary: 'Remove a credentials profile (loops that use it fail their runs until it is added again).',
  positionals: [{ name: 'name', required: true, description: 'profile name' }],
  options: { reason: { type: 'string', value: '<text>', description: 'why; recorded' }, json: JSON_OPTION },
};

const add: CliCommand = {
  spec: addSpec,
  async run({ values, positionals }, ctx) {
    const tool = values.tool as string | undefined;
    const dir = values.dir as string | undefined;
    if (!tool || !dir) throw new UsageError('loops accounts add: --tool and --dir are required', { hint: 'e.g. loops accounts add work --tool claude --dir ~/.claude-work' });
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const account = await addAccount(runtime, { name: positionals[0]!, tool, dir });
      if (ctx.json) printJson(ctx, account);
      else ctx.out.write(`added account ${account.name} for ${account.tool}: ${account.dir}\n`);
      return EXIT.ok;
    } finally {
      runtime.close();
    }
  },
};

const list: CliCommand = {
  spec: listSpec,
  async run(_parsed, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const accounts = listAccounts(runtime.db);
      if (ctx.json) printJson(ctx, accounts);
      else if (accounts.length === 0) ctx.out.write('no accounts (loops accounts add <name> --tool <provider> --dir <path>)\n');
      else ctx.out.write(table(['NAME', 'TOOL', 'DIRECTORY'], accounts.map((a) => [a.name, a.tool, a.dir]), ctx.color));
      return EXIT.ok;
    } finally {
      runtime.close();
    }
  },
};

const remove: CliCommand = {
  spec: removeSpec,
  async run({ values, positionals }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const account = await removeAccount(runtime, positionals[0]!, (values.reason as string | undefined) ?? null);
      if (ctx.json) printJson(ctx, account);
      else ctx.out.write(`removed account ${account.name}\n`);
      return EXIT.ok;
    } finally {
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { 'accounts add': add, 'accounts list': list, 'accounts remove': remove };
