/**
 * `loops doctor`: is this machine ready to run what is scheduled? A list of checks — the data
 * directory, the database (opens, integrity, log format, projections), the daemon, every agent
 * provider's CLI, every registered account, and the preflight of every active loop — each `ok`,
 * `warn` or `fail`, with the loops that need it. Over 500 lines on purpose: one list of checks, each
 * short, sharing the run environments (this shell's, the daemon's) and the shape of a problem.
 *
 * The rule: what an active loop needs and is missing is a failure; what nothing uses is only
 * reported (a CLI that is not installed and that no loop uses is `ok`).
 *
 * PATH: every check uses the effective PATH of runs (the inherited one plus the user bin
 * directories, env.ts). Environment: runs started by the daemon get the daemon's environment, not
 * this shell's. When the daemon runs and its environment is readable (/proc/<pid>/environ, Linux,
 * same user), the loops it schedules are also checked against that environment — a CLI or a secret
 * present here but missing there is a failure; otherwise a secret missing here is a warning that
 * says the daemon's environment could not be seen.
 *
 * Side effects: none beyond what every command does when it opens the database (a migration to the
 * current log format, a rebuild of projections built by another version) and running each found
 * CLI's `--version` (and `accounts env` for an account that is not registered). The data directory's
 * mode is not changed.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isEventType, schemaVersion, type CommandTarget, type LoopAgentTarget, type WorkflowTarget } from '../../events/catalog.js';
import { LOG_FORMAT_VERSION, openDatabase, type Db } from '../../events/db.js';
import { FormatVersionError } from '../../events/errors.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { projections } from '../../projections/registry.js';
import { cliVersion } from '../agents/run.js';
import { isProviderId, PROVIDER_IDS, PROVIDERS, type ProviderId } from '../agents/index.js';
import { targetAccount } from '../agents/accounts.js';
import { readDaemonState } from '../daemon/daemon.js';
import { readPidFile, runningDaemon, type DaemonInfo } from '../daemon/daemon-info.js';
import { formatDuration } from '../../events/durations.js';
import { extendPath } from '../execution/env.js';
import { resolveExecutable } from '../execution/which.js';
import { databaseFile } from '../paths.js';
import { checkCommand } from '../execution/preflight.js';
import { rebuildProjections } from './projections.js';
import { listLoops, type LoopView } from '../queries/loops.js';
import { staleProjections } from '../store.js';
import { findWorkflow, listWorkflows, workflowVersion, workflowVersions, type WorkflowView } from '../queries/workflows.js';
import { storedSecrets } from './stored-secrets.js';
import { preflightWorkflow } from '../workflows/preflight.js';
import { countEvents } from '../../events/sqlite-reads.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface DoctorCheck {
  /** Stable id: `data-dir`, `database`, `log-format`, `projections`, `daemon`, `loops`, `cli:<provider>`, `account:<name>`, `loop:<name>`. */
  id: string;
  title: string;
  status: CheckStatus;
  detail: string;
  /** How to fix it (absent when there is nothing to do). */
  hint?: string;
  /** Names of the active loops that need what is checked. */
  neededBy: string[];
}

export interface DoctorReport {
  /** No check failed. */
  ok: boolean;
  checks: DoctorCheck[];
}

export interface DoctorOptions {
  dataDir: string;
  /** This environment (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Epoch ms for uptimes and ages (default Date.now()). */
  now?: number;
  /** The home directory the user bin directories are under (default os.homedir()). */
  home?: string;
  /** The environment of the daemon with that pid, or null when it cannot be read (default: /proc/<pid>/environ). */
  daemonEnv?: (pid: number) => Record<string, string> | null;
}

/** A daemon that has not passed for this long is reported stuck (as `loops daemon status` does). */
const STUCK_MS = 120_000;

/** Where a run would start: its variables and effective PATH. */
interface RunEnv {
  /** `this environment` or `the daemon's environment (pid N)`. */
  label: string;
  vars: Record<string, string | undefined>;
  home: string;
  /** The effective PATH of a run without its own PATH. */
  path: string;
}

interface Problem {
  status: 'warn' | 'fail';
  text: string;
  hint?: string;
}

