/**
 * Reads an agent CLI's stdout (JSON / JSONL) incrementally and keeps only what a run records:
 * model, session id, turns, duration, tokens, cost, the final message, whether the CLI called it an
 * error and the error it reported. Memory is bounded whatever the output: one line at a time (lines
 * longer than `maxLineBytes` are skipped and counted), the final message capped at `maxMessageChars`, and
 * nothing else retained. Non-JSON lines, malformed or truncated JSON and a missing final event are
 * tolerated: the report then holds nulls and says why in `parseError`.
 *
 * This is the shared line machinery; what each provider's events mean is its reader
 * (`transcript.read` in ./providers/<id>.ts), which fills the extraction state of ./extract.ts. The
 * shapes read per provider, and where they come from, are listed in docs/agents.md.
 */
import { ValidationError } from '../../events/errors.js';
import { Extract, type AgentError } from './extract.js';
import { obj } from './json.js';
import { isProviderId, providerDefinition, type ProviderId, type TranscriptReader } from './providers/index.js';

export interface AgentTokens {
  input: number | null;
  output: number | null;
  cacheRead: number | null;
  cacheWrite: number | null;
}

export interface AgentReport {
  provider: ProviderId;
  model: string | null;
  sessionId: string | null;
  turns: number | null;
  durationMs: number | null;
  tokens: AgentTokens;
  costUsd: number | null;
  /** The answer; null when the CLI reported an error (its interim text or error text is no answer). */
  finalMessage: string | null;
  isError: boolean | null;
  /** The CLI's own error (message, error type, HTTP status), when it reported one. */
  error: AgentError | null;
  /** Why the report is incomplete (no JSON, truncated, no final event), or null. */
  parseError: string | null;
}

/** Counters about the output read, for diagnostics (not part of the report). */
export interface AgentParseStats {
  bytes: number;
  /** Lines seen (a last line without a newline counts). */
  lines: number;
  jsonLines: number;
  /** Lines that are not JSON objects (progress text, warnings). */
  nonJsonLines: number;
  /** Lines that look like JSON objects but do not parse. */
  malformedLines: number;
  /** Lines longer than `maxLineBytes`, skipped unread. */
  skippedLongLines: number;
  /** The output ends inside a JSON object (no final newline, does not parse). */
  truncated: boolean;
}

export interface AgentOutputParserOptions {
  /** Longest line read, in bytes (default 1 MiB); longer lines are skipped and counted. */
  maxLineBytes?: number;
  /** The final message is cut to this many characters (default 64 Ki). */
  maxMessageChars?: number;
}

const DEFAULT_MAX_LINE = 1024 * 1024;
const DEFAULT_MAX_MESSAGE = 64 * 1024;
const NEWLINE = 0x0a;

export class AgentOutputParser {
  readonly provider: ProviderId;
  private readonly transcript: TranscriptReader;
  private readonly maxLine: number;
  private readonly x: Extract;
  /** The current, not yet terminated line. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The current line is longer than maxLine: its bytes are dropped until the next newline. */
  private skipping = false;
  /** The whole output while it is small and no line parsed: a pretty-printed single JSON object spans lines. */
  private whole: Buffer[] | null = [];
  private wholeBytes = 0;
  private ended: AgentReport | null = null;
  private readonly counters: AgentParseStats = {
    bytes: 0,
    lines: 0,
    jsonLines: 0,
    nonJsonLines: 0,
    malformedLines: 0,
    skippedLongLines: 0,
    truncated: false,
  };

  constructor(provider: ProviderId, options: AgentOutputParserOptions = {}) {
    if (!isProviderId(provider)) throw new ValidationError(`unknown agent provider "${String(provider)}"`);
    this.provider = provider;
    this.transcript = providerDefinition(provider).transcript;
    this.maxLine = Math.max(1, options.maxLineBytes ?? DEFAULT_MAX_LINE);
    this.x = new Extract(Math.max(1, options.maxMessageChars ?? DEFAULT_MAX_MESSAGE));
  }

  get stats(): Readonly<AgentParseStats> {
    return { ...this.counters };
  }

  push(chunk: Buffer | string): void {
    if (this.ended) throw new Error('AgentOutputParser: push after end');
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (buf.length === 0) return;
    this.counters.bytes += buf.length;
    if (this.whole) {
      if (this.wholeBytes + buf.length <= this.maxLine) {
        // Copied: the caller may reuse its buffer.
        this.whole.push(Buffer.from(buf));
        this.wholeBytes += buf.length;
      } else {
        this.whole = null;
      }
    }
    let start = 0;
    while (start < buf.length) {
      const nl = buf.indexOf(NEWLINE, start);
      if (nl === -1) {
        this.append(buf, start, buf.length);
        break;
      }
      if (this.pendingBytes === 0 && !this.skipping) {
        // The whole line is in this chunk: read it in place.
        if (nl - start > this.maxLine) this.skipLine();
        else this.handleLine(buf.subarray(start, nl), false);
      } else {
        this.append(buf, start, nl);
        this.finishLine(false);
      }
      start = nl + 1;
    }
  }

