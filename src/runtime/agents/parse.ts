/**
 * Reads an agent CLI's stdout (JSON / JSONL) incrementally and keeps only what a run records:
 * model, session id, turns, duration, tokens, cost, the final message and whether the CLI called
 * it an error. Memory is bounded whatever the output: one line at a time (lines longer than
 * `maxLineBytes` are skipped and counted), the final message capped at `maxMessageChars`, and
 * nothing else retained. Non-JSON lines, malformed or truncated JSON and a missing final event are
 * tolerated: the report then holds nulls and says why in `parseError`.
 *
 * The shapes read per provider, and where they come from, are listed in docs/agents.md.
 */
import { ValidationError } from '../../events/errors.js';
import { PROVIDERS, isProviderId, type ProviderId, type TranscriptFormat } from './providers.js';
import { bool, num, obj, str, type Json } from './json.js';

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
  finalMessage: string | null;
  isError: boolean | null;
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

/** The text blocks of a claude/cursor message `content` array (or a plain string), joined. */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content === '' ? null : content;
  if (!Array.isArray(content)) return null;
  let text = '';
  for (const block of content) {
    const b = obj(block);
    if (b && b.type === 'text' && typeof b.text === 'string') text += b.text;
  }
  return text === '' ? null : text;
}

/** The mutable extraction state shared by the per-format readers. */
class Extract {
  model: string | null = null;
  sessionId: string | null = null;
  turns: number | null = null;
  turnCount = 0;
  durationMs: number | null = null;
  input: number | null = null;
  output: number | null = null;
  cacheRead: number | null = null;
  cacheWrite: number | null = null;
  costUsd: number | null = null;
  /** The final message the CLI reported as such (claude/cursor `result`, gemini `response`). */
  resultText: string | null = null;
  /** The last assistant text seen, a fallback for `resultText` (see `last()`). */
  private lastText: string | null = null;
  /** Gemini: assistant text since the last tool call (deltas appended), at most maxChars. */
  private segment = '';
  private segmentDropped = 0;
  private segmentDone = false;
  /** The segment, not `lastText`, is the last assistant text (capped lazily: deltas may be many). */
  private segmentIsLast = false;
  isError: boolean | null = null;
  /** A final event was seen (result, turn completed, step finished). */
  finished = false;

  constructor(readonly maxChars: number) {}

  cap(text: string, dropped = 0): string {
    const over = Math.max(0, text.length - this.maxChars) + dropped;
    return over > 0 ? `${text.slice(0, this.maxChars)}\n…[truncated ${over} characters]` : text;
  }
  setLast(text: string | null): void {
    if (text === null) return;
    this.lastText = this.cap(text);
    this.segmentIsLast = false;
  }
  last(): string | null {
    return this.segmentIsLast ? this.cap(this.segment, this.segmentDropped) : this.lastText;
  }
  /** Adds a counted value (tokens and cost are summed over turns / steps). */
  add(field: 'input' | 'output' | 'cacheRead' | 'cacheWrite' | 'costUsd', value: number | null): void {
    if (value !== null) this[field] = (this[field] ?? 0) + value;
  }
  /** Gemini assistant text: deltas are appended to the current segment, a tool call ends it. */
  appendSegment(content: string, delta: boolean): void {
    if (this.segmentDone || !delta) {
      this.segment = '';
      this.segmentDropped = 0;
      this.segmentDone = false;
    }
    const room = this.maxChars - this.segment.length;
    this.segment += content.slice(0, Math.max(0, room));
    this.segmentDropped += Math.max(0, content.length - Math.max(0, room));
    if (this.segment !== '') this.segmentIsLast = true;
  }
  endSegment(): void {
    this.segmentDone = true;
  }
}

type Reader = (event: Json, x: Extract) => void;