/** Reads a process's environment from /proc (Linux, same user); null elsewhere or when unreadable. */
export function readProcessEnv(pid: number): Record<string, string> | null {
  if (process.platform !== 'linux') return null;
  let raw: string;
  try {
    raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    return null;
  }
  const vars: Record<string, string> = {};
  for (const entry of raw.split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) vars[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return vars;
}

function runEnv(label: string, vars: Record<string, string | undefined>, home: string): RunEnv {
  return { label, vars, home, path: extendPath(vars.PATH, vars, home) };
}

/** The effective PATH of a run whose target may set its own PATH. */
function pathFor(env: RunEnv, targetEnv: Record<string, string>): string {
  return targetEnv.PATH === undefined ? env.path : extendPath(targetEnv.PATH, env.vars, env.home);
}

function worst(statuses: CheckStatus[]): CheckStatus {
  return statuses.includes('fail') ? 'fail' : statuses.includes('warn') ? 'warn' : 'ok';
}

function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

function list(names: string[], max = 5): string {
  return names.length <= max ? names.join(', ') : `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

// ── data directory and database ─────────────────────────────────────────────────────────────────────

function checkDataDir(dataDir: string): { check: DoctorCheck; exists: boolean } {
  const base = { id: 'data-dir', title: 'data directory', neededBy: [] as string[] };
  let st;
  try {
    st = statSync(dataDir);
  } catch {
    return {
      exists: false,
      check: { ...base, status: 'warn', detail: `${dataDir} does not exist yet`, hint: 'it is created (mode 0700) by the first command that writes, e.g. loops create' },
    };
  }
  if (!st.isDirectory()) {
    return { exists: false, check: { ...base, status: 'fail', detail: `${dataDir} is not a directory`, hint: 'move it away, or point LOOPS_DATA_DIR at a directory' } };
  }
  const problems: Problem[] = [];
  if ((st.mode & 0o077) !== 0) {
    problems.push({
      status: 'warn',
      text: `mode ${octal(st.mode)} is looser than 0700: other users can read run output and the log`,
      hint: `chmod 700 ${dataDir}`,
    });
  }
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  if (uid !== null && st.uid !== uid) problems.push({ status: 'warn', text: `owned by uid ${st.uid}, not by this user (uid ${uid})` });
  try {
    accessSync(dataDir, constants.R_OK | constants.W_OK | constants.X_OK);
  } catch (error) {
    problems.push({
      status: 'fail',
      text: `not writable by this user (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      hint: 'fix its owner and permissions, or point LOOPS_DATA_DIR at a writable directory',
    });
  }
  return { exists: true, check: fromProblems(base, problems, `${dataDir} (${octal(st.mode)}, writable)`) };
}

function fromProblems(base: { id: string; title: string; neededBy: string[] }, problems: Problem[], okDetail: string): DoctorCheck {
  if (problems.length === 0) return { ...base, status: 'ok', detail: okDetail };
  const status = worst(problems.map((p) => p.status));
  const hints = [...new Set(problems.filter((p) => p.status === status && p.hint).map((p) => p.hint!))];
  return { ...base, status, detail: problems.map((p) => p.text).join('; '), ...(hints.length ? { hint: hints.join('; ') } : {}) };
}

interface DatabaseResult {
  checks: DoctorCheck[];
  /** Open and usable for the loop checks, or null. */
  db: Db | null;
  /** Which loops exist is known: the database is usable, or there is none yet (so there are no loops). */
  known: boolean;
}

