/**
 * One renderer per transcript format (the `transcript.format` of each provider's file in
 * src/runtime/agents/providers): each takes one parsed event and the renderer's state (tool calls
 * already shown, text deltas being joined, sums over steps) and returns the lines it renders to —
 * none for events that say nothing new (a step start, a thinking delta). They read the shapes
 * documented in docs/agents.md, the same ones the providers' readers read.
 *
 * A format without a renderer here is shown as it is (its JSONL lines, `raw`), so a new provider
 * works with `loops logs --pretty` before it has one.
 */
import type { TranscriptFormat } from '../../runtime/agents/index.js';
import { num, obj, str, type Json } from '../../runtime/agents/json.js';
import {
  argSummary,
  blocksText,
  cost,
  errorMessage,
  finalLine,
  firstLine,
  infoLine,
  oneLine,
  resultLine,
  seconds,
  thinkingLine,
  tokens,
  toolLine,
  unwrapShell,
  type EventRenderer,
  type RenderedLine,
  type RenderState,
} from './lines.js';

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

/** Gemini: the assistant text deltas joined so far, as one line (the state is emptied). */
export function flushGemini(s: RenderState): RenderedLine[] {
  const text = s.pendingText;
  s.pendingText = '';
  return text.trim() ? [{ kind: 'text', text: text.trimEnd() }] : [];
}

export const EVENT_RENDERERS: Readonly<Partial<Record<TranscriptFormat, EventRenderer>>> = {
  'claude-stream-json': renderClaudeEvent,
  'codex-exec-jsonl': renderCodexEvent,
  'cursor-stream-json': renderCursorEvent,
  'opencode-run-json': renderOpencodeEvent,
  'gemini-stream-json': renderGeminiEvent,
};
