/**
 * src/cli/agent-report — rendering an agent CLI's JSONL transcript (a run's stdout.log) as short
 * lines a person can read: the assistant's text, each tool call (`▸ bash: npm test`), a one-line
 * summary of each tool result, errors, and the final line with turns, duration, tokens and cost.
 * `loops logs --pretty` uses it; the raw file stays the record.
 *
 * - index.ts   `TranscriptRenderer` (line by line, as a run goes) and `renderTranscript` (whole);
 * - formats.ts one renderer per transcript format;
 * - lines.ts   the rendered line, the renderer state and the summaries they share.
 *
 * Presentation only, so it lives in src/cli: the runtime parses the same output into the run's
 * report (src/runtime/agents/parse.ts) and never renders it. Pure: no I/O, no clock. A line that is
 * not a JSON object is returned as it is.
 */
import type { TranscriptFormat } from '../../runtime/agents/index.js';
import { obj, type Json } from '../../runtime/agents/json.js';
import { EVENT_RENDERERS, flushGemini } from './formats.js';
import { newRenderState, type EventRenderer, type RenderedLine, type RenderOptions, type RenderState } from './lines.js';

export { EVENT_RENDERERS, renderClaudeEvent, renderCodexEvent, renderCursorEvent, renderGeminiEvent, renderOpencodeEvent } from './formats.js';
export { firstLine, newRenderState, oneLine, thousands, type EventRenderer, type RenderedKind, type RenderedLine, type RenderOptions, type RenderState } from './lines.js';

/**
 * Renders a transcript line by line (lines without their newline). Lines that are not a JSON
 * object — warnings, progress text, a line cut short — are returned as they are (`raw`).
 */
export class TranscriptRenderer {
  private readonly state: RenderState;
  /** Null for a format with no renderer: its lines are shown as they are. */
  private readonly render: EventRenderer | null;

  constructor(format: TranscriptFormat, options: RenderOptions = {}) {
    this.state = newRenderState(options);
    this.render = EVENT_RENDERERS[format] ?? null;
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
    if (event === null || this.render === null) return [...this.flush(), { kind: 'raw', text: text.replace(/\r$/, '') }];
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