function checkDatabase(dataDir: string, dataDirExists: boolean): DatabaseResult {
  const file = databaseFile(dataDir);
  const base = { id: 'database', title: 'database', neededBy: [] as string[] };
  if (!dataDirExists || !existsSync(file)) {
    return { db: null, known: true, checks: [{ ...base, status: 'warn', detail: `${file} does not exist yet (no loop was created)`, hint: 'create a loop: loops create command <name> --cmd <command> --every 1h' }] };
  }
  let db: Db;
  try {
    db = openDatabase(file);
  } catch (error) {
    if (error instanceof FormatVersionError) {
      return {
        db: null,
        known: false,
        checks: [
          { ...base, status: 'ok', detail: `${file} opens` },
          { id: 'log-format', title: 'log format', status: 'fail', detail: error.message, ...(error.hint ? { hint: error.hint } : {}), neededBy: [] },
        ],
      };
    }
    return {
      db: null,
      known: false,
      checks: [
        {
          ...base,
          status: 'fail',
          detail: `${file} cannot be opened: ${(error as Error).message}`,
          hint: 'check that it is a loops database and that the data directory is readable and writable (LOOPS_DEBUG=1 shows details)',
        },
      ],
    };
  }
  const checks: DoctorCheck[] = [];
  let usable = true;
  try {
    const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
    const messages = rows.map((r) => r.integrity_check);
    const bytes = [file, `${file}-wal`].reduce((sum, f) => sum + (existsSync(f) ? statSync(f).size : 0), 0);
    const events = countEvents(db);
    if (messages.length === 1 && messages[0] === 'ok') {
      checks.push({ ...base, status: 'ok', detail: `${file}: ${Math.ceil(bytes / 1024)} KiB, ${plural(events, 'event')}, integrity ok` });
    } else {
      usable = false;
      checks.push({
        ...base,
        status: 'fail',
        detail: `${file}: PRAGMA integrity_check found ${plural(messages.length, 'problem')}: ${messages.slice(0, 3).join('; ')}`,
        hint: 'stop the daemon and copy the data directory aside first; then restore a backup, or try sqlite3 loops.db ".recover" (the events table is the source of truth)',
      });
    }
  } catch (error) {
    usable = false;
    checks.push({ ...base, status: 'fail', detail: `${file} cannot be read: ${(error as Error).message}`, hint: 'LOOPS_DEBUG=1 shows details' });
  }
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    checks.push({ id: 'log-format', title: 'log format', status: 'ok', detail: `version ${version} (this loops reads up to ${LOG_FORMAT_VERSION})`, neededBy: [] });
  } catch {
    // Reported by the database check.
  }
  if (!usable) {
    db.close();
    return { db: null, known: false, checks };
  }
  checks.push(checkEvents(db));
  const pbase = { id: 'projections', title: 'projections', neededBy: [] as string[] };
  const stale = staleProjections(db);
  if (stale.length === 0) {
    checks.push({ ...pbase, status: 'ok', detail: `${plural(projections.length, 'projection')} up to date` });
  } else {
    try {
      rebuildProjections(db, stale);
      checks.push({ ...pbase, status: 'ok', detail: `${list(stale, 20)} had been built by another version: rebuilt from the log now` });
    } catch (error) {
      checks.push({
        ...pbase,
        status: 'fail',
        detail: `${list(stale, 20)} had been built by another version and cannot be rebuilt from the log: ${(error as Error).message}`,
        hint: 'the log may hold events this version cannot read (upgrade loops); the log itself is untouched',
      });
      db.close();
      return { db: null, known: false, checks };
    }
  }
  return { db, known: true, checks };
}

/**
 * Events loops cannot read: data or meta that is not valid JSON, a type the catalogue does not know,
 * or a schema version newer than this loops knows. Each such event stops replay, verify and rebuild of
 * its stream (failing closed, naming it); the other streams are unaffected. One scan of the log.
 */
function checkEvents(db: Db): DoctorCheck {
  const base = { id: 'events', title: 'events readable', neededBy: [] as string[] };
  const bad: string[] = [];
  let count = 0;
  for (const e of db
    .prepare<[], { position: number; stream_id: string; version: number; type: string; v: number; ok: number }>(
      'SELECT position, stream_id, version, type, v, json_valid(data) AND json_valid(meta) AS ok FROM events',
    )
    .iterate()) {
    const why = !e.ok ? 'its stored JSON does not parse' : !isEventType(e.type) ? 'its type is unknown to this loops' : e.v > schemaVersion(e.type) ? `its schema v${e.v} is newer than this loops knows (v${schemaVersion(e.type)})` : null;
    if (why === null) continue;
    count += 1;
    if (bad.length < 3) bad.push(`event ${e.position} (${e.stream_id} version ${e.version}, ${e.type}): ${why}`);
  }
  if (count === 0) return { ...base, status: 'ok', detail: 'every event parses and has a known type and version' };
  return {
    ...base,
    status: 'fail',
    detail: `${plural(count, 'event')} cannot be read: ${bad.join('; ')}${count > bad.length ? '; …' : ''}`,
    hint: 'replay, verify and rebuild of those streams fail closed, the rest work; a newer version: upgrade loops; damage: restore a backup (loops restore), or loops replay <run> to see the stream',
  };
}

// ── daemon ──────────────────────────────────────────────────────────────────────────────────────────

