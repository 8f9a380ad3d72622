/**
 * Renders an agent CLI's JSONL transcript (the run's stdout.log) as short lines a person can read:
 * the assistant's text, each tool call (`▸ bash: npm test`), a one-line summary of each tool
 * result, errors, and the final line with turns, duration, tokens and cost. `loops logs --pretty`
 * uses it; the raw file stays the record.
 *
 * Pure: no I/O, no clock. One function per transcript format reads the shapes documented in
 * docs/agents.md (the same ones ./parse.ts reads); each takes one parsed event and a small state
 * (tool calls already shown, text deltas being joined, sums over steps) and returns the lines it
 * renders to — none for events that say nothing new (a step start, a thinking delta). A line that
 * is not a JSON object is returned as it is.
 */
import type { TranscriptFormat } from './providers.js';
import { num, obj, str, type Json } from './json.js';

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

function seconds(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return `${m}m${s ? `${s}s` : ''}`;
}

function tokens(input: number | null, output: number | null, cached: number | null = null): string | null {
  if (input === null && output === null) return null;
  const cachedText = cached !== null && cached > 0 ? ` (${thousands(cached)} cached)` : '';
  return `tokens ${input === null ? '?' : thousands(input)} in${cachedText} / ${output === null ? '?' : thousands(output)} out`;
}

function cost(usd: number | null): string | null {
  return usd === null ? null : `$${usd.toFixed(4)}`;
}

/** `✓ done · 3 turns · 14.5s · tokens 9 in / 342 out · $0.0421`, or `✗ <what>` when it failed. */
function finalLine(ok: boolean, what: string | null, parts: Array<string | null>): RenderedLine {
  const head = ok ? '✓ done' : `✗ ${what ?? 'failed'}`;
  return { kind: ok ? 'final' : 'error', text: [head, ...parts.filter((p): p is string => p !== null)].join(' · ') };
}

