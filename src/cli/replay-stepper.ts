/**
 * The interactive replay stepper (`loops replay` on a terminal): forward and back through a
 * stream's transitions, one screen each — the state before → after, what changed, the effects the
 * machine asked for, who acted, and the output tail the event carries.
 *
 * `renderFrame` is pure (a frame is a string); `runStepper` is the key loop, reading any stream of
 * key presses (a TTY in raw mode, or a test's PassThrough) until `q` or the end of the input.
 */
import type { ReplayStep } from '../runtime/admin/replay.js';
import { paint } from './render.js';
import { byText, stepLines } from './replay-render.js';

/** One transition as the stepper shows it. */
export interface StepperEntry {
  step: ReplayStep;
  /** The output tails the event carries (an exit), else null. */
  tail: { stdout: string; stderr: string } | null;
}

export interface FrameOptions {
  /** The title line: stream and machine. */
  title: string;
  color: boolean;
  /** Terminal size: a frame never has more lines than `rows`, nor wider lines than `columns`. */
  columns: number;
  rows: number;
}

export type StepperKey = 'next' | 'prev' | 'first' | 'last' | 'quit';

export const STEPPER_HELP = '→ l j n space: next   ← h k p: back   g: first   G: last   q: quit';

/** Cut to `columns` characters (ANSI colour codes do not count). */
function fit(line: string, columns: number): string {
  const plain = line.replace(/\u001b\[[0-9;]*m/g, '');
  if (plain.length <= columns) return line;
  return `${plain.slice(0, Math.max(1, columns - 1))}…`;
}

/** The last `n` lines of a text (its lines, without the final newline). */
function lastLines(text: string, n: number): string[] {
  if (n <= 0 || text === '') return [];
  const lines = text.replace(/\n$/, '').split('\n');
  return lines.slice(-n);
}

/** One screen: transition `index` of `entries` (0-based). */
export function renderFrame(entries: readonly StepperEntry[], index: number, options: FrameOptions): string {
  const { color, columns, rows } = options;
  const entry = entries[index];
  const head = [paint(color, 'bold', options.title), paint(color, 'gray', `transition ${index + 1} of ${entries.length}`), ''];
  const foot = ['', paint(color, 'gray', STEPPER_HELP)];
  if (!entry) return [...head, 'no events', ...foot].map((l) => fit(l, columns)).join('\n') + '\n';
  const body = stepLines(entry.step, color);
  const by = byText(entry.step.by);
  if (by) body.push(paint(color, 'gray', `      acted: ${by}`));
  const room = Math.max(0, rows - head.length - foot.length - body.length);
  if (entry.tail && room > 2) {
    const streams = (['stdout', 'stderr'] as const).filter((s) => entry.tail![s] !== '');
    const each = Math.floor((room - streams.length * 2) / Math.max(1, streams.length));
    for (const name of streams) {
      body.push('', paint(color, 'gray', `  ${name} (tail):`));
      for (const line of lastLines(entry.tail[name], each)) body.push(`    ${line}`);
    }
  }
  const lines = [...head, ...body].slice(0, Math.max(1, rows - foot.length));
  return [...lines, ...foot].map((l) => fit(l, columns)).join('\n') + '\n';
}

/** The keys in a chunk of input, in order (unknown keys are dropped). */
export function keysOf(chunk: string): StepperKey[] {
  const keys: StepperKey[] = [];
  for (let i = 0; i < chunk.length; i++) {
    const ch = chunk[i]!;
    if (ch === '\u001b' && chunk[i + 1] === '[' && i + 2 < chunk.length) {
      const code = chunk[i + 2];
      if (code === 'C' || code === 'B') keys.push('next');
      else if (code === 'D' || code === 'A') keys.push('prev');
      else if (code === 'H') keys.push('first');
      else if (code === 'F') keys.push('last');
      i += 2;
      continue;
    }
    if ('ljn '.includes(ch)) keys.push('next');
    else if ('hkp'.includes(ch)) keys.push('prev');
    else if (ch === 'g') keys.push('first');
    else if (ch === 'G') keys.push('last');
    else if (ch === 'q' || ch === '\u0003' || ch === '\u0004') keys.push('quit');
  }
  return keys;
}

/** Where a key moves to from `index` among `count` transitions (null: quit). */
export function move(key: StepperKey, index: number, count: number): number | null {
  switch (key) {
    case 'next':
      return Math.min(count - 1, index + 1);
    case 'prev':
      return Math.max(0, index - 1);
    case 'first':
      return 0;
    case 'last':
      return Math.max(0, count - 1);
    case 'quit':
      return null;
  }
}

export interface StepperIo {
  input: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };
  output: NodeJS.WritableStream;
}

const CLEAR = '\u001b[H\u001b[2J';

/**
 * Shows `entries` one at a time, starting at `start`, moving with each key read from `io.input`;
 * resolves with the index shown last when `q` (or Ctrl-C) is pressed or the input ends. A TTY input
 * is put in raw mode for the duration and restored after.
 */
export function runStepper(entries: readonly StepperEntry[], io: StepperIo, options: FrameOptions & { start?: number }): Promise<number> {
  let index = Math.min(Math.max(0, options.start ?? 0), Math.max(0, entries.length - 1));
  const raw = io.input.isTTY === true && typeof io.input.setRawMode === 'function';
  const draw = () => io.output.write(CLEAR + renderFrame(entries, index, options));
  return new Promise((resolve) => {
    const finish = () => {
      io.input.off('data', onData);
      io.input.off('end', finish);
      if (raw) io.input.setRawMode!(false);
      io.input.pause();
      io.output.write('\n');
      resolve(index);
    };
    const onData = (chunk: Buffer | string) => {
      for (const key of keysOf(typeof chunk === 'string' ? chunk : chunk.toString('utf8'))) {
        const next = move(key, index, entries.length);
        if (next === null) return finish();
        if (next !== index) {
          index = next;
          draw();
        }
      }
    };
    if (raw) io.input.setRawMode!(true);
    io.input.on('data', onData);
    io.input.on('end', finish);
    io.input.resume();
    draw();
  });
}
