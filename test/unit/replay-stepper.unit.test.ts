/**
 * The replay stepper and the step renderer: frames are pure strings (what a transition shows, cut
 * to the terminal), keys map to moves, and the key loop runs on any stream of key presses — here a
 * PassThrough, no TTY. Also `failureAt`, which decides where --until-failure stops.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { failureAt, type ReplayStep } from '../../src/runtime/admin/replay.js';
import { changeText, stepLines, tailOf, valueText } from '../../src/cli/replay-render.js';
import { keysOf, move, renderFrame, runStepper, type StepperEntry } from '../../src/cli/replay-stepper.js';

function step(overrides: Partial<ReplayStep> = {}): ReplayStep {
  return {
    version: 1,
    position: 10,
    type: 'step.exited',
    at: '2026-12-01T10:00:00.000Z',
    stateBefore: 'running',
    stateAfter: 'running',
    recordedState: 'running',
    matches: true,
    accepted: true,
    changes: [],
    actions: [],
    contextChecked: true,
    ...overrides,
  };
}

const lint = (status: string, exitCode: number | null) => ({ status, attempt: 1, pid: 42, exitCode, outputs: status === 'failed' ? { report: 'r.txt' } : {}, error: null });

const entries: StepperEntry[] = [
  { step: step({ version: 1, type: 'wfrun.started', stateBefore: 'new', changes: [{ path: 'steps.lint', before: undefined, after: lint('pending', null) }] }), tail: null },
  {
    step: step({ version: 2, changes: [{ path: 'steps.lint', before: lint('running', null), after: lint('failed', 3) }], actions: ['startSteps'], by: { source: 'daemon', user: 'ana', host: 'box', loops: '0.1.0' } }),
    tail: { stdout: Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join('\n') + '\n', stderr: 'boom\n' },
  },
  { step: step({ version: 3, stateAfter: 'failed', recordedState: 'failed' }), tail: null },
];

describe('rendering a step', () => {
  it('a changed step shows only its sub-fields that changed, compactly', () => {
    expect(changeText(entries[1]!.step.changes[0]!)).toBe('steps.lint: status "running" → "failed", exitCode null → 3, outputs {} → {"report":"r.txt"}');
    expect(stepLines(entries[1]!.step, false)).toEqual([
      '✓ v2  2026-12-01T10:00:00.000Z  step.exited  running → running',
      '      steps.lint: status "running" → "failed", exitCode null → 3, outputs {} → {"report":"r.txt"}',
      '      effects: startSteps (not executed)',
    ]);
  });

  it('a value is not cut at 70 characters; past 500 it keeps its head and tail and says its length', () => {
    const medium = 'x'.repeat(300);
    expect(valueText(medium)).toBe(JSON.stringify(medium));
    const long = `${'a'.repeat(1000)}THE END`;
    const text = valueText(long);
    expect(text.length).toBeLessThan(520);
    expect(text).toMatch(/^"a+…a+THE END" \(1009 characters\)$/);
    expect(valueText(undefined)).toBe('∅');
  });

  it('a mismatch says what the log recorded and what replay found', () => {
    const lines = stepLines(step({ matches: false, fieldMismatch: { path: 'attempts', recordedHash: null, replayedHash: 'abc', recorded: 1, replayed: 2 } }), false);
    expect(lines[0]).toMatch(/^✗ v1/);
    expect(lines.slice(1)).toEqual(['      field attempts differs: the log recorded no change (1)', '        replayed 2 (hash abc)']);
  });

  it('output tails come from the event data when it carries them', () => {
    expect(tailOf({ stdout: 'a\n', stderr: '' })).toEqual({ stdout: 'a\n', stderr: '' });
    expect(tailOf({ pid: 3 })).toBeNull();
    expect(tailOf(null)).toBeNull();
  });
});

describe('failureAt', () => {
  it('a run or step whose status becomes failed or timed out, or a step that will retry; nothing else', () => {
    expect(failureAt(step({ stateBefore: 'running', stateAfter: 'failed' }))).toBe('failed');
    expect(failureAt(step({ stateBefore: 'running', stateAfter: 'timed_out' }))).toBe('timed_out');
    expect(failureAt(entries[1]!.step)).toBe('steps.lint failed');
    expect(failureAt(step({ changes: [{ path: 'steps.x', before: lint('running', null), after: lint('retrying', 1) }] }))).toBe('steps.x retrying');
    expect(failureAt(step({ changes: [{ path: 'steps.x', before: lint('failed', 3), after: { ...lint('failed', 3), error: 'late' } }] }))).toBeNull();
    expect(failureAt(step({ stateBefore: 'failed', stateAfter: 'failed' }))).toBeNull();
    expect(failureAt(step({ stateAfter: 'succeeded', changes: [{ path: 'exitCode', before: null, after: 0 }] }))).toBeNull();
  });
});

describe('the stepper', () => {
  const options = { title: 'wfrun:wfrun_1 on loops.workflow-run@2', color: false, columns: 80, rows: 20 };

  it('a frame: title, position, the step, who acted, the output tail that fits; never taller or wider than the terminal', () => {
    const frame = renderFrame(entries, 1, options);
    const lines = frame.trimEnd().split('\n');
    expect(lines[0]).toBe(options.title);
    expect(lines[1]).toBe('transition 2 of 3');
    expect(frame).toContain('step.exited  running → running');
    expect(frame).toContain('acted: daemon by ana@box, loops 0.1.0');
    expect(frame).toContain('stdout (tail):');
    expect(frame).toContain('    line 50');
    expect(frame).not.toContain('    line 1\n');
    expect(frame).toContain('stderr (tail):');
    expect(lines.length).toBeLessThanOrEqual(options.rows);
    expect(lines.every((l) => l.length <= options.columns)).toBe(true);
    expect(lines.at(-1)).toMatch(/q: quit/);
  });

  it('keys: arrows and vi keys move, g/G jump, q quits', () => {
    expect(keysOf('\u001b[C\u001b[Dljnhkp gGq')).toEqual(['next', 'prev', 'next', 'next', 'next', 'prev', 'prev', 'prev', 'next', 'first', 'last', 'quit']);
    expect(keysOf('xyz')).toEqual([]);
    expect(move('next', 2, 3)).toBe(2);
    expect(move('prev', 0, 3)).toBe(0);
    expect(move('last', 0, 3)).toBe(2);
    expect(move('quit', 1, 3)).toBeNull();
  });

  it('the key loop moves through the transitions and stops at q', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let written = '';
    output.on('data', (d: Buffer) => (written += d.toString('utf8')));
    const done = runStepper(entries, { input, output }, options);
    input.write('l');
    input.write('\u001b[C');
    input.write('j'); // already at the last: no new frame
    input.write('k');
    input.write('q');
    input.write('G'); // after q: ignored
    expect(await done).toBe(1);
    const frames = written.split('\u001b[H\u001b[2J').filter(Boolean);
    expect(frames.map((f) => /transition (\d) of 3/.exec(f)?.[1])).toEqual(['1', '2', '3', '2']);
  });

  it('the key loop ends with its input, and starts where asked', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    output.resume();
    const done = runStepper(entries, { input, output }, { ...options, start: 2 });
    input.write('g');
    input.end();
    expect(await done).toBe(0);
  });
});
