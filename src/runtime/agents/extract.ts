/**
 * The extraction state an agent CLI's output is read into, shared by every provider's reader
 * (`transcript.read` in ./providers/<id>.ts): model, session, turns, tokens, cost, the final message
 * (capped) and whether the CLI called it an error. The line machinery that feeds it is ./parse.ts.
 */
import { obj, type Json } from './json.js';

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

/** Reads one JSON event of a provider's output into the extraction state. */
export type Reader = (event: Json, x: Extract) => void;