function checkDaemon(dataDir: string, info: DaemonInfo | null, now: number, scheduled: LoopView[] | null, envRead: boolean): DoctorCheck {
  const base = { id: 'daemon', title: 'daemon', neededBy: (scheduled ?? []).map((l) => l.name) };
  if (!info) {
    const stale = readPidFile(dataDir);
    const staleNote = stale ? ` (stale pid file of pid ${stale.pid})` : '';
    if (scheduled === null) return { ...base, status: 'warn', detail: `not running${staleNote}; whether a loop needs it is unknown: the database cannot be read` };
    if (scheduled.length === 0) {
      return { ...base, status: 'ok', detail: `not running${staleNote}; no active loop is scheduled (manual loops run with loops run-now)` };
    }
    return {
      ...base,
      status: 'warn',
      detail: `not running${staleNote}: nothing will fire (${plural(scheduled.length, 'active scheduled loop')}: ${list(scheduled.map((l) => l.name))})`,
      hint: 'loops daemon start (or loops daemon install to start it with your session)',
    };
  }
  const state = readDaemonState(dataDir);
  const uptime = formatDuration(Math.max(1000, now - Date.parse(info.startedAt)));
  const lastPass = state?.lastPassAt ?? null;
  const age = lastPass === null ? null : now - Date.parse(lastPass);
  const parts = [
    `running: pid ${info.pid}, up ${uptime}, loops ${info.version}`,
    `last pass ${age === null ? 'none yet' : `${formatDuration(Math.max(0, age))} ago`}`,
    `last error: ${state?.lastError ?? 'none'}`,
  ];
  if (envRead) parts.push('its environment is checked below too');
  const stuck = age === null ? now - Date.parse(info.startedAt) > STUCK_MS : age > STUCK_MS;
  if (stuck) {
    return {
      ...base,
      status: 'warn',
      detail: `${parts.join(', ')}; no scheduling pass for more than ${formatDuration(STUCK_MS)}`,
      hint: 'loops daemon logs shows what it is doing; restart it: loops daemon stop && loops daemon start',
    };
  }
  return { ...base, status: 'ok', detail: parts.join(', ') };
}

// ── provider CLIs and accounts ──────────────────────────────────────────────────────────────────────

interface Needs {
  /** Active loops needing it. */
  all: string[];
  /** The scheduled ones among them (run by the daemon). */
  scheduled: string[];
}

function checkProvider(provider: ProviderId, needs: Needs, here: RunEnv, daemon: RunEnv | null, known: boolean): DoctorCheck {
  const info = PROVIDERS[provider];
  const title = info.binary === provider ? `${provider} CLI` : `${provider} CLI (${info.binary})`;
  const base = { id: `cli:${provider}`, title, neededBy: needs.all };
  const found = resolveExecutable(info.binary, here.path, null);
  const usedBy = needs.all.length ? `; used by ${list(needs.all)}` : '';
  if (found === null) {
    if (needs.all.length === 0) {
      return { ...base, status: 'ok', detail: known ? 'not installed (no active loop uses it)' : 'not installed (which loops need it is unknown: the database cannot be read)' };
    }
    return {
      ...base,
      status: 'fail',
      detail: `${info.binary} not found on PATH=${here.path}; needed by ${list(needs.all)}`,
      hint: `install it (${info.docsUrl}), or put it in a directory on PATH (~/.local/bin is searched too)`,
    };
  }
  const version = cliVersion(provider, here.path);
  if (daemon && needs.scheduled.length > 0 && resolveExecutable(info.binary, daemon.path, null) === null) {
    return {
      ...base,
      status: 'fail',
      detail: `${info.binary} is at ${found}, but not on ${daemon.label}'s PATH=${daemon.path}: the scheduled runs of ${list(needs.scheduled)} will fail`,
      hint: `restart the daemon from this shell (loops daemon stop && loops daemon start), or link ${info.binary} into ~/.local/bin`,
    };
  }
  if (version === null) {
    return {
      ...base,
      status: needs.all.length ? 'warn' : 'ok',
      detail: `${found}, but \`${info.binary} ${info.versionArgs.join(' ')}\` gave no version${usedBy}`,
      ...(needs.all.length ? { hint: `run ${found} ${info.versionArgs.join(' ')} to see what is wrong` } : {}),
    };
  }
  return { ...base, status: 'ok', detail: `${version} at ${found}${usedBy}` };
}

interface AccountRow {
  name: string;
  tool: string;
  dir: string;
}

/** The registered accounts (none when this database has no accounts table yet). */
function registeredAccounts(db: Db): AccountRow[] {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'accounts'").get();
  if (!table) return [];
  return db.prepare('SELECT name, tool, dir FROM accounts WHERE live_name IS NOT NULL ORDER BY name').all() as AccountRow[];
}

function checkAccount(account: AccountRow, neededBy: string[]): DoctorCheck {
  const base = { id: `account:${account.name}`, title: `account ${account.name}`, neededBy };
  if (isDirectory(account.dir)) return { ...base, status: 'ok', detail: `${account.tool}, ${account.dir}${neededBy.length ? `; used by ${list(neededBy)}` : ''}` };
  return {
    ...base,
    status: neededBy.length ? 'fail' : 'warn',
    detail: `${account.tool}: its directory ${account.dir} does not exist${neededBy.length ? `; needed by ${list(neededBy)}` : ''}`,
    hint: `recreate it, or loops accounts remove ${account.name}`,
  };
}

