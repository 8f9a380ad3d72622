#!/usr/bin/env node
/**
 * Writes test/fixtures/predecessor/surface.json: the user-facing surface of the predecessor,
 * @hasna/loops 0.3.1, read from its source in the tarball (never from memory) — every command of
 * its two binaries (`loops`, `loops-daemon`) with its aliases, arguments and flags, its global
 * flags, its SDK's exports and methods, the fields of its workflow files, and the environment
 * variables it reads or sets for children. test/unit/predecessor-parity.unit.test.ts checks each
 * of them against loops (its CLI's command specs, its SDK, docs/migrating.md).
 *
 * Usage: node scripts/predecessor-surface.mjs [tarball] [--check]
 *   tarball  default ../shared/anchors/hasna-loops-0.3.1.tar.gz (or $PREDECESSOR_TARBALL)
 *   --check  do not write: exit 1 when the checked-in fixture differs from what the tarball gives
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const check = args.includes('--check');
const tarball = resolve(
  args.find((a) => !a.startsWith('--')) ?? process.env.PREDECESSOR_TARBALL ?? join(root, '..', 'shared', 'anchors', 'hasna-loops-0.3.1.tar.gz'),
);
const out = join(root, 'test', 'fixtures', 'predecessor', 'surface.json');

if (!existsSync(tarball)) {
  process.stderr.write(`predecessor-surface: ${tarball} not found; pass the tarball's path (hasna-loops-0.3.1.tar.gz)\n`);
  process.exit(2);
}

/** One file of the tarball, as text (`tar -xzOf`). */
function source(path) {
  return execFileSync('tar', ['-xzOf', tarball, `loops/${path}`], { encoding: 'utf8', maxBuffer: 16 << 20 });
}