  /**
   * What the output reported so far that counts against a budget: the cost in USD and the turns
   * (for the providers whose counted events are turns), each null while nothing was reported.
   */
  progress(): { costUsd: number | null; turns: number | null } {
    const x = this.x;
    return { costUsd: x.costUsd, turns: x.turns ?? (this.transcript.countsTurns && x.turnCount > 0 ? x.turnCount : null) };
  }

  end(): AgentReport {
    if (this.ended) return this.ended;
    if (this.pendingBytes > 0 || this.skipping) this.finishLine(true);
    if (this.counters.jsonLines === 0 && this.whole && this.wholeBytes > 0) this.tryWhole();
    this.whole = null;
    this.ended = this.report();
    return this.ended;
  }

  private append(buf: Buffer, start: number, end: number): void {
    if (this.skipping || end === start) return;
    const length = end - start;
    if (this.pendingBytes + length > this.maxLine) {
      this.pending = [];
      this.pendingBytes = 0;
      this.skipping = true;
      return;
    }
    // Copied: the caller may reuse its buffer.
    this.pending.push(Buffer.from(buf.subarray(start, end)));
    this.pendingBytes += length;
  }

  private skipLine(): void {
    this.counters.lines++;
    this.counters.skippedLongLines++;
  }

  private finishLine(last: boolean): void {
    if (this.skipping) {
      this.skipping = false;
      this.skipLine();
      return;
    }
    const bytes = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    this.handleLine(bytes, last);
  }

  private handleLine(bytes: Buffer, last: boolean): void {
    const line = bytes.toString('utf8').trim();
    if (line === '') return;
    this.counters.lines++;
    if (line[0] !== '{') {
      this.counters.nonJsonLines++;
      return;
    }
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      if (last) this.counters.truncated = true;
      else this.counters.malformedLines++;
      return;
    }
    const e = obj(event);
    if (!e) {
      this.counters.nonJsonLines++;
      return;
    }
    this.counters.jsonLines++;
    this.whole = null;
    this.transcript.read(e, this.x);
  }

  /** A single JSON object printed over several lines (e.g. `--output-format json` pretty-printed). */
  private tryWhole(): void {
    const text = Buffer.concat(this.whole!, this.wholeBytes).toString('utf8').trim();
    if (!text.startsWith('{')) return;
    try {
      const e = obj(JSON.parse(text));
      if (!e) return;
      this.counters.jsonLines++;
      this.counters.malformedLines = 0;
      this.counters.truncated = false;
      this.transcript.read(e, this.x);
    } catch {
      // Not one object either: the per-line verdicts stand.
    }
  }

  private report(): AgentReport {
    const x = this.x;
    const c = this.counters;
    const turns = x.turns ?? (this.transcript.countsTurns && x.turnCount > 0 ? x.turnCount : null);
    // A failed turn has no answer: what it said last is an interim message or the error's text.
    const finalMessage = x.isError === true ? null : this.transcript.prefersLastText ? (x.last() ?? x.resultText) : (x.resultText ?? x.last());
    let parseError: string | null = null;
    if (c.jsonLines === 0) {
      if (c.bytes === 0) parseError = 'no output: the CLI printed nothing on stdout';
      else if (c.truncated) parseError = 'truncated output: it ends inside a JSON object';
      else parseError = `no JSON in the output (${c.bytes} bytes, ${c.lines} lines of text)`;
    } else if (c.truncated) {
      parseError = x.finished
        ? 'truncated output: the last JSON line is incomplete'
        : 'truncated output: the last JSON line is incomplete and no final result was printed';
    } else if (!x.finished) {
      parseError = 'no final result in the output: the CLI stopped before reporting one';
    }
    return {
      provider: this.provider,
      model: x.model,
      sessionId: x.sessionId,
      turns,
      durationMs: x.durationMs,
      tokens: { input: x.input, output: x.output, cacheRead: x.cacheRead, cacheWrite: x.cacheWrite },
      costUsd: x.costUsd,
      finalMessage,
      isError: x.isError,
      error: x.error,
      parseError,
    };
  }
}

/** Parses a whole output at once (small outputs, tests). */
export function parseAgentOutput(provider: ProviderId, output: Buffer | string, options?: AgentOutputParserOptions): AgentReport {
  const parser = new AgentOutputParser(provider, options);
  parser.push(output);
  return parser.end();
}
