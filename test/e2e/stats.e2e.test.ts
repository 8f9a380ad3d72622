/**
 * `loops stats` through the built binary: command and agent loops (the fake CLIs in
 * test/fixtures/agents first on PATH), runs made at chosen times with LOOPS_NOW, then the table for
 * people, --json for scripts, --since windows, one loop by name or id, and the bad-input errors.
 * A workflow loop whose steps call claude and codex: its agent steps' tokens and cost in `loops
 * stats` (and per step, with the run's total, in `loops workflows inspect`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, Sandbox } from './cli-helpers.js';

const s = new Sandbox();
afterAll(() => s.cleanup());
const PATH = `${join(FIXTURES, 'agents')}${delimiter}${process.env.PATH ?? ''}`;
const DAY1 = '2026-01-01T09:00:00.000Z';
const DAY10 = '2026-01-10T09:00:00.000Z';
const NOW = '2026-01-11T09:00:00.000Z';
const at = (iso: string, extra: Record<string, string> = {}) => ({ PATH, LOOPS_NOW: iso, ...extra });

function ok(args: string[], env: Record<string, string>): string {
  const r = s.run(args, env);
  expect(r.code, `loops ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

interface Stats {
  runs: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  cancelled: number;
  abandoned: number;
  running: number;
  successRate: number | null;
  totalDurationMs: number | null;
  medianDurationMs: number | null;
  agent: {
    runs: number;
    steps: number;
    turns: number | null;
    tokens: { input: number | null; output: number | null; cacheRead: number | null; cacheWrite: number | null };
    costUsd: number | null;
    costRuns: number;
    providers: string[];
    models: string[];
  };
}
interface Report {
  since: string | null;
  loops: Array<Stats & { loopId: string; name: string; status: string }>;
  total: Stats & { loops: number };
}

beforeAll(() => {
  const manual = ['--manual', '--tz', 'UTC'];
  ok(['create', 'command', 'backup', '--cmd', 'echo saved', ...manual], at(DAY1));
  ok(['create', 'command', 'flaky', '--cmd', 'exit 3', ...manual], at(DAY1));
  ok(['create', 'command', 'old', '--cmd', 'true', ...manual], at(DAY1));
  ok(['create', 'agent', 'review', '--provider', 'claude', '--prompt', 'review the diff', ...manual], at(DAY1));
  ok(['create', 'agent', 'fix', '--provider', 'codex', '--prompt', 'fix the tests', ...manual], at(DAY1));
  // Day 1: old runs, outside a 5-day window on day 11.
  ok(['run-now', 'backup'], at(DAY1));
  ok(['run-now', 'old'], at(DAY1));
  ok(['run-now', 'review'], at(DAY1));
  ok(['remove', 'old'], at(DAY1));
  // Day 10.
  ok(['run-now', 'backup'], at(DAY10));
  ok(['run-now', 'backup'], at(DAY10));
  expect(s.run(['run-now', 'flaky'], at(DAY10)).code).toBe(3);
  ok(['run-now', 'review'], at(DAY10));
  expect(s.run(['run-now', 'review'], at(DAY10, { FAKE_AGENT_MODE: 'nojson' })).code).toBe(3);
  ok(['run-now', 'fix'], at(DAY10));
}, 120_000);

describe('loops stats', () => {
  it('--json: every loop over all time, removed loops with runs included, and the total', () => {
    const r = s.json<Report>(['stats'], at(NOW));
    expect(r.since).toBeNull();
    expect(r.loops.map((l) => [l.name, l.status, l.runs])).toEqual([
      ['backup', 'active', 3],
      ['fix', 'active', 1],
      ['flaky', 'active', 1],
      ['old', 'removed', 1],
      ['review', 'active', 3],
    ]);
    const review = r.loops.find((l) => l.name === 'review')!;
    expect(review).toMatchObject({ runs: 3, succeeded: 2, failed: 1, successRate: 2 / 3 });
    expect(review.agent).toMatchObject({ runs: 3, costRuns: 2, providers: ['claude'], models: ['claude-sonnet-4-5-20250929'] });
    expect(review.agent.costUsd).toBeCloseTo(2 * 0.0421335, 9);
    expect(review.agent.tokens.input).toBe(2 * 9);
    const fix = r.loops.find((l) => l.name === 'fix')!;
    // codex reports tokens but no cost: unknown, not $0.
    expect(fix.agent).toMatchObject({ runs: 1, costUsd: null, costRuns: 0, providers: ['codex'] });
    expect(fix.agent.tokens.input).toBeGreaterThan(0);
    expect(r.total).toMatchObject({ loops: 5, runs: 9, succeeded: 7, failed: 2, running: 0, agent: { runs: 4, costRuns: 2 } });
    expect(r.total.agent.costUsd).toBeCloseTo(review.agent.costUsd!, 9);
    expect(r.total.totalDurationMs).toBe(r.loops.reduce((a, l) => a + (l.totalDurationMs ?? 0), 0));
  });

  it('--since 5d and --since <ISO time>: only the runs in the window; a removed loop without runs there is left out', () => {
    const r = s.json<Report>(['stats', '--since', '5d'], at(NOW));
    // LOOPS_NOW starts a clock that runs on, so "5 days ago" is a few ms past 09:00 on a slow machine.
    const since = Date.parse(r.since!) - Date.parse('2026-01-06T09:00:00.000Z');
    expect(since).toBeGreaterThanOrEqual(0);
    expect(since).toBeLessThan(60_000);
    expect(r.loops.map((l) => [l.name, l.runs])).toEqual([
      ['backup', 2],
      ['fix', 1],
      ['flaky', 1],
      ['review', 2],
    ]);
    expect(r.total).toMatchObject({ loops: 4, runs: 6, succeeded: 4, failed: 2, agent: { runs: 3, costRuns: 1 } });
    expect(r.total.agent.costUsd).toBeCloseTo(0.0421335, 9);
    expect(s.json<Report>(['stats', '--since', '2026-01-06T09:00Z'], at(NOW))).toEqual({ ...r, since: '2026-01-06T09:00:00.000Z' });
  });

  it('one loop by name, id or id prefix; a removed loop by id', () => {
    const all = s.json<Report>(['stats'], at(NOW));
    const backup = all.loops.find((l) => l.name === 'backup')!;
    for (const ref of ['backup', backup.loopId, backup.loopId.slice(0, 20)]) {
      const r = s.json<Report>(['stats', ref], at(NOW));
      expect(r.loops).toEqual([backup]);
      expect(r.total).toMatchObject({ loops: 1, runs: 3 });
    }
    const old = all.loops.find((l) => l.name === 'old')!;
    expect(s.json<Report>(['stats', old.loopId, '--since', '5d'], at(NOW)).loops).toMatchObject([{ name: 'old', status: 'removed', runs: 0 }]);
  });

  it('the table: a relative since header, aligned columns, token thousands separators, $ costs and how many runs had one', () => {
    const r = s.run(['stats', '--since', '5d'], at(NOW));
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe('Since 5d ago (2026-01-06T09:00:00.000Z): 6 runs in 4 loops');
    const header = lines.find((l) => l.startsWith('LOOP '))!;
    expect(header.split(/\s{2,}/)).toEqual(['LOOP', 'RUNS', 'OK', 'FAILED', 'TIMED OUT', 'CANCELLED', 'ABANDONED', 'RUNNING', 'SUCCESS', 'TOTAL TIME', 'MEDIAN']);
    const row = (table: string, name: string) => {
      const start = lines.findIndex((l) => l.startsWith(table));
      return lines.slice(start).find((l) => l.startsWith(`${name} `))!;
    };
    // Numbers are right-aligned under their headers.
    const backupRow = row('LOOP ', 'backup');
    expect(backupRow.slice(0, header.indexOf('SUCCESS') + 'SUCCESS'.length).trim().split(/\s+/)).toEqual(['backup', '2', '2', '0', '0', '0', '0', '0', '100%']);
    expect(backupRow.charAt(header.indexOf('RUNS') + 3)).toBe('2');
    expect(row('LOOP ', 'flaky')).toMatch(/^flaky\s+1\s+0\s+1\s+0\s+0\s+0\s+0\s+0%/);
    expect(row('LOOP ', 'TOTAL')).toMatch(/^TOTAL\s+6\s+4\s+2\s+0\s+0\s+0\s+0\s+66\.7%/);
    // The agent table: only agent loops; tokens with separators; the cost and how many runs reported one.
    const agentHeader = lines.find((l) => l.startsWith('AGENT LOOP'))!;
    expect(agentHeader.split(/\s{2,}/)).toEqual(['AGENT LOOP', 'RUNS', 'TURNS', 'INPUT', 'OUTPUT', 'CACHE READ', 'CACHE WRITE', 'COST', 'MODELS']);
    const review = row('AGENT LOOP', 'review');
    expect(review).toMatch(/\s18,230\s/); // cache read of the one run that reported it
    expect(review).toMatch(/\$0\.0421 \(1 of 2\)\s+claude: claude-sonnet-4-5-20250929$/);
    expect(row('AGENT LOOP', 'fix')).toMatch(/\s24,763\s.*\s-\s+codex$/);
    expect(row('AGENT LOOP', 'TOTAL')).toMatch(/\$0\.0421 \(1 of 3\)\s+claude: claude-sonnet-4-5-20250929; codex$/);
    expect(lines.slice(lines.indexOf(agentHeader)).some((l) => l.startsWith('backup '))).toBe(false);
    expect(r.stdout).toContain('Tokens and cost as the agent CLIs reported them. The cost is summed over the 1 of 3 agent runs that reported one.');
    // All columns of a table line up.
    const agentStart = lines.indexOf(agentHeader);
    const costAt = agentHeader.indexOf('COST');
    for (const l of lines.slice(agentStart + 1, agentStart + 4)) expect(l.charAt(costAt - 1)).toBe(' ');
  });

  it('all time: the header says so; a removed loop is marked', () => {
    const out = ok(['stats'], at(NOW));
    expect(out.split('\n')[0]).toBe('All time: 9 runs in 5 loops');
    expect(out).toMatch(/^old \(removed\)\s+1\s+1/m);
  });

  it('bad input: an unknown loop, a bad or future --since, an unknown flag → exit 2 and a clear message', () => {
    const unknown = s.run(['stats', 'nope'], at(NOW));
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no loop named or with id "nope"/);
    const bad = s.run(['stats', '--since', 'yesterday'], at(NOW));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since: "yesterday" is neither a time nor a duration/);
    expect(bad.stderr).toMatch(/7d/);
    const future = s.run(['stats', '--since', '2026-02-01T00:00Z'], at(NOW));
    expect(future.code).toBe(2);
    expect(future.stderr).toMatch(/is in the future/);
    const invalid = s.run(['stats', '--since', '2026-01-32'], at(NOW));
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toMatch(/--since: "2026-01-32" is not a valid date and time/);
    expect(s.run(['stats', '--sinc', '5d'], at(NOW)).code).toBe(2);
    expect(s.run(['stats', '--since'], at(NOW)).code).toBe(2);
    for (const r of [unknown, bad, future, invalid]) expect(r.stdout).toBe('');
  });

  it('--help, and an empty data directory', () => {
    expect(ok(['stats', '--help'], at(NOW))).toMatch(/Usage: loops stats \[loop\] \[options\][\s\S]*--since <time\|duration>/);
    expect(ok(['--help'], at(NOW))).toMatch(/^ {2}stats\s+sum runs, failures, duration, tokens and cost per loop$/m);
    const empty = new Sandbox();
    try {
      const r = empty.run(['stats']);
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/No loops yet/);
      expect(JSON.parse(empty.run(['stats', '--json']).stdout)).toMatchObject({ since: null, loops: [], total: { loops: 0, runs: 0, successRate: null } });
    } finally {
      empty.cleanup();
    }
  });
});

// ── A workflow loop with agent steps ────────────────────────────────────────────────────────────

interface AgentReport {
  provider: string;
  model: string | null;
  sessionId: string | null;
  turns: number | null;
  tokens: { input: number | null; output: number | null; cacheRead: number | null; cacheWrite: number | null };
  costUsd: number | null;
}
interface Inspected {
  id: string;
  status: string;
  agent: { reports: number; turns: number | null; tokens: AgentReport['tokens']; costUsd: number | null; costReports: number } | null;
  steps: Array<{ stepId: string; targetType: string; provider: string | null; agent: AgentReport | null; attempts: Array<{ attempt: number; agent: AgentReport | null }> }>;
}

describe('loops stats: a workflow loop whose steps call agent CLIs', () => {
  const w = new Sandbox();
  const dir = mkdtempSync(join(tmpdir(), 'loops-stats-wf-'));
  afterAll(() => {
    w.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeAll(() => {
    const file = join(dir, 'triage.yaml');
    writeFileSync(
      file,
      `name: triage
steps:
  - id: build
    run: echo built
  - id: review
    needs: build
    agent: { provider: claude, prompt: review the build }
  - id: fix
    needs: build
    agent: { provider: codex, prompt: fix the build }
`,
    );
    const ok2 = (args: string[], env: Record<string, string>) => {
      const r = w.run(args, env);
      expect(r.code, `loops ${args.join(' ')}: ${r.stderr}`).toBe(0);
    };
    ok2(['workflows', 'create', file], at(DAY1));
    ok2(['create', 'workflow', 'triage-loop', '--workflow', 'triage', '--manual', '--tz', 'UTC'], at(DAY1));
    ok2(['create', 'agent', 'solo', '--provider', 'claude', '--prompt', 'x', '--manual', '--tz', 'UTC'], at(DAY1));
    ok2(['run-now', 'triage-loop'], at(DAY10));
    ok2(['run-now', 'solo'], at(DAY10));
  }, 120_000);

  it('--json: the loop\'s agent steps add their tokens and cost (steps counted apart from agent runs), and so does the total', () => {
    const r = w.json<Report>(['stats', '--since', '5d'], at(NOW));
    const loop = r.loops.find((l) => l.name === 'triage-loop')!;
    // One run of the loop (one workflow run), two agent step attempts in it.
    expect(loop).toMatchObject({ runs: 1, succeeded: 1, agent: { runs: 0, steps: 2, costRuns: 1, providers: ['claude', 'codex'] } });
    // claude: 9 in, 342 out, 18,230 cache read, $0.0421335; codex: 24,763 in and no cost.
    expect(loop.agent.tokens.input).toBe(9 + 24_763);
    expect(loop.agent.tokens.cacheRead).toBeGreaterThanOrEqual(18_230);
    expect(loop.agent.costUsd).toBeCloseTo(0.0421335, 9);
    expect(loop.agent.models).toContain('claude-sonnet-4-5-20250929');

    // The same numbers as the run's own step reports (loops workflows inspect --json).
    const [run] = w.json<Array<{ id: string; loopId: string | null }>>(['workflows', 'runs'], at(NOW));
    expect(run!.loopId).toBe(loop.loopId);
    const inspected = w.json<Inspected>(['workflows', 'inspect', run!.id], at(NOW));
    expect(inspected.agent).toMatchObject({ reports: 2, turns: loop.agent.turns, tokens: loop.agent.tokens, costReports: 1 });
    expect(inspected.agent!.costUsd).toBeCloseTo(loop.agent.costUsd!, 9);

    const solo = r.loops.find((l) => l.name === 'solo')!;
    expect(solo.agent).toMatchObject({ runs: 1, steps: 0, costRuns: 1 });
    expect(r.total).toMatchObject({ loops: 2, runs: 2, agent: { runs: 1, steps: 2, costRuns: 2, providers: ['claude', 'codex'] } });
    expect(r.total.agent.costUsd).toBeCloseTo(2 * 0.0421335, 9);
    expect(r.total.agent.tokens.input).toBe(loop.agent.tokens.input! + solo.agent.tokens.input!);
    // Out of the window with its workflow run.
    expect(w.json<Report>(['stats', 'triage-loop', '--since', '2026-01-10T09:30Z'], at(NOW)).loops[0]!.agent).toMatchObject({ steps: 0, costUsd: null });
  });

  it('the table: a STEPS column, the loop\'s cost and how many of its runs and steps reported one', () => {
    const r = w.run(['stats'], at(NOW));
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const header = lines.find((l) => l.startsWith('AGENT LOOP'))!;
    expect(header.split(/\s{2,}/)).toEqual(['AGENT LOOP', 'RUNS', 'STEPS', 'TURNS', 'INPUT', 'OUTPUT', 'CACHE READ', 'CACHE WRITE', 'COST', 'MODELS']);
    const row = (name: string) => lines.slice(lines.indexOf(header)).find((l) => l.startsWith(`${name} `))!;
    expect(row('triage-loop')).toMatch(/^triage-loop\s+0\s+2\s+.*\s24,772\s.*\$0\.0421 \(1 of 2\)\s+claude: claude-sonnet-4-5-20250929; codex/);
    expect(row('solo')).toMatch(/^solo\s+1\s+0\s+.*\$0\.0421\s+claude: claude-sonnet-4-5-20250929$/);
    expect(row('TOTAL')).toMatch(/\$0\.0843 \(2 of 3\)/);
    expect(r.stdout).toContain('The cost is summed over the 2 of 3 agent runs and step attempts that reported one.');
  });

  it('workflows inspect: tokens and cost per agent step, the run\'s total; --json has each report', () => {
    const [run] = w.json<Array<{ id: string }>>(['workflows', 'runs'], at(NOW));
    const r = w.run(['workflows', 'inspect', run!.id], at(NOW));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^agents {6}cost \$0\.0421 \(1 of 2 reported one\), tokens 24\.8k in \/ 464 out, 2 agent attempts$/m);
    const lines = r.stdout.split('\n');
    const header = lines.find((l) => l.startsWith('STEP '))!;
    expect(header.split(/\s{2,}/)).toEqual(['STEP', 'STATUS', 'ATTEMPTS', 'EXIT', 'DURATION', 'TOKENS/COST', 'OUTPUTS', 'ERROR']);
    const cell = (step: string) => lines.find((l) => l.startsWith(`${step} `))!.slice(header.indexOf('TOKENS/COST')).split(/\s{2,}/)[0];
    expect(cell('review')).toBe('9/342 $0.0421');
    expect(cell('fix')).toBe('24.8k/122');
    expect(cell('build')).toBe('-');

    const inspected = w.json<Inspected>(['workflows', 'inspect', run!.id], at(NOW));
    const step = (id: string) => inspected.steps.find((s) => s.stepId === id)!;
    expect(step('build')).toMatchObject({ targetType: 'command', provider: null, agent: null, attempts: [{ attempt: 1, agent: null }] });
    expect(step('review')).toMatchObject({ targetType: 'agent', provider: 'claude', agent: { provider: 'claude', costUsd: 0.0421335, sessionId: expect.any(String) } });
    expect(step('review').attempts[0]!.agent).toEqual(step('review').agent);
    expect(step('fix').agent).toMatchObject({ provider: 'codex', costUsd: null, tokens: { input: 24_763, output: 122 } });
  });
});
