/**
 * The extraction state an agent CLI's output is read into, shared by every provider's reader
 * (`transcript.read` in ./providers/<id>.ts): model, session, turns, tokens, cost, the final message
 * (capped), whether the CLI called it an error and the CLI's own error. The line machinery that
 * feeds it is ./parse.ts.
 */
import { num, obj, str, type Json } from './json.js';

/** The error an agent CLI reported in its own output (an API error, a turn limit, a failed turn). */
export interface AgentError {
  /** What the CLI said, on one line (capped): `Overloaded`, `error_max_turns after 12 turns`. */
  message: string;
  /** The CLI's or the API's error type or subtype (`overloaded_error`, `error_max_turns`), or null. */
  type: string | null;
  /** The HTTP status of an API error (`529`), or null. */
  status: number | null;
}

/** Longest error message kept, in characters. */
const MAX_ERROR_CHARS = 2000;

/** An error's text on one line, capped. */
export function errorText(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS)}…` : line;
}

/**
 * An Anthropic / OpenAI-style API error text: `API Error: 529 {"type":"error","error":{"type":
 * "overloaded_error","message":"Overloaded"}}`, `unexpected status 401 Unauthorized: {...}` —
 * the HTTP status, the error type and message of the JSON body when it has one; null when the text
 * names no status.
 */
export function apiErrorOf(text: string): AgentError | null {
  const m = /(?:API Error:?|unexpected status|last status:?|status(?: code)?:?)\s*(\d{3})\b/i.exec(text);
  if (!m) return null;
  const status = Number(m[1]);
  const brace = text.indexOf('{', m.index);
  if (brace !== -1) {
    try {
      const body = obj(JSON.parse(text.slice(brace)));
      const inner = obj(body?.error) ?? body;
      const message = str(inner?.message);
      if (message !== null) return { message: errorText(message), type: str(inner?.type) ?? str(inner?.code), status };
    } catch {
      // Not JSON after all: the whole text is the message.
    }
  }
  return { message: errorText(text), type: null, status };
}

/** A `{message, type?, code?, status?}` error object (gemini, opencode's data), or null. */
export function errorObject(value: unknown): AgentError | null {
  const e = obj(value);
  if (!e) return typeof value === 'string' && value.trim() !== '' ? { message: errorText(value), type: null, status: null } : null;
  const data = obj(e.data);
  const message = str(e.message) ?? str(data?.message);
  const type = str(e.type) ?? str(e.name) ?? null;
  const status = httpStatus(e.status) ?? httpStatus(e.statusCode) ?? httpStatus(e.code) ?? httpStatus(data?.statusCode);
  if (message === null) return type === null ? null : { message: type, type, status };
  return { message: errorText(message), type, status };
}

function httpStatus(value: unknown): number | null {
  const n = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : num(value);
  return n !== null && Number.isInteger(n) && n >= 100 && n <= 599 ? n : null;
}

/** The text blocks of a claude/cursor message `content` array (or a plain string), joined. */
export function contentText(content: unknown): string | null {
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
export class Extract {
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
  /** The CLI's own error: the last final one (a failed result or turn) wins over interim ones. */
  error: AgentError | null = null;
  /** `error` came from a final event (a later interim error event does not replace it). */
  private errorFinal = false;
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
  /**
   * Records the CLI's own error and marks the run an error. A final error (from the event that ends
   * the turn) replaces any earlier one; an interim error event (codex `error`, gemini `error`)
   * replaces only another interim one.
   */
  fail(error: AgentError | null, final: boolean): void {
    this.isError = true;
    if (error === null || (this.errorFinal && !final)) return;
    this.error = error;
    this.errorFinal = final;
  }
  /** The turn ended well after all: interim errors (a retried request) no longer count. */
  succeed(): void {
    this.isError = false;
    this.error = null;
    this.errorFinal = false;
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

/** Reads one JSON event of a provider's output into the extraction state. */
export type Reader = (event: Json, x: Extract) => void;