/** Does `profile` resolve for `provider`, as a run would resolve it? */
function accountProblem(accounts: AccountRow[], provider: string, profile: string, here: RunEnv): Problem | null {
  const account = accounts.find((a) => a.name === profile);
  if (account) {
    if (account.tool !== provider) {
      return { status: 'fail', text: `account ${profile} is for ${account.tool}, not ${provider}`, hint: `loops accounts add <name> --tool ${provider} --dir <path>` };
    }
    if (!isDirectory(account.dir)) {
      return { status: 'fail', text: `account ${profile}: its directory ${account.dir} does not exist`, hint: `recreate it, or loops accounts remove ${profile} and add it again` };
    }
    return null;
  }
  const external = resolveExecutable('accounts', here.path, null);
  if (external === null) {
    return { status: 'fail', text: `account ${profile} is not registered`, hint: `loops accounts add ${profile} --tool ${provider} --dir <path>` };
  }
  const r = spawnSync(external, ['env', profile, '--tool', provider], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status === 0 && /^\s*(export\s+)?[A-Za-z_][A-Za-z0-9_]*=/m.test(r.stdout ?? '')) return null;
  return {
    status: 'fail',
    text: `account ${profile} is not registered, and \`accounts env ${profile} --tool ${provider}\` did not resolve it (exit ${r.status ?? r.signal ?? r.error?.message})`,
    hint: `loops accounts add ${profile} --tool ${provider} --dir <path>`,
  };
}

// ── active loops ────────────────────────────────────────────────────────────────────────────────────

interface LoopContext {
  here: RunEnv;
  /** The daemon's environment, when known and the loop is scheduled (the daemon runs it). */
  daemon: RunEnv | null;
  accounts: AccountRow[];
  /** The loop's workflow, looked up once. */
  workflow: WorkflowView | Error | null;
}

function cwdProblem(cwd: string | null): Problem | null {
  if (cwd === null || isDirectory(cwd)) return null;
  return { status: 'fail', text: `working directory ${cwd} does not exist`, hint: `create it, or recreate the loop with another --cwd` };
}

function secretProblems(names: readonly string[], here: RunEnv, daemon: RunEnv | null): Problem[] {
  if (names.length === 0) return [];
  const problems: Problem[] = [];
  const missingHere = names.filter((n) => here.vars[n] === undefined);
  if (daemon) {
    const missingThere = names.filter((n) => daemon.vars[n] === undefined);
    if (missingThere.length) {
      problems.push({
        status: 'fail',
        text: `secret variable${missingThere.length > 1 ? 's' : ''} ${missingThere.join(', ')} not set in ${daemon.label}: its scheduled runs will fail`,
        hint: `restart the daemon from an environment that sets ${missingThere.join(', ')} (loops daemon stop && loops daemon start)`,
      });
    }
    if (missingHere.length) {
      problems.push({
        status: 'warn',
        text: `secret variable${missingHere.length > 1 ? 's' : ''} ${missingHere.join(', ')} not set in this environment: loops run-now from here would fail (the daemon has ${missingHere.length > 1 ? 'them' : 'it'})`,
      });
    }
  } else if (missingHere.length) {
    problems.push({
      status: 'warn',
      text: `secret variable${missingHere.length > 1 ? 's' : ''} ${missingHere.join(', ')} not set in this environment; a run fails without ${missingHere.length > 1 ? 'them' : 'it'} (the daemon's environment may differ: doctor cannot see it)`,
      hint: `export ${missingHere.join(', ')} in the environment that starts the daemon (and run-now)`,
    });
  }
  return problems;
}

/**
 * Whether a command target can start in each environment (preflight.ts: the executable, or /bin/sh
 * and the first word of a shell command): a problem where it cannot.
 */
