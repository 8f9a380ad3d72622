/**
 * The pieces every transcript renderer uses: the rendered line and its kinds, the state a renderer
 * keeps between events, and the one-line summaries (a tool call's telling argument, a result's
 * first line, the final line with turns, duration, tokens and cost). Pure: no I/O, no clock.
 */
import { num, obj, str, type Json } from '../../runtime/agents/json.js';

export type RenderedKind = 'text' | 'thinking' | 'tool' | 'result' | 'error' | 'final' | 'info' | 'raw';

export interface RenderedLine {
  kind: RenderedKind;
  /** What to print (may span several lines for an assistant's text). */
  text: string;
}

export interface RenderOptions {
  /** Longest one-line summary (tool calls, results, thinking), in characters (default 160). */
  width?: number;
}

/** What a renderer remembers between events. */
export interface RenderState {
  width: number;
  /** Tool calls already shown when they started (codex items, cursor calls), so the end shows only the result. */
  shown: Set<string>;
  /** Gemini: assistant text deltas being joined into one message. */
  pendingText: string;
  /** opencode: sums over the steps, for the final line. */
  steps: number;
  input: number | null;
  output: number | null;
  cost: number | null;
  /** A final line was rendered (opencode prints `done` after the last step_finish). */
  finished: boolean;
  /** opencode: the session was shown (it is on every event; there is no init event). */
  announced: boolean;
}

export function newRenderState(options: RenderOptions = {}): RenderState {
  return {
    width: Math.max(20, options.width ?? 160),
    shown: new Set(),
    pendingText: '',
    steps: 0,
    input: null,
    output: null,
    cost: null,
    finished: false,
    announced: false,
  };
}

export type EventRenderer = (event: Json, state: RenderState) => RenderedLine[];

// ── helpers ──────────────────────────────────────────────────────────────────

/** Whitespace collapsed, cut to `width` characters with `…`. */
export function oneLine(text: string, width: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const chars = [...flat];
  return chars.length > width ? `${chars.slice(0, width - 1).join('')}…` : flat;
}

/** The first non-empty line of `text`, cut to `width`, and how many non-empty lines follow it. */
export function firstLine(text: string, width: number): string {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) return '(no output)';
  const more = lines.length - 1;
  return `${oneLine(lines[0]!, width)}${more > 0 ? ` (+${more} line${more > 1 ? 's' : ''})` : ''}`;
}

/** 12345 → `12,345`. */
export function thousands(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export function seconds(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return `${m}m${s ? `${s}s` : ''}`;
}

export function tokens(input: number | null, output: number | null, cached: number | null = null): string | null {
  if (input === null && output === null) return null;
  const cachedText = cached !== null && cached > 0 ? ` (${thousands(cached)} cached)` : '';
  return `tokens ${input === null ? '?' : thousands(input)} in${cachedText} / ${output === null ? '?' : thousands(output)} out`;
}

export function cost(usd: number | null): string | null {
  return usd === null ? null : `$${usd.toFixed(4)}`;
}

/** `✓ done · 3 turns · 14.5s · tokens 9 in / 342 out · $0.0421`, or `✗ <what>` when it failed. */
export function finalLine(ok: boolean, what: string | null, parts: Array<string | null>): RenderedLine {
  const head = ok ? '✓ done' : `✗ ${what ?? 'failed'}`;
  return { kind: ok ? 'final' : 'error', text: [head, ...parts.filter((p): p is string => p !== null)].join(' · ') };
}

/** `bash -lc 'npm test'` → `npm test` (how codex wraps its shell commands). */
export function unwrapShell(command: string): string {
  const m = /^(?:\/bin\/)?(?:bash|sh|zsh)\s+-l?c\s+(['"])([\s\S]*)\1$/.exec(command.trim());
  return m ? m[2]! : command;
}

/** The most telling argument of a tool call: the command, path, pattern, URL or query; else its JSON. */
export function argSummary(input: unknown, width: number): string {
  if (typeof input === 'string') return oneLine(input, width);
  const o = obj(input);
  if (!o) return '';
  for (const key of ['command', 'cmd', 'file_path', 'filePath', 'path', 'pattern', 'url', 'query', 'description', 'prompt']) {
    const v = o[key];
    if (typeof v === 'string' && v.trim() !== '') return oneLine(key === 'command' || key === 'cmd' ? unwrapShell(v) : v, width);
    if (Array.isArray(v) && v.every((x) => typeof x === 'string') && v.length) return oneLine(v.join(' '), width);
  }
  const json = JSON.stringify(o);
  return json === '{}' ? '' : oneLine(json, width);
}

export function toolLine(name: string, args: string): RenderedLine {
  return { kind: 'tool', text: `▸ ${name.toLowerCase()}${args ? `: ${args}` : ''}` };
}

export function resultLine(text: string, isError: boolean, width: number): RenderedLine {
  return isError ? { kind: 'error', text: `  ✗ ${firstLine(text, width)}` } : { kind: 'result', text: `  ↳ ${firstLine(text, width)}` };
}

export function thinkingLine(text: string, width: number): RenderedLine {
  return { kind: 'thinking', text: `· ${oneLine(text.replace(/\*\*/g, ''), width)}` };
}

export function infoLine(model: string | null, session: string | null): RenderedLine[] {
  const parts = [model ? `model ${model}` : null, session ? `session ${session}` : null].filter((p): p is string => p !== null);
  return parts.length ? [{ kind: 'info', text: `● ${parts.join(' · ')}` }] : [];
}

/** The text of a tool result's content: a string, or text blocks. */
export function blocksText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? '' : JSON.stringify(content);
  return content
    .map((b) => {
      const block = obj(b);
      return block && typeof block.text === 'string' ? block.text : '';
    })
    .filter(Boolean)
    .join('\n');
}

export function errorMessage(value: unknown): string {
  if (typeof value === 'string') return value;
  const o = obj(value);
  if (!o) return 'error';
  const data = obj(o.data);
  const message = str(o.message) ?? str(data?.message);
  const name = str(o.name) ?? str(o.type);
  return [name, message].filter(Boolean).join(': ') || JSON.stringify(o);
}
