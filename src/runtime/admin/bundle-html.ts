/**
 * `loops export --html`: one self-contained page (inline CSS and script, no network, no fonts to
 * fetch) of a bundle: a timeline (a command run is one bar, a workflow run one bar per step), the
 * events in log order, and a slider that shows the stream's state value and context after any
 * event. The states are folded here, at export time, from the masked events, and embedded as JSON
 * (every `<` escaped, so no `</script>` in the data can end the script): each stream's initial
 * context, then per event only what it changed (`contextChanges`, a workflow run's steps one by
 * one), which the page applies in order — so the page grows with the events, not with events ×
 * context (a 500-step run's page was 414 MB when every event carried its whole context).
 */
import type { Json } from '../../events/types.js';
import { contextChanges } from '../../machines/context-diff.js';
import { fold, initialSnapshot, stateOf } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import type { CollectedBundle } from './bundle.js';
import type { BundleEvent } from './bundle-format.js';

/** One bar of the timeline: a run, or a step of a workflow run. */
export interface TimelineBar {
  row: string;
  label: string;
  start: string;
  end: string;
  status: string;
}

/** What the page shows, computed at export time. */
export interface PageData {
  title: string;
  createdAt: string;
  bars: TimelineBar[];
  events: Array<{ at: string; stream: string; version: number; type: string }>;
  /** Each stream's context before its first event (streams whose machine this loops knows). */
  initial: Record<string, unknown>;
  /**
   * Per event (same index): its stream's state value after it, and the context changes it made —
   * `[path]` removed, `[path, value]` set (`applyChanges`); null when its stream was not folded.
   */
  states: Array<{ state: Json; changes: ContextChangeEntry[] | null }>;
}

/** One context change as the page carries it: `[path]` (removed) or `[path, value]` (the new value). */
export type ContextChangeEntry = [string] | [string, unknown];

/**
 * A context after `changes`, from the one before (which it does not modify). A path is a
 * top-level key, or `key.entry` inside a keyed collection: a map keyed by id, or a list of entries
 * naming their `id` (a workflow run's steps), whose entry is replaced, appended or removed.
 * Self-contained on purpose: the page runs this very function (its source is embedded), so the
 * page and the tests reconstruct contexts the same way.
 */
export function applyChanges(before: unknown, changes: ReadonlyArray<[string] | [string, unknown]>): unknown {
  if (changes.length === 0) return before;
  const ctx: Record<string, unknown> = { ...((before ?? {}) as Record<string, unknown>) };
  for (const change of changes) {
    const path = change[0];
    const dot = path.indexOf('.');
    if (dot < 0) {
      if (change.length > 1) ctx[path] = change[1];
      else delete ctx[path];
      continue;
    }
    const key = path.slice(0, dot);
    const id = path.slice(dot + 1);
    const current = ctx[key];
    if (Array.isArray(current)) {
      const list = current.slice() as Array<{ id: string }>;
      const at = list.findIndex((entry) => entry.id === id);
      if (change.length > 1) {
        const entry = { id, ...(change[1] as object) };
        if (at >= 0) list[at] = entry;
        else list.push(entry);
      } else if (at >= 0) list.splice(at, 1);
      ctx[key] = list;
    } else {
      const map: Record<string, unknown> = { ...((current ?? {}) as Record<string, unknown>) };
      if (change.length > 1) map[id] = change[1];
      else delete map[id];
      ctx[key] = map;
    }
  }
  return ctx;
}

const STEP_START = new Set(['step.spawn_requested', 'step.spawned']);
const STEP_END = new Set(['step.exited', 'step.abandoned', 'step.spawn_failed', 'step.skipped']);

