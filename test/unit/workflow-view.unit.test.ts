import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { criticalPath, renderLiveSteps, renderTimeline, type ViewStep } from '../../src/cli/workflow-view.js';

const T = 1_700_000_000_000;
const ANSI = /\u001b\[[0-9;]*m/g;

function step(id: string, needs: string[], status: string, start: number | null, end: number | null, more: Partial<ViewStep> = {}): ViewStep {
  return {
    id,
    needs,
    status,
    startedAt: start === null ? null : T + start,
    endedAt: end === null ? null : T + end,
    attempts: start === null ? 0 : 1,
    exitCode: status === 'succeeded' ? 0 : null,
    ...more,
  };
}

/** a → {b, c} → d, plus an independent e that overlaps b and c. */
function diamond(): ViewStep[] {
  return [
    step('a', [], 'succeeded', 0, 2_000),
    step('b', ['a'], 'succeeded', 2_000, 5_000),
    step('c', ['a'], 'succeeded', 2_000, 8_000),
    step('d', ['b', 'c'], 'succeeded', 8_000, 10_000),
    step('e', [], 'failed', 1_000, 4_000, { exitCode: 3 }),
  ];
}

const len = (line: string) => [...line.replace(ANSI, '')].length;
const cells = (line: string, bar = '█') => [...line].filter((c) => c === bar).length;
/** [first, last] column of the bar in a line, or null. */
function barRange(line: string, bar = '█'): [number, number] | null {
  const chars = [...line];
  const first = chars.indexOf(bar);
  return first < 0 ? null : [first, chars.lastIndexOf(bar)];
}

describe('criticalPath', () => {
  it('follows the longest chain by wall time through the diamond', () => {
    expect(criticalPath(diamond(), T + 10_000)).toEqual(['a', 'c', 'd']);
  });

  it('picks the longer branch, whichever it is', () => {
    const steps = diamond();
    steps[1]!.endedAt = T + 9_000; // b now takes 7s, c 6s
    expect(criticalPath(steps, T + 12_000)).toEqual(['a', 'b', 'd']);
  });

  it('breaks ties by file order', () => {
    const steps = diamond();
    steps[2]!.endedAt = T + 5_000; // b and c both 3s
    expect(criticalPath(steps, T + 10_000)).toEqual(['a', 'b', 'd']);
    const twins = [step('x', [], 'succeeded', 0, 1_000), step('y', [], 'succeeded', 0, 1_000)];
    expect(criticalPath(twins, T + 1_000)).toEqual(['x']);
  });

  it('measures running steps up to now', () => {
    const steps = [
      step('a', [], 'succeeded', 0, 1_000),
      step('b', ['a'], 'succeeded', 1_000, 4_000),
      step('c', ['a'], 'running', 1_000, null),
      step('d', ['b', 'c'], 'pending', null, null),
    ];
    expect(criticalPath(steps, T + 3_000)).toEqual(['a', 'b']);
    expect(criticalPath(steps, T + 9_000)).toEqual(['a', 'c']);
  });

  it('counts never-started steps as zero and ignores unknown needs and cycles', () => {
    const steps = [
      step('a', ['ghost'], 'succeeded', 0, 1_000),
      step('b', ['a', 'c'], 'pending', null, null),
      step('c', ['b'], 'pending', null, null),
    ];
    expect(criticalPath(steps, T + 5_000)).toEqual(['a']);
    expect(criticalPath([], T)).toEqual([]);
  });
});

describe('renderTimeline', () => {
  const now = T + 10_000;

  it('draws the diamond exactly', () => {
    expect(renderTimeline(diamond(), { width: 40, now, color: false })).toEqual([
      'a*  ████·················  2s  succeeded',
      'b   ····███████··········  3s  succeeded',
      'c*  ····█████████████····  6s  succeeded',
      'd*  ·················████  2s  succeeded',
      'e   ··██████·············  3s  failed',
      '    0s ─────── 5s ─── 10s',
      '* critical path: a → c → d (10s)',
    ]);
  });

  it('adds intermediate ticks when there is room', () => {
    const lines = renderTimeline(diamond(), { width: 60, now, color: false });
    expect(lines.at(-2)).toBe('    0s ──── 2s ──── 4s ───── 6s ───────── 10s');
    for (const line of lines) expect(len(line)).toBeLessThanOrEqual(60);
    expect(len(lines[0]!)).toBe(60);
  });

  it('overlaps the bars of steps that ran in parallel', () => {
    const lines = renderTimeline(diamond(), { width: 80, now, color: false });
    const [b, c, e] = [barRange(lines[1]!)!, barRange(lines[2]!)!, barRange(lines[4]!)!];
    expect(b[0]).toBe(c[0]); // b and c start together after a
    expect(b[1]).toBeLessThan(c[1]);
    expect(e[0]).toBeLessThan(b[0]); // e started before them and ended while they ran
    expect(e[1]).toBeGreaterThanOrEqual(b[0]);
    expect(e[1]).toBeLessThan(b[1]);
    const [a, d] = [barRange(lines[0]!)!, barRange(lines[3]!)!];
    expect(a[1]).toBeLessThan(b[0]); // sequential steps do not share a cell
    expect(c[1]).toBeLessThan(d[0]);
  });

  it('extends running steps to now and uses now for the axis', () => {
    const steps = [step('build', [], 'succeeded', 0, 3_000), step('test', ['build'], 'running', 3_000, null)];
    const lines = renderTimeline(steps, { width: 50, now: T + 12_300, color: false });
    expect(lines[1]).toMatch(/█  9\.3s  running$/);
    expect(lines[2]).toMatch(/ 12\.3s$/);
    expect(lines[3]).toBe('* critical path: build → test (12.3s)');
    // A retry in progress: endedAt belongs to the previous attempt, the bar still runs to now.
    const retry = [step('flaky', [], 'running', 0, 2_000, { attempts: 2 })];
    expect(renderTimeline(retry, { width: 40, now: T + 5_000, color: false })[0]).toMatch(/^flaky\* {2}█+ {2}5s {2}running$/);
  });

  it('gives every step that ran at least one cell, even a zero-length one', () => {
    const steps = [
      step('long', [], 'succeeded', 0, 3_600_000),
      step('instant', ['long'], 'succeeded', 3_600_000, 3_600_000),
      step('blip', [], 'failed', 1_000, 1_001),
    ];
    const lines = renderTimeline(steps, { width: 40, now: T + 3_600_000, color: false });
    expect(cells(lines[1]!)).toBe(1);
    expect(cells(lines[2]!)).toBe(1);
    expect(barRange(lines[1]!)![1]).toBe(barRange(lines[0]!)![1]); // at the very end
    expect(lines[1]).toMatch(/█ {2}0ms {2}succeeded$/);
    // A workflow whose only step took no time at all.
    const alone = renderTimeline([step('x', [], 'succeeded', 0, 0)], { width: 40, now: T, color: false });
    expect(alone).toEqual(['x*  █···················  0ms  succeeded', '    0s', '* critical path: x (0ms)']);
  });

  it('shows no bar for skipped and never-started steps', () => {
    const steps = [
      step('a', [], 'failed', 0, 1_000),
      step('b', ['a'], 'skipped', null, null),
      step('c', ['a'], 'pending', null, null),
    ];
    const lines = renderTimeline(steps, { width: 40, now: T + 1_000, color: false });
    expect(lines[1]).toMatch(/^b {3}·+ {3}- {2}skipped$/);
    expect(lines[2]).toMatch(/^c {3}·+ {3}- {2}pending$/);
    // Nothing started yet: just the rows, no axis, no legend.
    const idle = renderTimeline([step('a', [], 'pending', null, null)], { width: 40, now: T, color: false });
    expect(idle).toEqual(['a  ·························  -  pending']);
  });

  it('uses only ASCII when unicode is off', () => {
    const lines = renderTimeline(diamond(), { width: 50, now, color: false, unicode: false });
    for (const line of lines) expect(line).toMatch(/^[\x20-\x7e]*$/);
    expect(lines[0]).toBe('a*  ######.........................  2s  succeeded');
    expect(lines.at(-2)).toMatch(/^ {4}0s -+ .* 10s$/);
    expect(lines.at(-1)).toBe('* critical path: a -> c -> d (10s)');
  });

  it('paints only with color, and painting changes nothing else', () => {
    const plain = renderTimeline(diamond(), { width: 60, now, color: false });
    const painted = renderTimeline(diamond(), { width: 60, now, color: true });
    for (const line of plain) expect(line).not.toMatch(/\u001b/);
    expect(painted.map((l) => l.replace(ANSI, ''))).toEqual(plain);
    expect(painted[0]).toContain('\u001b[32m████'); // succeeded: green
    expect(painted[4]).toContain('\u001b[31m████'); // failed: red
  });

  it('colours bars by status', () => {
    const steps = [
      step('ok', [], 'succeeded', 0, 1_000),
      step('bad', [], 'timed_out', 0, 1_000),
      step('stop', [], 'cancelled', 0, 1_000),
      step('lost', [], 'abandoned', 0, 1_000),
      step('live', [], 'running', 0, null),
    ];
    const lines = renderTimeline(steps, { width: 60, now: T + 1_000, color: true });
    const codes = lines.slice(0, 5).map((l) => /\u001b\[(\d+)m█/.exec(l)?.[1]);
    expect(codes).toEqual(['32', '31', '33', '33', '36']);
  });

  it('respects the width: bar area at least 10 cells, no line longer than width from 40', () => {
    const longIds = [
      step('fetch-the-upstream-dependencies', [], 'succeeded', 0, 2_000),
      step('compile-everything-in-release-mode', ['fetch-the-upstream-dependencies'], 'timed_out', 2_000, 90_000),
    ];
    for (const width of [40, 45, 52, 61]) {
      const lines = renderTimeline(longIds, { width, now: T + 90_000, color: true });
      for (const line of lines) expect(len(line)).toBeLessThanOrEqual(width);
      expect(cells(lines[0]!.replace(ANSI, '')) + [...lines[0]!.replace(ANSI, '')].filter((c) => c === '·').length).toBe(10);
      expect(lines[0]).toContain('…');
    }
    // Below 40 the bar area still keeps its 10 cells, even if the line overflows.
    const narrow = renderTimeline(diamond(), { width: 20, now, color: false });
    expect(narrow[0]).toBe('a*  ██········  2s  succeeded');
    // A wide terminal gets a wide bar area, filled to the edge.
    const wide = renderTimeline(diamond(), { width: 200, now, color: false });
    expect(len(wide[0]!)).toBe(200);
    const area = 200 - 2 - 4 - 13; // id column, two gaps, '2s  succeeded'
    expect(cells(wide[2]!)).toBe(Math.round(0.8 * area) - Math.round(0.2 * area));
  });

  it('returns nothing for no steps', () => {
    expect(renderTimeline([], { width: 80, now, color: true })).toEqual([]);
  });

  it('holds for arbitrary runs: lines fit, started steps get a bar, the others none', () => {
    const statuses = ['pending', 'waiting', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'abandoned'];
    const arbStep = fc.record({
      id: fc.string({ minLength: 1, maxLength: 40 }).map((s) => s.replace(/[\s#█]/g, '_')),
      status: fc.constantFrom(...statuses),
      start: fc.option(fc.integer({ min: 0, max: 10_000_000 })),
      length: fc.integer({ min: 0, max: 10_000_000 }),
    });
    fc.assert(
      fc.property(fc.array(arbStep, { minLength: 1, maxLength: 12 }), fc.integer({ min: 40, max: 160 }), fc.boolean(), (raw, width, unicode) => {
        const steps = raw.map((r, i) =>
          step(r.id, i > 0 ? [raw[i - 1]!.id] : [], r.status, r.start, r.start === null ? null : r.start + r.length),
        );
        const now = T + 25_000_000;
        const lines = renderTimeline(steps, { width, now, color: false, unicode });
        const bar = unicode ? '█' : '#';
        steps.forEach((s, i) => {
          const ran = s.startedAt !== null && s.status !== 'skipped';
          expect(cells(lines[i]!, bar) > 0).toBe(ran);
        });
        for (const line of lines) expect(len(line)).toBeLessThanOrEqual(width);
      }),
      { numRuns: 300 },
    );
  });
});

describe('renderLiveSteps', () => {
  const steps = [
    step('build', [], 'succeeded', 0, 1_200),
    step('test', ['build'], 'running', 1_200, 3_000, { attempts: 2 }),
    step('lint', ['build'], 'failed', 1_200, 1_500, { exitCode: 2 }),
    step('e2e', ['build'], 'timed_out', 1_200, 61_200),
    step('deploy', ['test'], 'pending', null, null),
    step('notify', ['deploy'], 'skipped', null, null),
    step('audit', [], 'cancelled', 0, 50),
  ];
  const now = T + 6_543;

  it('shows a glyph, id, status, duration and attempt per step', () => {
    expect(renderLiveSteps(steps, { now, frame: 0, color: false, width: 80 })).toEqual([
      '✓ build   succeeded   1.2s',
      '⠋ test    running     5.3s  attempt 2',
      '✗ lint    failed     300ms  exit 2',
      '⏱ e2e     timed_out     1m',
      '· deploy  pending',
      '– notify  skipped',
      '⊘ audit   cancelled   50ms',
    ]);
  });

  it('spins running steps with the frame and times them up to now', () => {
    const frames = [0, 1, 2, 9, 10].map((frame) => renderLiveSteps(steps, { now, frame, color: false, width: 80 })[1]![0]);
    expect(frames).toEqual(['⠋', '⠙', '⠹', '⠏', '⠋']);
    expect(renderLiveSteps(steps, { now: T + 11_200, frame: 3, color: false, width: 80 })[1]).toBe('⠸ test    running      10s  attempt 2');
    expect(renderLiveSteps(steps, { now, frame: 0, color: false, width: 80 })[0]).toBe('✓ build   succeeded   1.2s'); // finished: unchanged by now
  });

  it('shows the attempt only past the first one', () => {
    const lines = renderLiveSteps(steps, { now, frame: 0, color: false, width: 80 });
    expect(lines.filter((l) => l.includes('attempt'))).toHaveLength(1);
  });

  it('paints only with color', () => {
    const plain = renderLiveSteps(steps, { now, frame: 4, color: false, width: 80 });
    const painted = renderLiveSteps(steps, { now, frame: 4, color: true, width: 80 });
    for (const line of plain) expect(line).not.toMatch(/\u001b/);
    expect(painted.map((l) => l.replace(ANSI, ''))).toEqual(plain);
    expect(painted[0]).toMatch(/^\u001b\[32m✓/);
    expect(painted[1]).toMatch(/^\u001b\[36m⠼/);
  });

  it('never wraps: ids are cut first, then the line', () => {
    const long = [step('a-very-long-step-identifier-indeed', [], 'running', 0, null, { attempts: 3 })];
    expect(renderLiveSteps(long, { now, frame: 0, color: false, width: 40 })).toEqual(['⠋ a-very-long…  running  6.5s  attempt 3']);
    for (const width of [12, 20, 30]) {
      for (const line of renderLiveSteps(steps, { now, frame: 0, color: true, width })) expect(len(line)).toBeLessThanOrEqual(width);
    }
  });

  it('returns nothing for no steps', () => {
    expect(renderLiveSteps([], { now, frame: 0, color: true, width: 80 })).toEqual([]);
  });
});