function executableProblems(target: CommandTarget, envs: RunEnv[]): { problems: Problem[]; resolved: string | null } {
  const cwd = target.cwd !== null && isDirectory(target.cwd) ? target.cwd : null;
  const problems: Problem[] = [];
  const herePath = pathFor(envs[0]!, target.env);
  const resolved = target.shell ? null : resolveExecutable(target.command, herePath, cwd);
  for (const [i, env] of envs.entries()) {
    const path = pathFor(env, target.env);
    const problem = checkCommand(target, path);
    if (problem === null) continue;
    if (i === 0) {
      problems.push({ status: 'fail', text: problem.message, hint: problem.hint });
      break;
    }
    const here = resolveExecutable(problem.executable, herePath, cwd);
    problems.push({
      status: 'fail',
      text:
        here === null
          ? `in ${env.label}: ${problem.message}: its scheduled runs will fail`
          : `${problem.executable} is at ${here}, but not on ${env.label}'s PATH=${path}: its scheduled runs will fail`,
      hint: 'restart the daemon from this shell (loops daemon stop && loops daemon start), or give the absolute path',
    });
  }
  return { problems, resolved };
}

function commandLoopProblems(target: CommandTarget, ctx: LoopContext): { problems: Problem[]; summary: string } {
  const envs = ctx.daemon ? [ctx.here, ctx.daemon] : [ctx.here];
  const problems: Problem[] = [];
  const cwd = cwdProblem(target.cwd);
  if (cwd) problems.push(cwd);
  const exe = executableProblems(target, envs);
  problems.push(...exe.problems, ...secretProblems(target.secretEnv ?? [], ctx.here, ctx.daemon));
  // A command's account (`--account … --account-tool …`), resolved as its runs will.
  const account = targetAccount(target);
  if (account) {
    const p = accountProblem(ctx.accounts, account.tool, account.profile, ctx.here);
    if (p) problems.push(p);
  }
  const text = target.command.replace(/\s+/g, ' ').trim();
  const what = target.shell
    ? `sh -c ${JSON.stringify(text.length > 40 ? `${text.slice(0, 39)}…` : text)}`
    : `${target.command}${exe.resolved && exe.resolved !== target.command ? ` (${exe.resolved})` : ''}`;
  return { problems, summary: `${what}${target.cwd ? `, cwd ${target.cwd}` : ''}` };
}