/** `-d, --description <text>` → { long, short, value, negated } */
function flag(flags, extra = {}) {
  const parts = flags.split(/[ ,|]+/).filter(Boolean);
  const long = parts.find((p) => p.startsWith('--'));
  const short = parts.find((p) => /^-[^-]$/.test(p)) ?? null;
  const value = parts.find((p) => /^[<[]/.test(p)) ?? null;
  return { flags, long, short, value, ...(long?.startsWith('--no-') ? { negated: true } : {}), ...extra };
}

/**
 * The commander program of one binary, read in source order: `.command()` starts a command (its
 * parent is the receiver: `program`, or a variable holding a group such as `create`),
 * `.alias()`/`.option()`/`.requiredOption()` belong to the latest command, options inside an
 * `addXOptions` helper belong to that helper and join every command whose chain it wraps.
 */
function commanderSurface(text, bin) {
  const groups = new Map([['program', '']]);
  for (const m of text.matchAll(/const (\w+) = (\w+)\.command\("([^"]+)"\)/g)) {
    groups.set(m[1], `${groups.get(m[2]) ?? ''} ${m[3].split(' ')[0]}`.trim());
  }
  const helpers = new Map();
  const globals = [];
  const commands = [];
  const token =
    /function (add\w+Options)\(|(add\w+Options)\(|(\w+)\s*\.command\("([^"]+)"\)|\.alias\("([^"]+)"\)|(\w+)?\.(option|requiredOption)\("([^"]+)"|\.version\("([^"]+)"\)|\.action\(|\n\}\n/g;
  let inHelper = null;
  let current = null;
  let pending = [];
  for (const m of text.matchAll(token)) {
    if (m[1]) {
      inHelper = m[1];
      helpers.set(inHelper, []);
    } else if (m[0] === '\n}\n') {
      inHelper = null;
    } else if (m[2]) {
      pending.push(m[2]);
    } else if (m[4]) {
      const [word, ...rest] = m[4].split(' ');
      current = {
        bin,
        name: `${groups.get(m[3]) ?? ''} ${word}`.trim(),
        arguments: rest,
        aliases: [],
        options: [],
        group: false,
      };
      commands.push(current);
    } else if (m[5] !== undefined) {
      current?.aliases.push(m[5]);
    } else if (m[8] !== undefined) {
      const option = flag(m[8], m[7] === 'requiredOption' ? { required: true } : {});
      if (inHelper) helpers.get(inHelper).push(option);
      else if (m[6] === 'program') globals.push(option);
      else current?.options.push(option);
    } else if (m[9] !== undefined) {
      globals.push(flag('-V, --version', { version: m[9] }));
    } else if (m[0] === '.action(' && current) {
      for (const h of pending) current.options.push(...(helpers.get(h) ?? []).map((o) => ({ ...o, from: h })));
      pending = [];
      current.action = true;
    }
  }
  for (const c of commands) {
    c.group = !c.action;
    delete c.action;
  }
  globals.push(flag('-h, --help', { implicit: 'commander' }));
  return { globals, commands };
}

/** Method names of `export class X { … }` (public, not the constructor) and exported functions. */
function sdkSurface(text) {
  const exports = [...text.matchAll(/^export (?:class|function|const) (\w+)/gm)].map((m) => m[1]);
  const types = [...text.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]);
  const cls = /export class LoopsClient \{([\s\S]*?)\n\}/.exec(text)?.[1] ?? '';
  const methods = [...cls.matchAll(/^ {2}(?:async )?(\w+)\(([^)]*)\)(?::\s*([^{]+))?\{/gm)]
    .filter((m) => m[1] !== 'constructor')
    .map((m) => ({ name: m[1], params: m[2].trim(), returns: m[3]?.trim() ?? null }));
  const properties = [...cls.matchAll(/^ {2}readonly (\w+)/gm)].map((m) => m[1]);
  const options = [.../export interface LoopsClientOptions \{([\s\S]*?)\}/.exec(text)[1].matchAll(/(\w+)\?:/g)].map((m) => m[1]);
  return { entry: './sdk', exports, types, options, properties, methods };
}

/** Field names of `export interface Name { … }` in types.ts, with whether they are optional. */
function fields(types, name) {
  const body = new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`).exec(types)?.[1];
  if (!body) throw new Error(`interface ${name} not found in types.ts`);
  return [...body.matchAll(/^ {2}(\w+)(\??):/gm)].map((m) => ({ name: m[1], optional: m[2] === '?' }));
}

const cli = source('src/cli/index.ts');
const daemonCli = source('src/daemon/index.ts');
const sdk = source('src/sdk/index.ts');
const types = source('src/types.ts');
const pkg = JSON.parse(source('package.json'));
const allSource = ['src/cli/index.ts', 'src/daemon/index.ts', 'src/daemon/daemon.ts', 'src/daemon/install.ts', 'src/daemon/control.ts', 'src/lib/executor.ts', 'src/lib/accounts.ts', 'src/lib/env.ts', 'src/lib/paths.ts', 'src/lib/doctor.ts']
  .map(source)
  .join('\n');
const paths = source('src/lib/paths.ts');

const loopsCli = commanderSurface(cli, 'loops');
const daemonBin = commanderSurface(daemonCli, 'loops-daemon');

const surface = {
  $comment: 'Generated by scripts/predecessor-surface.mjs from the @hasna/loops 0.3.1 tarball; do not edit by hand.',
  package: { name: pkg.name, version: pkg.version, bin: pkg.bin, exports: Object.keys(pkg.exports ?? {}) },
  tarballSha256: createHash('sha256').update(readFileSync(tarball)).digest('hex'),
  globals: loopsCli.globals,
  commands: [...loopsCli.commands, ...daemonBin.commands],
  sdk: sdkSurface(sdk),
  workflowFile: {
    workflow: ['name', 'description', 'version', 'steps'],
    step: fields(types, 'WorkflowStep'),
    commandTarget: fields(types, 'CommandTarget'),
    agentTarget: fields(types, 'AgentTarget'),
    account: fields(types, 'AccountRef'),
  },
  loopTargets: { workflowTarget: fields(types, 'WorkflowTarget') },
  /** The SDK's types (its inputs and results), by interface. */
  shapes: Object.fromEntries(
    ['CreateLoopInput', 'Loop', 'LoopRun', 'CommandTarget', 'AgentTarget', 'WorkflowTarget', 'AccountRef', 'OnceSchedule', 'IntervalSchedule', 'CronSchedule', 'DynamicSchedule'].map((name) => [name, fields(types, name)]),
  ),
  environment: {
    read: [...new Set([...allSource.matchAll(/process\.env\.([A-Z_][A-Z0-9_]*)\b(?!\s*=[^=])|\benv\.([A-Z_][A-Z0-9_]*)\b(?!\s*=[^=])/g)].map((m) => m[1] ?? m[2]))].sort(),
    setForChildren: [...new Set([...allSource.matchAll(/\b(LOOPS_[A-Z_]+)\b\s*[:=]/g)].map((m) => m[1]))].sort(),
  },
  files: [...paths.matchAll(/export function (\w+)\(\): string \{\s*return ([^;]+);/g)].map((m) => ({ fn: m[1], path: m[2] })),
};

const text = `${JSON.stringify(surface, null, 2)}\n`;
if (check) {
  const same = existsSync(out) && readFileSync(out, 'utf8') === text;
  process.stdout.write(same ? 'surface.json is up to date\n' : 'surface.json differs from the tarball: run node scripts/predecessor-surface.mjs\n');
  process.exit(same ? 0 : 1);
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, text);
process.stdout.write(
  `wrote ${out}: ${surface.commands.length} commands, ${surface.commands.reduce((n, c) => n + c.options.length, 0)} flags, ${surface.sdk.methods.length} SDK methods\n`,
);