/** claude -p --output-format stream-json --verbose (and a single `--output-format json` result). */
const readClaude: Reader = (e, x) => {
  if (e.type === 'system' && e.subtype === 'init') {
    x.model = str(e.model) ?? x.model;
    x.sessionId = str(e.session_id) ?? x.sessionId;
  } else if (e.type === 'assistant') {
    const message = obj(e.message);
    if (x.model === null) x.model = str(message?.model);
    x.sessionId = x.sessionId ?? str(e.session_id);
    x.setLast(contentText(message?.content));
  } else if (e.type === 'result') {
    x.finished = true;
    x.sessionId = str(e.session_id) ?? x.sessionId;
    x.turns = num(e.num_turns) ?? x.turns;
    x.durationMs = num(e.duration_ms) ?? x.durationMs;
    // `cost_usd` is the name older versions used.
    x.costUsd = num(e.total_cost_usd) ?? num(e.cost_usd) ?? x.costUsd;
    const usage = obj(e.usage);
    if (usage) {
      x.input = num(usage.input_tokens);
      x.output = num(usage.output_tokens);
      x.cacheRead = num(usage.cache_read_input_tokens);
      x.cacheWrite = num(usage.cache_creation_input_tokens);
    }
    const result = str(e.result);
    if (result !== null) x.resultText = x.cap(result);
    x.isError = bool(e.is_error) ?? (typeof e.subtype === 'string' ? e.subtype !== 'success' : x.isError);
  }
};

/** codex exec --json (thread/turn/item events). */
const readCodex: Reader = (e, x) => {
  switch (e.type) {
    case 'thread.started':
      x.sessionId = str(e.thread_id) ?? x.sessionId;
      break;
    case 'turn.completed': {
      x.finished = true;
      x.turnCount++;
      const usage = obj(e.usage);
      if (usage) {
        x.add('input', num(usage.input_tokens));
        x.add('output', num(usage.output_tokens));
        x.add('cacheRead', num(usage.cached_input_tokens));
      }
      if (x.isError === null) x.isError = false;
      break;
    }
    case 'turn.failed':
      x.finished = true;
      x.turnCount++;
      x.isError = true;
      break;
    case 'error':
      x.isError = true;
      break;
    case 'item.completed': {
      const item = obj(e.item);
      if (item?.type === 'agent_message') x.setLast(str(item.text));
      break;
    }
  }
};

/** cursor-agent --print --output-format stream-json (claude-like events; a `json` result object too). */
const readCursor: Reader = (e, x) => {
  if (e.type === 'system' && e.subtype === 'init') {
    x.model = str(e.model) ?? x.model;
    x.sessionId = str(e.session_id) ?? x.sessionId;
  } else if (e.type === 'assistant') {
    x.sessionId = x.sessionId ?? str(e.session_id);
    x.setLast(contentText(obj(e.message)?.content));
  } else if (e.type === 'result') {
    x.finished = true;
    x.sessionId = str(e.session_id) ?? x.sessionId;
    x.durationMs = num(e.duration_ms) ?? x.durationMs;
    // Newer versions add usage in camelCase; accept the snake_case spelling too.
    const usage = obj(e.usage);
    if (usage) {
      x.input = num(usage.inputTokens) ?? num(usage.input_tokens);
      x.output = num(usage.outputTokens) ?? num(usage.output_tokens);
      x.cacheRead = num(usage.cacheReadTokens) ?? num(usage.cache_read_input_tokens);
      x.cacheWrite = num(usage.cacheWriteTokens) ?? num(usage.cache_creation_input_tokens);
    }
    x.costUsd = num(e.total_cost_usd) ?? x.costUsd;
    // `result` concatenates every assistant text of the run; the last assistant message is the answer.
    const result = str(e.result);
    if (result !== null) x.resultText = x.cap(result);
    x.isError = bool(e.is_error) ?? (typeof e.subtype === 'string' ? e.subtype !== 'success' : x.isError);
  }
};