/** `bash -lc 'npm test'` → `npm test` (how codex wraps its shell commands). */
function unwrapShell(command: string): string {
  const m = /^(?:\/bin\/)?(?:bash|sh|zsh)\s+-l?c\s+(['"])([\s\S]*)\1$/.exec(command.trim());
  return m ? m[2]! : command;
}

/** The most telling argument of a tool call: the command, path, pattern, URL or query; else its JSON. */
function argSummary(input: unknown, width: number): string {
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

function toolLine(name: string, args: string): RenderedLine {
  return { kind: 'tool', text: `▸ ${name.toLowerCase()}${args ? `: ${args}` : ''}` };
}

function resultLine(text: string, isError: boolean, width: number): RenderedLine {
  return isError ? { kind: 'error', text: `  ✗ ${firstLine(text, width)}` } : { kind: 'result', text: `  ↳ ${firstLine(text, width)}` };
}

function thinkingLine(text: string, width: number): RenderedLine {
  return { kind: 'thinking', text: `· ${oneLine(text.replace(/\*\*/g, ''), width)}` };
}

function infoLine(model: string | null, session: string | null): RenderedLine[] {
  const parts = [model ? `model ${model}` : null, session ? `session ${session}` : null].filter((p): p is string => p !== null);
  return parts.length ? [{ kind: 'info', text: `● ${parts.join(' · ')}` }] : [];
}

/** The text of a tool result's content: a string, or text blocks. */
function blocksText(content: unknown): string {
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

function errorMessage(value: unknown): string {
  if (typeof value === 'string') return value;
  const o = obj(value);
  if (!o) return 'error';
  const data = obj(o.data);
  const message = str(o.message) ?? str(data?.message);
  const name = str(o.name) ?? str(o.type);
  return [name, message].filter(Boolean).join(': ') || JSON.stringify(o);
}

// ── one function per transcript format ───────────────────────────────────────

/** claude -p --output-format stream-json (and aicopilot, modelled on it). */
export const renderClaudeEvent: EventRenderer = (e, s) => {
  switch (e.type) {
    case 'system':
      return e.subtype === 'init' ? infoLine(str(e.model), str(e.session_id)) : [];
    case 'assistant': {
      const content = obj(e.message)?.content;
      if (typeof content === 'string') return content.trim() ? [{ kind: 'text', text: content.trimEnd() }] : [];
      if (!Array.isArray(content)) return [];
      const out: RenderedLine[] = [];
      for (const b of content) {
        const block = obj(b);
        if (!block) continue;
        if (block.type === 'text' && typeof block.text === 'string' && block.text.trim()) out.push({ kind: 'text', text: block.text.trimEnd() });
        else if (block.type === 'thinking' && typeof block.thinking === 'string' && block.thinking.trim()) out.push(thinkingLine(block.thinking, s.width));
        else if (block.type === 'tool_use') out.push(toolLine(str(block.name) ?? 'tool', argSummary(block.input, s.width)));
      }
      return out;
    }
    case 'user': {
      // Tool results come back as user messages; a plain prompt is not repeated.
      const content = obj(e.message)?.content;
      if (!Array.isArray(content)) return [];
      const out: RenderedLine[] = [];
      for (const b of content) {
        const block = obj(b);
        if (block?.type === 'tool_result') out.push(resultLine(blocksText(block.content), block.is_error === true, s.width));
      }
      return out;
    }
    case 'result': {
      s.finished = true;
      const usage = obj(e.usage);
      const isError = e.is_error === true || (typeof e.subtype === 'string' && e.subtype !== 'success');
      const turns = num(e.num_turns);
      const duration = num(e.duration_ms);
      const lines = [
        finalLine(!isError, typeof e.subtype === 'string' && e.subtype !== 'success' ? e.subtype : 'failed', [
          turns === null ? null : `${turns} turn${turns === 1 ? '' : 's'}`,
          duration === null ? null : seconds(duration),
          usage ? tokens(num(usage.input_tokens), num(usage.output_tokens), num(usage.cache_read_input_tokens)) : null,
          cost(num(e.total_cost_usd) ?? num(e.cost_usd)),
        ]),
      ];
      // A failed run's result text says why (a successful one repeats the last message).
      const why = str(e.result);
      if (isError && why) lines.push({ kind: 'error', text: `  ${oneLine(why, s.width)}` });
      return lines;
    }
    default:
      return [];
  }
};

/** codex exec --json (and codewith, modelled on it): thread / turn / item events. */
export const renderCodexEvent: EventRenderer = (e, s) => {
  switch (e.type) {
    case 'thread.started':
      return infoLine(null, str(e.thread_id));
    case 'item.started': {
      const item = obj(e.item);
      if (!item) return [];
      const call = codexCall(item, s.width);
      if (call === null) return [];
      s.shown.add(String(item.id));
      return [call];
    }
    case 'item.completed': {
      const item = obj(e.item);
      if (!item) return [];
      const id = String(item.id);
      const started = s.shown.delete(id);
      switch (item.type) {
        case 'agent_message':
          return str(item.text) ? [{ kind: 'text', text: String(item.text).trimEnd() }] : [];
        case 'reasoning':
          return str(item.text) ? [thinkingLine(String(item.text), s.width)] : [];
        case 'command_execution': {
          const out: RenderedLine[] = started ? [] : [codexCall(item, s.width)!];
          const code = num(item.exit_code);
          const text = typeof item.aggregated_output === 'string' ? item.aggregated_output : '';
          const failed = item.status === 'failed' || (code !== null && code !== 0);
          out.push(resultLine(`${code === null ? '' : `exit ${code}: `}${firstLine(text, s.width)}`, failed, s.width));
          return out;
        }
        case 'file_change':
        case 'mcp_tool_call':
        case 'web_search': {
          const out: RenderedLine[] = started ? [] : [codexCall(item, s.width)!];
          if (item.status === 'failed') out.push(resultLine(errorMessage(item.error ?? 'failed'), true, s.width));
          return out;
        }
        case 'todo_list': {
          const items = Array.isArray(item.items) ? item.items : [];
          const done = items.filter((i) => obj(i)?.completed === true).length;
          return [{ kind: 'thinking', text: `· todo: ${items.length} item${items.length === 1 ? '' : 's'}, ${done} done` }];
        }
        case 'error':
          return [{ kind: 'error', text: `✗ ${oneLine(str(item.message) ?? 'error', s.width)}` }];
        default:
          return [];
      }
    }
    case 'turn.completed': {
      const usage = obj(e.usage);
      return [finalLine(true, null, [usage ? tokens(num(usage.input_tokens), num(usage.output_tokens), num(usage.cached_input_tokens)) : null])];
    }
    case 'turn.failed':
      return [{ kind: 'error', text: `✗ turn failed: ${oneLine(errorMessage(e.error), s.width)}` }];
    case 'error':
      return [{ kind: 'error', text: `✗ ${oneLine(str(e.message) ?? 'error', s.width)}` }];
    default:
      return [];
  }
};

/** The call line of a codex item, or null for items that are not calls. */
function codexCall(item: Json, width: number): RenderedLine | null {
  switch (item.type) {
    case 'command_execution':
      return toolLine('bash', oneLine(unwrapShell(typeof item.command === 'string' ? item.command : ''), width));
    case 'file_change': {
      const changes = Array.isArray(item.changes) ? item.changes.map(obj).filter((c): c is Json => c !== null) : [];
      const paths = changes.map((c) => `${str(c.kind) ?? 'edit'} ${str(c.path) ?? '?'}`);
      return toolLine('patch', oneLine(paths.join(', '), width));
    }
    case 'mcp_tool_call':
      return toolLine([str(item.server), str(item.tool)].filter(Boolean).join('.') || 'mcp', argSummary(item.arguments, width));
    case 'web_search':
      return toolLine('web_search', oneLine(str(item.query) ?? '', width));
    default:
      return null;
  }
}

/** cursor-agent --print --output-format stream-json. */
export const renderCursorEvent: EventRenderer = (e, s) => {
  switch (e.type) {
    case 'system':
      return e.subtype === 'init' ? infoLine(str(e.model), str(e.session_id)) : [];
    case 'assistant': {
      const content = obj(e.message)?.content;
      const text = typeof content === 'string' ? content : blocksText(content);
      return text.trim() ? [{ kind: 'text', text: text.trimEnd() }] : [];
    }
    case 'tool_call': {
      const id = String(e.call_id ?? '');
      const call = obj(e.tool_call);
      const key = call ? Object.keys(call)[0] : undefined;
      const body = key ? obj(call![key]) : null;
      const name = key ? key.replace(/ToolCall$/, '') : 'tool';
      const line = toolLine(key === 'function' ? (str(body?.name) ?? 'function') : name, argSummary(body?.args ?? body?.arguments, s.width));
      if (e.subtype === 'started') {
        s.shown.add(id);
        return [line];
      }
      if (e.subtype !== 'completed') return [];
      const out = s.shown.delete(id) ? [] : [line];
      const result = obj(body?.result);
      const success = obj(result?.success);
      if (success) {
        const code = num(success.exitCode);
        const text = str(success.stdout) ?? str(success.stderr) ?? str(success.content) ?? '';
        out.push(resultLine(`${code === null ? '' : `exit ${code}: `}${text ? firstLine(text, s.width) : 'ok'}`, code !== null && code !== 0, s.width));
      } else if (result) {
        const failure = result.failure ?? result.error ?? result.rejected ?? result;
        out.push(resultLine(errorMessage(failure), true, s.width));
      }
      return out;
    }
    case 'result': {
      s.finished = true;
      const usage = obj(e.usage);
      const isError = e.is_error === true || (typeof e.subtype === 'string' && e.subtype !== 'success');
      const duration = num(e.duration_ms);
      return [
        finalLine(!isError, typeof e.subtype === 'string' && e.subtype !== 'success' ? e.subtype : 'failed', [
          duration === null ? null : seconds(duration),
          usage ? tokens(num(usage.inputTokens) ?? num(usage.input_tokens), num(usage.outputTokens) ?? num(usage.output_tokens), num(usage.cacheReadTokens)) : null,
          cost(num(e.total_cost_usd)),
        ]),
      ];
    }
    default:
      // user (the prompt echoed), thinking deltas: nothing new to show.
      return [];
  }
};

/** opencode run --format json: {type, sessionID, part} events, summed over steps for the final line. */
export const renderOpencodeEvent: EventRenderer = (e, s) => {
  const session = s.announced ? null : str(e.sessionID);
  if (session !== null) {
    s.announced = true;
    return [...infoLine(null, session), ...renderOpencodeEvent(e, s)];
  }
  const part = obj(e.part);
  switch (e.type) {
    case 'text': {
      const text = str(part?.text);
      return text && text.trim() ? [{ kind: 'text', text: text.trimEnd() }] : [];
    }
    case 'reasoning': {
      const text = str(part?.text);
      return text ? [thinkingLine(text, s.width)] : [];
    }
    case 'tool_use': {
      const state = obj(part?.state);
      const out: RenderedLine[] = [toolLine(str(part?.tool) ?? 'tool', argSummary(state?.input, s.width))];
      if (state?.status === 'completed') out.push(resultLine(typeof state.output === 'string' ? state.output : '', false, s.width));
      else if (state?.status === 'error') out.push(resultLine(errorMessage(state.error ?? 'error'), true, s.width));
      return out;
    }
    case 'step_finish': {
      s.steps++;
      const t = obj(part?.tokens);
      const add = (a: number | null, b: number | null) => (b === null ? a : (a ?? 0) + b);
      if (t) {
        s.input = add(s.input, num(t.input));
        const out = num(t.output);
        const reasoning = num(t.reasoning);
        s.output = add(s.output, out === null && reasoning === null ? null : (out ?? 0) + (reasoning ?? 0));
      }
      s.cost = add(s.cost, num(part?.cost));
      // A step that ends in tool calls is followed by another one; only the last is final.
      return part?.reason === 'tool-calls' ? [] : opencodeFinal(s);
    }
    case 'done':
      return s.finished ? [] : opencodeFinal(s);
    case 'error':
      return [{ kind: 'error', text: `✗ ${oneLine(errorMessage(e.error ?? part), s.width)}` }];
    default:
      return [];
  }
};

function opencodeFinal(s: RenderState): RenderedLine[] {
  s.finished = true;
  return [finalLine(true, null, [s.steps ? `${s.steps} step${s.steps === 1 ? '' : 's'}` : null, tokens(s.input, s.output), cost(s.cost)])];
}

/** gemini --output-format stream-json: assistant deltas are joined into one message. */
export const renderGeminiEvent: EventRenderer = (e, s) => {
  if (e.type === 'message' && e.role === 'assistant' && typeof e.content === 'string') {
    if (e.delta === true) {
      s.pendingText += e.content;
      return [];
    }
    const out = flushGemini(s);
    if (e.content.trim()) out.push({ kind: 'text', text: e.content.trimEnd() });
    return out;
  }
  const out = flushGemini(s);
  switch (e.type) {
    case 'init':
      out.push(...infoLine(str(e.model), str(e.session_id)));
      break;
    case 'tool_use':
      out.push(toolLine(str(e.tool_name) ?? 'tool', argSummary(e.parameters, s.width)));
      break;
    case 'tool_result': {
      const failed = e.status === 'error';
      out.push(resultLine(failed ? errorMessage(e.error ?? e.output ?? 'error') : typeof e.output === 'string' ? e.output : '', failed, s.width));
      break;
    }
    case 'error':
      out.push({ kind: 'error', text: `✗ ${oneLine(errorMessage(e.message ?? e.error ?? e), s.width)}` });
      break;
    case 'result': {
      s.finished = true;
      const stats = obj(e.stats);
      const duration = num(stats?.duration_ms);
      const calls = num(stats?.tool_calls);
      out.push(
        finalLine(e.status !== 'error', 'failed', [
          duration === null ? null : seconds(duration),
          stats ? tokens(num(stats.input_tokens), num(stats.output_tokens), num(stats.cached)) : null,
          calls === null ? null : `${calls} tool call${calls === 1 ? '' : 's'}`,
        ]),
      );
      if (e.status === 'error' && e.error !== undefined) out.push({ kind: 'error', text: `  ${oneLine(errorMessage(e.error), s.width)}` });
      break;
    }
    case undefined:
      // `--output-format json`: one object with the response and stats.
      if (typeof e.response === 'string' && e.response.trim()) out.push({ kind: 'text', text: e.response.trimEnd() });
      if (e.error !== undefined && e.error !== null) out.push({ kind: 'error', text: `✗ ${oneLine(errorMessage(e.error), s.width)}` });
      break;
  }
  return out;
};

function flushGemini(s: RenderState): RenderedLine[] {
  const text = s.pendingText;
  s.pendingText = '';
  return text.trim() ? [{ kind: 'text', text: text.trimEnd() }] : [];
}

export const EVENT_RENDERERS: Readonly<Record<TranscriptFormat, EventRenderer>> = {
  'claude-stream-json': renderClaudeEvent,
  'codex-exec-jsonl': renderCodexEvent,
  'cursor-stream-json': renderCursorEvent,
  'opencode-run-json': renderOpencodeEvent,
  'gemini-stream-json': renderGeminiEvent,
};

/**
 * Renders a transcript line by line (lines without their newline). Lines that are not a JSON
 * object — warnings, progress text, a line cut short — are returned as they are (`raw`).
 */
export class TranscriptRenderer {
  private readonly state: RenderState;
  private readonly render: EventRenderer;

  constructor(format: TranscriptFormat, options: RenderOptions = {}) {
    this.state = newRenderState(options);
    this.render = EVENT_RENDERERS[format];
  }

  line(text: string): RenderedLine[] {
    const trimmed = text.trim();
    if (trimmed === '') return [];
    let event: Json | null = null;
    if (trimmed[0] === '{') {
      try {
        event = obj(JSON.parse(trimmed));
      } catch {
        event = null;
      }
    }
    if (event === null) return [...this.flush(), { kind: 'raw', text: text.replace(/\r$/, '') }];
    return this.render(event, this.state);
  }

  /** What is still held (joined text deltas) at the end of the transcript. */
  end(): RenderedLine[] {
    return this.flush();
  }

  private flush(): RenderedLine[] {
    return flushGemini(this.state);
  }
}

/** Renders a whole transcript at once (tests, small files). */
export function renderTranscript(format: TranscriptFormat, text: string, options: RenderOptions = {}): RenderedLine[] {
  const renderer = new TranscriptRenderer(format, options);
  const out: RenderedLine[] = [];
  for (const line of text.split('\n')) out.push(...renderer.line(line));
  out.push(...renderer.end());
  return out;
}
