/**
 * How a replayed step reads in a terminal — shared by `loops replay` (the sequence), its stepper
 * and `loops diff`. Pure: strings in, lines out.
 *
 * A change shows what changed, not the whole value: a field that holds an object on both sides
 * (a workflow run's `steps.lint`, a run's `target`) lists only its sub-fields that changed
 * (`status "running" → "failed", exitCode null → 3`); a value is cut only past 500 characters, and
 * then by its head and tail (an output tail's end is what matters).
 */
import type { ContextChange, ReplayStep } from '../runtime/admin/replay.js';
import { paint, statusColor } from './render.js';

/** Characters of one value shown before it is cut to its head and tail. */
const VALUE_MAX = 500;

/** A state value as text (`running`, or JSON for a nested state). */
export function stateText(state: unknown): string {
  return typeof state === 'string' ? state : JSON.stringify(state);
}

/** One value as text: JSON, `∅` for none, cut to its head and tail past `max` characters. */
export function valueText(value: unknown, max = VALUE_MAX): string {
  if (value === undefined) return '∅';
  const text = JSON.stringify(value) ?? String(value);
  if (text.length <= max) return text;
  const half = Math.floor((max - 30) / 2);
  return `${text.slice(0, half)}…${text.slice(-half)} (${text.length} characters)`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The sub-fields of two objects that differ: `key before → after`, in key order. */
export function subChanges(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const out: string[] = [];
  const keys = Object.keys(before);
  for (const key of Object.keys(after)) if (!(key in before)) keys.push(key);
  for (const key of keys) {
    const a = before[key];
    const b = after[key];
    if (a === b || JSON.stringify(a) === JSON.stringify(b)) continue;
    out.push(`${key} ${valueText(a)} → ${valueText(b)}`);
  }
  return out;
}

/** One change, compactly: `path: before → after`, or the sub-fields that changed. */
export function changeText(change: ContextChange): string {
  if (isPlainObject(change.before) && isPlainObject(change.after)) {
    return `${change.path}: ${subChanges(change.before, change.after).join(', ')}`;
  }
  return `${change.path}: ${valueText(change.before)} → ${valueText(change.after)}`;
}

/** The step's first line: mark, version, time, event, state before → after. */
export function stepHeader(step: ReplayStep, color: boolean): string {
  const after = stateText(step.stateAfter);
  const mark = step.matches ? paint(color, 'green', '✓') : paint(color, 'red', '✗');
  return `${mark} v${step.version}  ${step.at}  ${paint(color, 'bold', step.type)}  ${stateText(step.stateBefore)} → ${paint(color, statusColor(after), after)}`;
}

/** Why the step did not match, as lines (none when it did). */
export function mismatchLines(step: ReplayStep, color: boolean): string[] {
  if (step.matches) return [];
  if (!step.accepted) return [paint(color, 'red', `      the machine does not accept ${step.type} in state ${stateText(step.stateBefore)}`)];
  const out: string[] = [];
  if (step.recordedState !== null && JSON.stringify(step.recordedState) !== JSON.stringify(step.stateAfter)) {
    out.push(paint(color, 'red', `      recorded state was ${JSON.stringify(step.recordedState)}`));
  }
  const m = step.fieldMismatch;
  if (m) {
    const recorded = m.recordedHash === null ? 'no change' : m.recordedHash === '-' ? 'removed' : `hash ${m.recordedHash}`;
    out.push(paint(color, 'red', `      field ${m.path} differs: the log recorded ${recorded}${'recorded' in m ? ` (${valueText(m.recorded)})` : ''}`));
    out.push(paint(color, 'red', `        replayed ${m.replayedHash === null ? 'no change' : `${valueText(m.replayed)} (hash ${m.replayedHash})`}`));
  }
  return out;
}

/** A step as the sequence prints it: its header, its changes, its effects, why it did not match. */
export function stepLines(step: ReplayStep, color: boolean): string[] {
  const out = [stepHeader(step, color)];
  for (const change of step.changes) out.push(`      ${changeText(change)}`);
  if (step.actions.length) out.push(paint(color, 'gray', `      effects: ${step.actions.join(', ')} (not executed)`));
  out.push(...mismatchLines(step, color));
  return out;
}

/** The output tails an event carries (`process.exited`, `step.exited`), when it carries one. */
export function tailOf(data: unknown): { stdout: string; stderr: string } | null {
  if (!isPlainObject(data)) return null;
  const { stdout, stderr } = data;
  if (typeof stdout !== 'string' && typeof stderr !== 'string') return null;
  return { stdout: typeof stdout === 'string' ? stdout : '', stderr: typeof stderr === 'string' ? stderr : '' };
}

/** Who acted, in one phrase: `run-now by ana@box, loops 0.1.0`. */
export function byText(by: ReplayStep['by']): string | null {
  return by ? `${by.source} by ${by.user}@${by.host}, loops ${by.loops}` : null;
}