/** The bars, the events in log order and the state after each. */
export function pageData(bundle: CollectedBundle): PageData {
  const events = bundle.entries.filter((e): e is BundleEvent => e.kind === 'event');
  const states = new Map<BundleEvent, { state: Json; changes: ContextChangeEntry[] }>();
  const initial: Record<string, unknown> = {};
  for (const s of bundle.header.streams) {
    const list = events.filter((e) => e.stream === s.streamId);
    const machine = s.machineId !== null && s.machineVersion !== null ? getMachine({ id: s.machineId, version: s.machineVersion }) : undefined;
    if (!machine) continue;
    initial[s.streamId] = initialSnapshot(machine).context as unknown;
    fold(machine, list).steps.forEach((step, i) => {
      const changes = contextChanges(step.before.context, step.after.context).map((c): ContextChangeEntry => (c.after === undefined ? [c.path] : [c.path, c.after]));
      states.set(list[i]!, { state: stateOf(step.after), changes });
    });
  }
  const ordered = [...events].sort((a, b) => a.position - b.position);
  const { subject } = bundle.header;
  return {
    title: `${subject.kind === 'wfrun' ? 'workflow run' : subject.kind} ${subject.name ? `${subject.name} ` : ''}${subject.id}`,
    createdAt: bundle.header.createdAt,
    bars: timeline(events, states),
    events: ordered.map((e) => ({ at: e.at, stream: e.stream, version: e.version, type: e.type })),
    initial,
    states: ordered.map((e) => states.get(e) ?? { state: e.state, changes: null }),
  };
}

function timeline(events: readonly BundleEvent[], states: Map<BundleEvent, { state: Json }>): TimelineBar[] {
  const bars: TimelineBar[] = [];
  const streams = [...new Set(events.map((e) => e.stream))];
  for (const stream of streams) {
    const list = events.filter((e) => e.stream === stream);
    const last = list[list.length - 1]!;
    if (stream.startsWith('run:')) {
      bars.push({ row: stream, label: stream.slice(4), start: list[0]!.at, end: last.at, status: String(states.get(last)?.state ?? last.state ?? '') });
    } else if (stream.startsWith('wfrun:')) {
      const steps = new Map<string, TimelineBar>();
      for (const e of list) {
        const d = e.data as { stepId?: string; exitCode?: number | null } | null;
        if (!d?.stepId || !(STEP_START.has(e.type) || STEP_END.has(e.type))) continue;
        const bar = steps.get(d.stepId) ?? { row: stream, label: d.stepId, start: e.at, end: e.at, status: 'running' };
        bar.end = e.at;
        if (STEP_END.has(e.type)) bar.status = e.type === 'step.exited' ? (d.exitCode === 0 ? 'succeeded' : 'failed') : e.type.slice(5);
        steps.set(d.stepId, bar);
      }
      bars.push(...steps.values());
    }
  }
  return bars;
}

/** JSON safe inside a <script> element: every `<` escaped (no `</script>`, no `<!--`). */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The page: a template with the data embedded; nothing in it loads anything. */
export function renderBundleHtml(bundle: CollectedBundle): string {
  const data = pageData(bundle);
  return `<!doctype html><!-- loops export -->
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>loops — ${escapeHtml(data.title)}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(data.title)}</h1>
<p class="meta">exported ${escapeHtml(data.createdAt)} · ${data.events.length} event(s) · <code>loops verify</code> checks the bundle this page was made from</p>
<section><h2>Timeline</h2><div id="timeline"></div></section>
<section><h2>State at event <span id="pos"></span></h2>
<input id="slider" type="range" min="0" max="${Math.max(0, data.events.length - 1)}" value="${Math.max(0, data.events.length - 1)}">
<div id="current"></div><pre id="state"></pre></section>
<section><h2>Events</h2><table id="events"><thead><tr><th>#</th><th>at</th><th>stream</th><th>v</th><th>type</th></tr></thead><tbody></tbody></table></section>
<script type="application/json" id="data">${scriptJson(data)}</script>
<script>const applyChanges = ${applyChanges.toString()};
${SCRIPT}</script>
</body></html>`;
}

const CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d232a;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:20px 0 8px}.meta{color:#5b6570;margin:0}
#timeline{position:relative;border-left:1px solid #aab;padding:4px 0}
.row{display:flex;align-items:center;height:24px}.row .label{width:180px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:monospace;font-size:12px;padding-right:8px}
.track{position:relative;flex:1;height:16px;background:#f1f3f5}
.bar{position:absolute;top:0;height:16px;min-width:3px;border-radius:3px;background:#2f80ed}
.bar.succeeded{background:#27ae60}.bar.failed,.bar.timed_out,.bar.abandoned,.bar.spawn_failed{background:#d64545}.bar.skipped{background:#b0b7bf}
#cursor{position:absolute;top:0;bottom:0;width:2px;background:#e67e22;pointer-events:none}
.axis{display:flex;justify-content:space-between;color:#5b6570;font-size:12px;margin-left:180px}
#slider{width:100%}#current{font-family:monospace;margin:6px 0}
pre{background:#f6f8fa;padding:8px;max-height:360px;overflow:auto;font-size:12px}
table{border-collapse:collapse;font-size:12px;font-family:monospace}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee}
tr.on{background:#fff3d6}
`;

const SCRIPT = `
const data = JSON.parse(document.getElementById('data').textContent);
const ms = (t) => Date.parse(t);
// The axis spans the bars (a definition recorded long before would squeeze them); events outside sit at its ends.
const times = data.bars.length ? data.bars.flatMap((b) => [ms(b.start), ms(b.end)]) : data.events.map((e) => ms(e.at));
const t0 = Math.min(...times), t1 = Math.max(...times), span = Math.max(1, t1 - t0);
const pct = (t) => Math.min(100, Math.max(0, ((ms(t) - t0) / span) * 100));
const el = (tag, props, text) => { const e = document.createElement(tag); Object.assign(e, props || {}); if (text !== undefined) e.textContent = text; return e; };

const timeline = document.getElementById('timeline');
for (const bar of data.bars) {
  const row = el('div', { className: 'row' });
  row.append(el('div', { className: 'label', title: bar.row }, bar.label));
  const track = el('div', { className: 'track' });
  const b = el('div', { className: 'bar ' + bar.status, title: bar.label + ': ' + bar.status + ' ' + bar.start + ' → ' + bar.end });
  b.dataset.step = bar.label;
  b.style.left = pct(bar.start) + '%';
  b.style.width = Math.max(0, pct(bar.end) - pct(bar.start)) + '%';
  track.append(b);
  row.append(track);
  timeline.append(row);
}
const cursor = el('div', { id: 'cursor' });
timeline.append(cursor);
const axis = el('div', { className: 'axis' });
axis.append(el('span', {}, new Date(t0).toISOString()), el('span', {}, new Date(t1).toISOString()));
timeline.after(axis);

const tbody = document.querySelector('#events tbody');
const rows = data.events.map((e, i) => {
  const tr = el('tr');
  for (const v of [i + 1, e.at, e.stream, e.version, e.type]) tr.append(el('td', {}, String(v)));
  tr.addEventListener('click', () => { slider.value = String(i); show(i); });
  tbody.append(tr);
  return tr;
});

// Each event's context: its stream's context before it with the event's changes applied (entries
// not changed are shared, so this holds about what the changes weigh).
const current = new Map();
const contexts = data.states.map((s, i) => {
  if (s.changes === null) return null;
  const stream = data.events[i].stream;
  const ctx = applyChanges(current.has(stream) ? current.get(stream) : data.initial[stream], s.changes);
  current.set(stream, ctx);
  return ctx;
});

const slider = document.getElementById('slider');
let on = null;
function show(i) {
  const e = data.events[i], s = data.states[i];
  if (!e) return;
  document.getElementById('pos').textContent = (i + 1) + ' of ' + data.events.length;
  document.getElementById('current').textContent = e.at + '  ' + e.stream + ' v' + e.version + '  ' + e.type + '  →  ' + JSON.stringify(s.state);
  document.getElementById('state').textContent = JSON.stringify({ state: s.state, context: contexts[i] }, null, 2);
  const label = timeline.querySelector('.label');
  const left = label ? label.offsetWidth : 0;
  cursor.style.left = 'calc(' + left + 'px + (100% - ' + left + 'px) * ' + (pct(e.at) / 100) + ')';
  if (on) on.classList.remove('on');
  on = rows[i];
  on.classList.add('on');
}
slider.addEventListener('input', () => show(Number(slider.value)));
show(Number(slider.value));
`;