/** opencode run --format json ({type, timestamp, sessionID, part} events). */
const readOpencode: Reader = (e, x) => {
  const part = obj(e.part);
  x.sessionId = x.sessionId ?? str(e.sessionID) ?? str(part?.sessionID);
  switch (e.type) {
    case 'step_finish': {
      // A step that ends in tool calls is followed by another step: only a step that stops is final.
      if (part?.reason !== 'tool-calls') x.finished = true;
      x.turnCount++;
      const tokens = obj(part?.tokens);
      if (tokens) {
        x.add('input', num(tokens.input));
        // Reasoning tokens are billed as output.
        const out = num(tokens.output);
        const reasoning = num(tokens.reasoning);
        x.add('output', out === null && reasoning === null ? null : (out ?? 0) + (reasoning ?? 0));
        const cache = obj(tokens.cache);
        x.add('cacheRead', num(cache?.read));
        x.add('cacheWrite', num(cache?.write));
      }
      x.add('costUsd', num(part?.cost));
      if (x.isError === null) x.isError = false;
      break;
    }
    case 'text':
      x.setLast(str(part?.text));
      break;
    case 'error':
      x.isError = true;
      break;
    case 'done':
      x.finished = true;
      break;
  }
};

/** gemini --output-format stream-json (and the single `--output-format json` object). */
const readGemini: Reader = (e, x) => {
  switch (e.type) {
    case 'init':
      x.sessionId = str(e.session_id) ?? x.sessionId;
      x.model = str(e.model) ?? x.model;
      break;
    case 'message':
      if (e.role === 'assistant' && typeof e.content === 'string') {
        // Deltas are appended; a whole message replaces the segment.
        x.appendSegment(e.content, e.delta === true);
      }
      break;
    case 'tool_use':
    case 'tool_result':
      x.endSegment();
      break;
    case 'result': {
      x.finished = true;
      x.isError = e.status === 'error' ? true : e.status === 'success' ? false : x.isError;
      const stats = obj(e.stats);
      if (stats) {
        x.input = num(stats.input_tokens);
        x.output = num(stats.output_tokens);
        x.cacheRead = num(stats.cached);
        x.durationMs = num(stats.duration_ms) ?? x.durationMs;
      }
      break;
    }
    case undefined: {
      // `--output-format json`: {session_id?, response, stats: {models: {<name>: {tokens: {...}}}}, error?}
      if (!('response' in e) && !('stats' in e) && !('error' in e)) break;
      x.finished = true;
      x.sessionId = str(e.session_id) ?? x.sessionId;
      const response = str(e.response);
      if (response !== null) x.resultText = x.cap(response);
      x.isError = obj(e.error) !== null;
      const models = obj(obj(e.stats)?.models);
      if (models) {
        const names = Object.keys(models);
        if (names.length === 1) x.model = names[0]!;
        for (const name of names) {
          const tokens = obj(obj(models[name])?.tokens);
          x.add('input', num(tokens?.prompt));
          x.add('output', num(tokens?.candidates));
          x.add('cacheRead', num(tokens?.cached));
        }
      }
      break;
    }
  }
};

const READERS: Record<TranscriptFormat, Reader> = {
  'claude-stream-json': readClaude,
  'codex-exec-jsonl': readCodex,
  'cursor-stream-json': readCursor,
  'opencode-run-json': readOpencode,
  'gemini-stream-json': readGemini,
};

/** Providers whose counted events are turns (codex: turns; opencode: steps, one per model call). */
const COUNTS_TURNS: ReadonlySet<TranscriptFormat> = new Set(['codex-exec-jsonl', 'opencode-run-json']);
/** Providers whose last assistant message is the answer even when a `result` text exists. */
const PREFERS_LAST_TEXT: ReadonlySet<TranscriptFormat> = new Set(['cursor-stream-json']);

export class AgentOutputParser {
  readonly provider: ProviderId;
  private readonly format: TranscriptFormat;
  private readonly reader: Reader;
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
    this.format = PROVIDERS[provider].transcript;
    this.reader = READERS[this.format];
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
    return { costUsd: x.costUsd, turns: x.turns ?? (COUNTS_TURNS.has(this.format) && x.turnCount > 0 ? x.turnCount : null) };
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
    this.reader(e, this.x);
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
      this.reader(e, this.x);
    } catch {
      // Not one object either: the per-line verdicts stand.
    }
  }

  private report(): AgentReport {
    const x = this.x;
    const c = this.counters;
    const turns = x.turns ?? (COUNTS_TURNS.has(this.format) && x.turnCount > 0 ? x.turnCount : null);
    const finalMessage = PREFERS_LAST_TEXT.has(this.format) ? (x.last() ?? x.resultText) : (x.resultText ?? x.last());
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
