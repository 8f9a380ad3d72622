/**
 * Running an agent loop's run: the provider's adapter builds the non-interactive argv (the prompt
 * goes on stdin, closed after it, or in a file — never in argv where the CLI allows another
 * channel), the CLI runs as a process-group leader with its output in the run's files, and when it
 * ends its JSON / JSONL output is parsed — streaming, memory bounded — into `run.agent_reported`
 * (model, session, turns, tokens, cost, final message), recorded with the exit.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData, LoopAgentTarget } from '../../events/catalog.js';
import { AgentOutputParser, buildInvocation, enforcedLimits, limitExceeded, parseVersionOutput, PROVIDERS, type AgentInvocation, type ProviderId } from './index.js';
import { extendPath } from '../execution/env.js';
import { resolveExecutable } from '../execution/which.js';

export interface PreparedAgent {
  invocation: AgentInvocation;
  /** The env to add for the run (the target's, the adapter's). */
  env: Record<string, string>;
}

/** The prompt of a run: the target's text, or its file read now. */
export function agentPrompt(target: LoopAgentTarget): string {
  if (target.prompt !== null) return target.prompt;
  try {
    return readFileSync(target.promptFile!, 'utf8');
  } catch (error) {
    throw new Error(`the prompt file ${target.promptFile} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** Builds the invocation for one run; writes the prompt file (0600) into the run's directory. */
export function prepareAgent(dataDir: string, runDirectory: string, target: LoopAgentTarget): PreparedAgent {
  const prompt = agentPrompt(target);
  mkdirSync(runDirectory, { recursive: true, mode: 0o700 });
  const promptFile = join(runDirectory, 'prompt.txt');
  writeFileSync(promptFile, prompt, { mode: 0o600 });
  const isolatedConfigDir = target.configIsolation === 'safe' ? join(dataDir, 'agent-config', target.provider) : null;
  if (isolatedConfigDir) mkdirSync(isolatedConfigDir, { recursive: true, mode: 0o700 });
  const invocation = buildInvocation(target, { prompt, promptFile, isolatedConfigDir, cwd: target.cwd });
  return { invocation, env: { ...target.env, ...invocation.env } };
}

const versions = new Map<string, string | null>();

/** The CLI's version (`--version`), asked once per binary per process. */
export function cliVersion(provider: ProviderId, path = extendPath(process.env.PATH)): string | null {
  const info = PROVIDERS[provider];
  const binary = resolveExecutable(info.binary, path, null);
  if (binary === null) return null;
  if (versions.has(binary)) return versions.get(binary)!;
  const r = spawnSync(binary, [...info.versionArgs], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] });
  const version = r.status === 0 ? parseVersionOutput(`${r.stdout ?? ''}\n${r.stderr ?? ''}`) : null;
  versions.set(binary, version);
  return version;
}

/** The report from a parser that was fed the whole stdout while the CLI ran (see SpawnSpec.stdoutSink). */
export function reportFrom(parser: AgentOutputParser, provider: ProviderId, version: string | null): EventData<'run.agent_reported'> {
  return toEvent(parser.end(), provider, version);
}

/**
 * Parses the run's stdout file (and its rotated part) chunk by chunk into the agent's report —
 * for a run whose process ended while no runner fed a parser (recovery). Past the file cap the
 * beginning of the output is gone from those, and with it what the CLI said first (its session
 * id, its model): when the report lacks them, they are taken from the kept head
 * (`<file>.head`, see OutputFile), parsed on its own — only those two fields, so nothing the head
 * shares with the rotated part (tokens, cost, turns) is counted twice.
 */
export function agentReport(provider: ProviderId, stdoutFile: string, version: string | null): EventData<'run.agent_reported'> {
  const buf = Buffer.allocUnsafe(1 << 20);
  const parser = new AgentOutputParser(provider);
  feedFiles(parser, [`${stdoutFile}.1`, stdoutFile], buf);
  const report = { ...parser.end() };
  if (report.sessionId === null || report.model === null) {
    const head = new AgentOutputParser(provider);
    if (feedFiles(head, [`${stdoutFile}.head`], buf)) {
      const first = head.end();
      report.sessionId ??= first.sessionId;
      report.model ??= first.model;
    }
  }
  return toEvent(report, provider, version);
}

/** Pushes the files that exist, in order, through the parser, one `buf` at a time; whether any did. */
function feedFiles(parser: AgentOutputParser, files: string[], buf: Buffer): boolean {
  let any = false;
  for (const file of files) {
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch {
      continue;
    }
    any = true;
    try {
      for (let pos = 0; ; ) {
        const n = readSync(fd, buf, 0, buf.length, pos);
        if (n <= 0) break;
        parser.push(Buffer.from(buf.subarray(0, n)));
        pos += n;
      }
    } finally {
      closeSync(fd);
    }
  }
  return any;
}

function toEvent(r: ReturnType<AgentOutputParser['end']>, provider: ProviderId, version: string | null): EventData<'run.agent_reported'> {
  return {
    provider,
    cliVersion: version,
    model: r.model,
    sessionId: r.sessionId,
    turns: r.turns,
    durationMs: r.durationMs,
    tokens: r.tokens,
    costUsd: r.costUsd,
    finalMessage: r.finalMessage === null ? null : r.finalMessage.length > 65_536 ? `${r.finalMessage.slice(0, 65_536)}…` : r.finalMessage,
    isError: r.isError,
    // Only when there is one: a report with no error is recorded exactly as before.
    ...(r.error !== null ? { error: r.error } : {}),
    parseError: r.parseError,
  };
}

type ReportedError = NonNullable<EventData<'run.agent_reported'>['error']>;

/**
 * The CLI's own error as a run's error reads it: `claude API error 529 overloaded_error: Overloaded`
 * when it names an HTTP status, else `claude: error_max_turns after 12 turns`, `codex: <message>`.
 */
export function describeAgentError(provider: string, e: ReportedError): string {
  if (e.status !== null) return `${provider} API error ${e.status}${e.type !== null ? ` ${e.type}` : ''}: ${e.message}`;
  const typed = e.type !== null && !e.message.startsWith(e.type) ? `${e.type}: ` : '';
  return `${provider}: ${typed}${e.message}`;
}

/**
 * The exit an agent attempt records, its error saying what the CLI reported instead of only how the
 * process ended: `claude: error_max_turns after 12 turns; exited with code 1`. A timeout or a
 * cancel stays first (`timed out after 5m; codex: stream disconnected`); an exit with no error (0)
 * is left as it is, whatever the CLI said.
 */
export function withAgentError<T extends { error: string | null; timedOut: boolean; cancelled: boolean }>(
  exit: T,
  agent: Pick<EventData<'run.agent_reported'>, 'provider' | 'error'> | null,
): T {
  if (exit.error === null || !agent?.error) return exit;
  const said = describeAgentError(agent.provider, agent.error);
  return { ...exit, error: exit.timedOut || exit.cancelled ? `${exit.error}; ${said}` : `${said}; ${exit.error}` };
}

/**
 * The executor's stdout sink for an agent run (SpawnSpec.stdoutSink): feeds the parser and, for the
 * limits loops enforces itself (the CLI has no flag for them but reports them), asks the executor
 * to stop the run once a reported figure goes over its limit.
 */
export function agentSink(parser: AgentOutputParser, target: Pick<LoopAgentTarget, 'provider' | 'maxTurns' | 'maxCostUsd'>): (chunk: Buffer) => string | void {
  const limits = enforcedLimits(target);
  if (limits === null) return (chunk) => parser.push(chunk);
  return (chunk) => {
    parser.push(chunk);
    return limitExceeded(target.provider, parser.progress(), limits) ?? undefined;
  };
}
