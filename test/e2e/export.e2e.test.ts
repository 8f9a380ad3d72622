/**
 * `loops export` and `loops verify <bundle>` through the built binary: a command loop's run and a
 * workflow run are exported in one data directory and verified in another (which verify never
 * creates); one flipped byte in one event line fails verify (exit 6) naming the event; a file that
 * is not a bundle is exit 2; `-o -`, --json, --since and the usage errors.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

describe('loops export → loops verify in another data directory', () => {
  // Each CLI call starts node (a second or more on a loaded 2-core machine): generous timeouts.
  it('a command run verifies elsewhere; one flipped byte in one event fails, naming the event; not a bundle is exit 2', { timeout: 120_000 }, () => {
    const a = sandbox();
    const b = sandbox();
    const dir = tempDir('loops-export-');
    expect(a.run(['create', 'command', 'hello', '--cmd', 'echo hello; echo oops >&2', '--manual']).code).toBe(0);
    expect(a.run(['run-now', 'hello']).code).toBe(0);
    const runId = a.json<Array<{ id: string }>>(['runs', 'hello'])[0]!.id;

    const file = join(dir, 'hello.jsonl');
    const exported = a.run(['export', runId, '-o', file]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toMatch(new RegExp(`^Wrote ${file}: \\d+ event\\(s\\) of 1 stream\\(s\\), 2 output file\\(s\\)\\nhead [0-9a-f]{64}  `));
    const head = /head ([0-9a-f]{64})/.exec(exported.stdout)![1];

    const ok = b.run(['verify', file]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`^ok  ${file}: run ${runId}, \\d+ event\\(s\\) in 1 stream\\(s\\), 2 output file\\(s\\): the chain holds and replay reproduces every recorded state\\nhead ${head}\\n$`));
    expect(existsSync(join(b.dataDir, 'loops.db'))).toBe(false);
    expect(b.json(['verify', file])).toMatchObject({ ok: true, subject: { kind: 'run', id: runId }, files: 2, head, problems: [] });

    // One byte of the process.exited event: its exit code 0 becomes 1.
    const lines = readFileSync(file, 'utf8').split('\n');
    const n = lines.findIndex((l) => l.includes('"type":"process.exited"'));
    const event = JSON.parse(lines[n]!) as { stream: string; version: number };
    const flipped = [...lines];
    flipped[n] = flipped[n]!.replace('"exitCode":0', '"exitCode":1');
    expect(flipped[n]).not.toBe(lines[n]);
    const damaged = join(dir, 'damaged.jsonl');
    writeFileSync(damaged, flipped.join('\n'));
    const bad = b.run(['verify', damaged]);
    expect(bad.code).toBe(6);
    const named = `line ${n + 1} (event ${event.stream} v${event.version} (process.exited)): its hash does not match its content: the event was changed`;
    expect(bad.stdout).toBe(`failed  ${named}\n`);
    expect(bad.stderr).toBe(`loops: ${damaged}: 1 failed check(s); first: ${named}\n`);

    const notBundle = join(dir, 'not.jsonl');
    writeFileSync(notBundle, 'hello\n');
    const refused = b.run(['verify', notBundle]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(`loops: ${notBundle} is not a loops bundle: its first line is not a loops-bundle header; loops export <run|loop> writes one; loops verify without a file checks the data directory\n`);
    expect(b.run(['verify', join(dir, 'missing.jsonl')]).code).toBe(2);
  });

  it('a workflow run: -o - writes the bundle to stdout, it verifies elsewhere; --since on it and an unknown name are exit 2', { timeout: 120_000 }, () => {
    const a = sandbox();
    const b = sandbox();
    const dir = tempDir('loops-export-');
    writeFileSync(join(dir, 'two.yaml'), 'name: two\nsteps:\n  - id: a\n    run: printf "x=1\\n" >> "$LOOPS_OUTPUT"\n  - id: b\n    needs: a\n    run: echo b\n');
    expect(a.run(['workflows', 'create', join(dir, 'two.yaml')]).code).toBe(0);
    expect(a.run(['workflows', 'run', 'two']).code).toBe(0);
    const wfRunId = a.json<Array<{ id: string }>>(['workflows', 'runs'])[0]!.id;

    const out = a.run(['export', wfRunId, '-o', '-']);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { kind: string; stepId?: string; outputs?: unknown; count?: number });
    expect(lines[0]).toMatchObject({ kind: 'header', format: 'loops-bundle', formatVersion: 1, subject: { kind: 'wfrun', id: wfRunId, name: 'two' } });
    expect(lines.at(-1)).toMatchObject({ kind: 'trailer', count: lines.length - 2 });
    expect(lines.filter((l) => l.kind === 'outputs').map((l) => [l.stepId, l.outputs])).toEqual([['a', { x: '1' }], ['b', {}]]);
    const file = join(dir, 'two.jsonl');
    writeFileSync(file, out.stdout);
    expect(b.run(['verify', file]).code).toBe(0);

    const since = a.run(['export', wfRunId, '--since', '1h']);
    expect(since.code).toBe(2);
    expect(since.stderr).toBe(`loops export: --since is for a loop; ${wfRunId} is a workflow run; drop --since, or name the loop\n`);
    const unknown = a.run(['export', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^loops: no run, workflow run or loop "nope"; /);
  });

  it('a loop with its runs since a time (--json summary)', { timeout: 120_000 }, () => {
    const a = sandbox();
    const b = sandbox();
    const dir = tempDir('loops-export-');
    expect(a.run(['create', 'command', 'tick', '--cmd', 'echo tick', '--manual']).code).toBe(0);
    expect(a.run(['run-now', 'tick']).code).toBe(0);
    const summary = a.json<{ file: string; subject: { kind: string; since: string }; streams: number }>(['export', 'tick', '--since', '1h', '-o', join(dir, 'tick.jsonl')]);
    expect(summary).toMatchObject({ subject: { kind: 'loop' }, streams: 2 });
    expect(b.run(['verify', summary.file]).code).toBe(0);
    expect(a.json<{ streams: number }>(['export', 'tick', '--since', '2999-01-01T00:00:00Z', '-o', join(dir, 'none.jsonl')]).streams).toBe(1);
  });
});