function agentLoopProblems(target: LoopAgentTarget, ctx: LoopContext): { problems: Problem[]; summary: string } {
  const problems: Problem[] = [];
  const info = PROVIDERS[target.provider];
  const cwd = cwdProblem(target.cwd);
  if (cwd) problems.push(cwd);
  const hereFile = resolveExecutable(info.binary, pathFor(ctx.here, target.env), null);
  if (hereFile === null) {
    problems.push({
      status: 'fail',
      text: `the ${target.provider} CLI (${info.binary}) is not found on PATH=${pathFor(ctx.here, target.env)}`,
      hint: `install it (${info.docsUrl}), or put it in a directory on PATH`,
    });
  } else if (ctx.daemon && resolveExecutable(info.binary, pathFor(ctx.daemon, target.env), null) === null) {
    problems.push({
      status: 'fail',
      text: `the ${target.provider} CLI is at ${hereFile}, but not on ${ctx.daemon.label}'s PATH=${pathFor(ctx.daemon, target.env)}: its scheduled runs will fail`,
      hint: `restart the daemon from this shell (loops daemon stop && loops daemon start), or link ${info.binary} into ~/.local/bin`,
    });
  }
  if (target.promptFile !== null) {
    try {
      accessSync(target.promptFile, constants.R_OK);
      if (!statSync(target.promptFile).isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
    } catch (error) {
      problems.push({
        status: 'fail',
        text: `prompt file ${target.promptFile} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
        hint: 'the file is read when each run starts: restore it',
      });
    }
  }
  const account = targetAccount(target);
  if (account) {
    const p = accountProblem(ctx.accounts, account.tool, account.profile, ctx.here);
    if (p) problems.push(p);
  }
  problems.push(...secretProblems(target.secretEnv ?? [], ctx.here, ctx.daemon));
  const summary = `${target.provider}${hereFile ? ` at ${hereFile}` : ''}${target.cwd ? `, cwd ${target.cwd}` : ''}${target.promptFile ? `, prompt file ${target.promptFile}` : ''}${target.account ? `, account ${target.account}` : ''}`;
  return { problems, summary };
}

function workflowLoopProblems(target: WorkflowTarget, ctx: LoopContext): { problems: Problem[]; summary: string } {
  const wf = ctx.workflow;
  if (wf === null || wf instanceof Error) {
    return {
      problems: [
        {
          status: 'fail',
          text: `workflow ${target.workflowName} (${target.workflowId}) ${wf instanceof Error ? `cannot be read: ${wf.message}` : 'does not exist'}`,
          hint: 'archive this loop, or recreate it with loops create workflow',
        },
      ],
      summary: '',
    };
  }
  if (wf.status === 'archived') {
    return {
      problems: [
        {
          status: 'fail',
          text: `workflow ${wf.name} is archived: every run of this loop fails`,
          hint: `archive this loop (loops archive <loop>), or store the workflow again (loops workflows create <file>) and recreate the loop`,
        },
      ],
      summary: '',
    };
  }
  const spec: WorkflowSpec = wf.spec;
  const problems: Problem[] = [];
  const here = preflightWorkflow(spec, wf.sourceFile, ctx.here.path);
  for (const p of here) {
    problems.push({ status: 'fail', text: `step ${p.step}: ${p.message}`, hint: 'loops workflows validate --preflight <file> checks the spec on this machine' });
  }
  if (ctx.daemon) {
    const seen = new Set(here.map((p) => `${p.step}\0${p.field}`));
    for (const p of preflightWorkflow(spec, wf.sourceFile, ctx.daemon.path)) {
      if (seen.has(`${p.step}\0${p.field}`)) continue;
      problems.push({
        status: 'fail',
        text: `step ${p.step}: in ${ctx.daemon.label}: ${p.message}`,
        hint: 'restart the daemon from this shell (loops daemon stop && loops daemon start)',
      });
    }
  }
  for (const [name, input] of Object.entries(spec.inputs)) {
    if (input.required && input.default === null) {
      problems.push({
        status: 'fail',
        text: `input ${name} is required and has no default, but a loop run gives no inputs`,
        hint: `give input ${name} a default in the spec (loops workflows update ${wf.name} <file>)`,
      });
    }
  }
  problems.push(...secretProblems(spec.secrets, ctx.here, ctx.daemon));
  return { problems, summary: `workflow ${wf.name} v${wf.version}, ${plural(spec.steps.length, 'step')}` };
}

function checkLoop(loop: LoopView, ctx: LoopContext): DoctorCheck {
  const base = { id: `loop:${loop.name}`, title: `loop ${loop.name}`, neededBy: [loop.name] };
  const t = loop.target;
  const { problems, summary } =
    t.kind === 'command' ? commandLoopProblems(t, ctx) : t.kind === 'agent' ? agentLoopProblems(t, ctx) : workflowLoopProblems(t, ctx);
  return fromProblems(base, problems, `${summary}${loop.schedule.kind === 'manual' ? ' (manual)' : ''}`);
}

// ── the report ──────────────────────────────────────────────────────────────────────────────────────

function isScheduled(loop: LoopView): boolean {
  return loop.status === 'active' && loop.schedule.kind !== 'manual';
}

/** The providers a loop's runs start: its own, or its workflow's agent steps'. */
function providersOf(loop: LoopView, workflow: WorkflowView | Error | null): ProviderId[] {
  if (loop.target.kind === 'agent') return [loop.target.provider];
  if (loop.target.kind === 'workflow' && workflow && !(workflow instanceof Error)) {
    const out = new Set<ProviderId>();
    for (const step of workflow.spec.steps) if (step.target.type === 'agent' && isProviderId(step.target.provider)) out.add(step.target.provider);
    return [...out];
  }
  return [];
}

function lookupWorkflow(db: Db, loop: LoopView): WorkflowView | Error | null {
  if (loop.target.kind !== 'workflow') return null;
  try {
    return findWorkflow(db, loop.target.workflowId, { includeArchived: true });
  } catch (error) {
    return (error as { code?: string }).code === 'not_found' ? null : (error as Error);
  }
}

/**
 * Values stored in clear under names that say they are secrets (stored-secrets.ts): in a live
 * definition — one that still starts processes — a warning pointing to `loops secrets scrub`; only
 * in history (removed, archived or expired loops, archived workflows, older workflow versions,
 * e.g. after a scrub) `ok`, saying the log still holds them. Never a failure: doctor exits 1 only
 * for what keeps an active loop from running.
 */
export function checkStoredSecrets(
  loops: readonly LoopView[],
  workflows: readonly WorkflowView[],
  older: ReadonlyArray<{ name: string; version: number; spec: WorkflowSpec }> = [],
): DoctorCheck {
  const found = storedSecrets(loops, workflows, older);
  const live = found.filter((f) => f.live).map((f) => f.where);
  const history = found.filter((f) => !f.live).map((f) => f.where);
  const base = { id: 'stored-secrets', title: 'secrets in definitions', neededBy: [] as string[] };
  const past = history.length
    ? `the log's history still holds ${plural(history.length, 'value')} under secret names (rotate them; no command removes history, see docs/cli.md, "Secrets"): ${list(history, 10)}`
    : '';
  if (live.length === 0) {
    return { ...base, status: 'ok', detail: history.length ? `no live loop or workflow definition holds a value under a secret name; ${past}` : 'no loop or workflow definition holds a value under a secret name' };
  }
  return {
    ...base,
    status: 'warn',
    detail: `${plural(live.length, 'value')} under secret names stored in clear in live definitions: ${list(live, 10)}${past ? `; ${past}` : ''}`,
    hint:
      'loops secrets scrub (try --dry-run first) redefines them with each secret passed by name (--secret-env NAME, a workflow\'s secrets:), which the daemon\'s environment must then set; rotate those secrets: their old values stay in the log\'s history. See docs/cli.md, "Secrets"',
  };
}

/** Every workflow version before each workflow's latest, for the stored-secrets check. */
function olderVersions(db: Db, workflows: readonly WorkflowView[]): Array<{ name: string; version: number; spec: WorkflowSpec }> {
  const out: Array<{ name: string; version: number; spec: WorkflowSpec }> = [];
  for (const wf of workflows) {
    try {
      for (const v of workflowVersions(db, wf.id)) {
        if (v.version !== wf.version) out.push({ name: wf.name, version: v.version, spec: workflowVersion(db, wf.id, v.version).spec });
      }
    } catch {
      // an unreadable version is the database check's to report
    }
  }
  return out;
}

export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const env = options.env ?? process.env;
  const now = options.now ?? Date.now();
  const home = options.home ?? homedir();
  const readEnv = options.daemonEnv ?? readProcessEnv;
  const checks: DoctorCheck[] = [];

  const dir = checkDataDir(options.dataDir);
  checks.push(dir.check);
  // Not a directory: there is no database to look at.
  const database: DatabaseResult = dir.check.status === 'fail' && !dir.exists ? { checks: [], db: null, known: false } : checkDatabase(options.dataDir, dir.exists);
  checks.push(...database.checks);
  const db = database.db;
  try {
    const loops = db ? listLoops(db, { all: true }) : [];
    const active = loops.filter((l) => l.status === 'active');
    const scheduled = active.filter(isScheduled);
    const workflows = new Map(active.map((l) => [l.id, db ? lookupWorkflow(db, l) : null]));

    const here = runEnv('this environment', env, home);
    const info = dir.exists ? runningDaemon(options.dataDir) : null;
    const daemonVars = info ? readEnv(info.pid) : null;
    const daemon = info && daemonVars ? runEnv(`the daemon's environment (pid ${info.pid})`, daemonVars, daemonVars.HOME ?? home) : null;
    checks.push(checkDaemon(options.dataDir, info, now, database.known ? scheduled : null, daemon !== null));

    if (db) {
      const inactive = loops.filter((l) => l.status !== 'active' && l.status !== 'removed');
      const byStatus = [...new Set(inactive.map((l) => l.status))].map((s) => `${inactive.filter((l) => l.status === s).length} ${s}`);
      checks.push({
        id: 'loops',
        title: 'loops',
        status: 'ok',
        detail:
          `${active.length} active (${scheduled.length} scheduled, ${active.length - scheduled.length} manual)` +
          (byStatus.length ? `; ${byStatus.join(', ')} (not checked: they do not run until resumed)` : ''),
        neededBy: [],
      });
    }

    if (db) {
      const all = listWorkflows(db, { all: true });
      checks.push(checkStoredSecrets(loops, all, olderVersions(db, all)));
    }

    for (const provider of PROVIDER_IDS) {
      const users = active.filter((l) => providersOf(l, workflows.get(l.id) ?? null).includes(provider));
      checks.push(checkProvider(provider, { all: users.map((l) => l.name), scheduled: users.filter(isScheduled).map((l) => l.name) }, here, daemon, database.known));
    }

    const accounts = db ? registeredAccounts(db) : [];
    for (const account of accounts) {
      const users = active.filter((l) => (l.target.kind === 'agent' || l.target.kind === 'command') && l.target.account === account.name).map((l) => l.name);
      checks.push(checkAccount(account, users));
    }

    for (const loop of active) {
      checks.push(
        checkLoop(loop, {
          here,
          daemon: isScheduled(loop) ? daemon : null,
          accounts,
          workflow: workflows.get(loop.id) ?? null,
        }),
      );
    }
  } finally {
    db?.close();
  }
  // One key order for every check, for --json readers.
  const ordered = checks.map(({ id, title, status, detail, hint, neededBy }) => ({ id, title, status, detail, ...(hint ? { hint } : {}), neededBy }));
  return { ok: !ordered.some((c) => c.status === 'fail'), checks: ordered };
}
