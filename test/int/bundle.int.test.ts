/**
 * Audit bundles (loops export / loops verify <bundle>) on real runs in a real data directory: a
 * 4-step workflow run and a command loop's runs are exported, the bundle verifies with nothing but
 * the file, and every way of damaging it — a flipped byte in an event line (at many places), a cut
 * file, a missing trailer, two lines swapped, a changed output file — fails naming what is wrong.
 * Secret values the log holds in clear never reach the bundle, and it still verifies.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EventData, Target } from '../../src/events/catalog.js';
import { ValidationError } from '../../src/events/errors.js';
import { fold } from '../../src/machines/fold.js';
import { getMachine } from '../../src/machines/registry.js';
import { bundleLines, collectBundle, writeBundleFile, type CollectedBundle } from '../../src/runtime/admin/bundle.js';
import type { BundleEntry } from '../../src/runtime/admin/bundle-format.js';
import { verifyBundle } from '../../src/runtime/admin/bundle-verify.js';
import { applyChanges, pageData, scriptJson } from '../../src/runtime/admin/bundle-html.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { newId } from '../../src/runtime/ids.js';
import { createCommandLoop, recordLoopCreated } from '../../src/runtime/loops/commands.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { leakForms } from '../helpers/secrets.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const FOUR_STEPS = `name: four
steps:
  - id: build
    run: echo building; printf 'version=1.2.3\\n' >> "$LOOPS_OUTPUT"
  - id: lint
    needs: build
    run: echo linting >&2
  - id: test
    needs: build
    command: echo
    args: ["testing \${{ steps.build.outputs.version }}"]
  - id: report
    needs: [lint, test]
    run: echo report
`;

async function fourStepRun(runtime: Runtime): Promise<string> {
  const file = join(tempDir(), 'four.yaml');
  writeFileSync(file, FOUR_STEPS);
  await createWorkflow(runtime, file);
  const { run } = await runWorkflow(runtime, 'four');
  expect(run.status).toBe('succeeded');
  return run.id;
}

async function exported(runtime: Runtime, ref: string, since: string | null = null): Promise<{ bundle: CollectedBundle; file: string; lines: string[] }> {
  const bundle = await collectBundle(runtime.db, runtime.log, runtime.dataDir, ref, { since, now: new Date(runtime.clock.now()).toISOString() });
  const file = join(tempDir(), 'x.loops-bundle.jsonl');
  writeBundleFile(file, bundleLines(bundle));
  return { bundle, file, lines: readFileSync(file, 'utf8').split('\n').slice(0, -1) };
}

/** Writes `lines` (joined, with a final newline unless `cut`) to a new file and verifies it. */
function verifyLines(lines: string[], cut = false) {
  const file = join(tempDir(), 'damaged.jsonl');
  writeFileSync(file, lines.join('\n') + (cut ? '' : '\n'));
  return verifyBundle(file);
}

describe('bundle: a 4-step workflow run', () => {
  it('holds the workflow run and definition streams, the step outputs and every output file; verifies with the file alone', async () => {
    const runtime = await useRuntime();
    const wfRunId = await fourStepRun(runtime);
    const { bundle, file, lines } = await exported(runtime, wfRunId.slice(0, 12));
    expect(bundle.header.subject).toMatchObject({ kind: 'wfrun', id: wfRunId, name: 'four' });
    expect(bundle.header.streams.map((s) => s.streamId)).toEqual([`wfrun:${wfRunId}`, expect.stringMatching(/^workflow:/)]);
    expect(bundle.header.definitions.workflows).toEqual([expect.objectContaining({ name: 'four', version: 1 })]);
    const outputs = bundle.entries.filter((e) => e.kind === 'outputs');
    expect(outputs.map((o) => o.kind === 'outputs' && [o.stepId, o.outputs])).toEqual([
      ['build', { version: '1.2.3' }],
      ['lint', {}],
      ['test', {}],
      ['report', {}],
    ]);
    const files = bundle.entries.flatMap((e) => (e.kind === 'file' ? [[e.path, e.content]] : []));
    expect(files).toContainEqual([`runs/${wfRunId}/build/1/stdout.log`, 'building\n']);
    expect(files).toContainEqual([`runs/${wfRunId}/lint/1/stderr.log`, 'linting\n']);
    expect(files).toContainEqual([`runs/${wfRunId}/test/1/stdout.log`, 'testing 1.2.3\n']);

    const report = verifyBundle(file);
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ ok: true, events: bundle.header.streams.reduce((n, s) => n + s.events, 0), files: files.length, head: JSON.parse(lines.at(-1)!).head });
    // The HTML view's data: one bar per step, a state per event, `<` never raw in the embedded JSON.
    const page = pageData(bundle);
    expect(page.bars.map((b) => `${b.label} ${b.status}`).sort()).toEqual(['build succeeded', 'lint succeeded', 'report succeeded', 'test succeeded']);
    expect(page.states).toHaveLength(report.events);
    expect(page.events[0]!.type).toBe('workflow.created'); // log order: the definition came first
    expect(page.states.at(-1)!.state).toBe('succeeded');
    // Each event carries only its changes; applied in order from the stream's initial context, they give the context the log folds to.
    const wfStream = `wfrun:${wfRunId}`;
    let ctx = page.initial[wfStream];
    page.states.forEach((st, i) => {
      if (page.events[i]!.stream === wfStream) ctx = applyChanges(ctx, st.changes!);
    });
    const header = bundle.header.streams.find((st) => st.streamId === wfStream)!;
    const folded = fold(getMachine({ id: header.machineId!, version: header.machineVersion! })!, bundle.entries.filter((e) => e.kind === 'event' && e.stream === wfStream) as Array<{ type: string; at: string; data: unknown }>);
    expect(ctx).toEqual(folded.snapshot.context);
    expect(ctx).toMatchObject({ wfRunId, steps: [{ id: 'build' }, { id: 'lint' }, { id: 'test' }, { id: 'report' }] });
    expect(scriptJson({ out: '</script><!-- x' })).toBe('{"out":"\\u003c/script>\\u003c!-- x"}');
    // Every event recorded its context changes, and replay checked them.
    expect(bundle.entries.filter((e) => e.kind === 'event' && e.stream.startsWith('wfrun:')).every((e) => e.kind === 'event' && e.meta.ctx)).toBe(true);
  });

  it('a flipped byte anywhere in an event line fails verify, naming the line, stream, version and type', async () => {
    const runtime = await useRuntime();
    const wfRunId = await fourStepRun(runtime);
    const { bundle, lines } = await exported(runtime, wfRunId);
    const events = bundle.entries.flatMap((e, i) => (e.kind === 'event' ? [{ e, line: i + 2 }] : []));
    fc.assert(
      fc.property(fc.nat(events.length - 1), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), fc.integer({ min: 0, max: 7 }), (which, where, bit) => {
        const { e, line } = events[which]!;
        const text = Buffer.from(lines[line - 1]!, 'utf8');
        const at = Math.floor(where * text.length);
        text[at] = text[at]! ^ (1 << bit);
        // The file's bytes with exactly that one bit flipped (bit 7 makes invalid UTF-8).
        const file = join(tempDir(), 'flipped.jsonl');
        writeFileSync(file, Buffer.concat(lines.map((l, i) => Buffer.concat([i === line - 1 ? text : Buffer.from(l, 'utf8'), Buffer.from('\n')]))));
        const report = verifyBundle(file);
        expect(report.ok).toBe(false);
        expect(report.problems[0]).toMatch(new RegExp(`^line ${line} \\(event ${e.kind === 'event' ? e.stream : ''} v${e.kind === 'event' ? e.version : 0} \\(`));
      }),
      { numRuns: 150 },
    );
    // A change that keeps the line valid JSON names the type too.
    const { e, line } = events[3]!;
    const damaged = [...lines];
    damaged[line - 1] = damaged[line - 1]!.replace(/"at":"(\d)/, (_m, d: string) => `"at":"${(Number(d) + 1) % 10}`);
    const report = verifyLines(damaged);
    expect(report.problems).toEqual([`line ${line} (event ${e.kind === 'event' ? `${e.stream} v${e.version} (${e.type})` : ''}): its hash does not match its content: the event was changed`]);
  });

  it('a bundle re-chained after an edit still fails: replay does not reproduce the recorded state or field', async () => {
    const runtime = await useRuntime();
    const wfRunId = await fourStepRun(runtime);
    const { bundle } = await exported(runtime, wfRunId);
    const rechain = (edit: (e: BundleEntry) => BundleEntry) => {
      const file = join(tempDir(), 'rechained.jsonl');
      writeBundleFile(file, bundleLines({ ...bundle, entries: bundle.entries.map((e) => edit(structuredClone(e))) }));
      return verifyBundle(file).problems;
    };
    const line = (type: string, stepId: string) => 2 + bundle.entries.findIndex((e) => e.kind === 'event' && e.type === type && (e.data as { stepId?: string }).stepId === stepId);
    // The lint step's exit code 0 → 3: replay then fails the step, which the recorded field hash denies.
    const lint = rechain((e) => (e.kind === 'event' && e.type === 'step.exited' && (e.data as { stepId: string }).stepId === 'lint' ? { ...e, data: { ...(e.data as object), exitCode: 3 } } : e));
    expect(lint[0]).toMatch(new RegExp(`^line ${line('step.exited', 'lint')} \\(event wfrun:${wfRunId} v\\d+ \\(step\\.exited\\)\\): field steps\\.lint: replay changed it to .*"status":"failed"`));
    // A recorded state changed: the last event says the run is still running.
    const last = bundle.entries.filter((e) => e.kind === 'event' && e.stream === `wfrun:${wfRunId}`).at(-1)!;
    const problems = rechain((e) => (e.kind === 'event' && e.stream === `wfrun:${wfRunId}` && e.kind === last.kind && e.version === (last as { version: number }).version ? { ...e, state: 'running' } : e));
    expect(problems).toEqual([expect.stringMatching(/v\d+ \(step\.exited\)\): replayed state "succeeded" but the log recorded "running"$/)]);
  });

  it('a cut file, a missing trailer, two lines swapped and a changed output file each fail with their own message; a file that is not a bundle is refused', async () => {
    const runtime = await useRuntime();
    const wfRunId = await fourStepRun(runtime);
    const { lines } = await exported(runtime, wfRunId);

    const cut = lines.join('\n').slice(0, -40).split('\n');
    expect(verifyLines(cut, true).problems).toEqual([expect.stringMatching(new RegExp(`^line ${cut.length} \\(.*\\): cut short \\(no newline at its end\\): the file is truncated$`)), `no trailer: the bundle ends at line ${cut.length} without one: it is truncated`]);

    expect(verifyLines(lines.slice(0, -1)).problems).toEqual([`no trailer: the bundle ends at line ${lines.length - 1} without one: it is truncated`]);
    expect(verifyLines(lines.slice(0, -2).concat(lines.at(-1)!)).problems).toEqual([expect.stringMatching(/^trailer \(line \d+\): it counts \d+ chained line\(s\), the file has \d+/), expect.stringMatching(/head hash is not the last line's hash/)]);

    const swapped = [...lines];
    [swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!];
    expect(verifyLines(swapped).problems[0]).toMatch(/^line 4 \(event wfrun:\S+ v3 \([a-z_.]+\)\): does not follow line 3 \(its prev is not that line's hash\): a line was removed, inserted or moved$/);

    const fileLine = lines.findIndex((l) => l.includes('"content":"building\\n"'));
    const changed = [...lines];
    changed[fileLine] = changed[fileLine]!.replace('"content":"building\\n"', '"content":"bulding!\\n"');
    const problems = verifyLines(changed).problems;
    expect(problems[0]).toBe(`line ${fileLine + 1} (output file runs/${wfRunId}/build/1/stdout.log): its hash does not match its content: the output file was changed`);
    expect(problems[1]).toMatch(/its content's sha256 is [0-9a-f]{64}, the bundle recorded [0-9a-f]{64}: the output file was changed$/);

    // -o never replaces what export did not write: a directory, a workflow file; a bundle it replaces.
    const dir = tempDir();
    const spec = join(dir, 'four.yaml');
    writeFileSync(spec, FOUR_STEPS);
    expect(() => writeBundleFile(spec, lines)).toThrow(`loops export: ${spec} exists and is not a file loops export wrote; it is left as it is`);
    expect(readFileSync(spec, 'utf8')).toBe(FOUR_STEPS);
    expect(() => writeBundleFile(dir, lines)).toThrow(`loops export: ${dir} exists and is not a file`);
    expect(() => writeBundleFile(join(dir, 'no', 'such.jsonl'), lines)).toThrow(expect.objectContaining({ code: 'usage', message: `loops export: cannot write ${join(dir, 'no', 'such.jsonl')} (ENOENT)` }));
    expect(() => writeBundleFile(join(dir, 'x'.repeat(300)), lines)).toThrow(expect.objectContaining({ code: 'usage', message: expect.stringMatching(/\(ENAMETOOLONG\)$/) }));
    const again = join(dir, 'again.jsonl');
    writeBundleFile(again, lines);
    writeBundleFile(again, lines.slice(0, 1));
    expect(readFileSync(again, 'utf8')).toBe(`${lines[0]}\n`);
    expect(readdirSync(dir).sort()).toEqual(['again.jsonl', 'four.yaml']);

    const notBundle = join(tempDir(), 'events.json');
    writeFileSync(notBundle, '{"hello":"world"}\n');
    expect(() => verifyBundle(notBundle)).toThrow(ValidationError);
    expect(() => verifyBundle(notBundle)).toThrow(/is not a loops bundle: its first line is not a loops-bundle header/);
  });
});

const LEGACY = 'tok-legacy-4f9a1c77e2d0';

describe('bundle: a loop with a secret stored in clear', () => {
  it('masks the value in every event and file, still verifies (the masked fields are named unchecked), and --since keeps the later runs only', async () => {
    const runtime = await useRuntime();
    const now = runtime.clock.now();
    const loopId = newId('loop', now);
    const target: Target = { kind: 'command', command: 'echo "token=$CLI_TOKEN"', args: [], shell: true, cwd: null, env: { CLI_TOKEN: LEGACY } };
    // The policies a loop gets today (every field), from a loop created the usual way.
    const policies: EventData<'loop.created'>['policies'] = (await createCommandLoop(runtime, { name: 'model', command: 'true', schedule: { manual: true, tz: 'UTC' } })).policies;
    await recordLoopCreated(runtime, {
      loopId,
      name: 'sync',
      description: 'from an older loops',
      schedule: { kind: 'manual' },
      timing: { tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null },
      target,
      policies,
      nextRunAt: null,
    });
    const first = await runNow(runtime, 'sync');
    const second = await runNow(runtime, 'sync');

    const { bundle, file } = await exported(runtime, 'sync');
    const text = readFileSync(file, 'utf8');
    for (const form of leakForms(LEGACY)) expect(text).not.toContain(form);
    expect(bundle.header.masked.secrets).toBeGreaterThanOrEqual(1); // and whatever this environment holds under secret names
    expect(bundle.header.streams.map((s) => s.streamId)).toEqual([`loop:${loopId}`, `run:${first.id}`, `run:${second.id}`]);
    expect(bundle.header.definitions.loops[0]!.events.map((e) => e.type)).toEqual(['loop.created']);
    expect(text).toContain('token=***');
    const report = verifyBundle(file);
    expect(report.problems).toEqual([]);
    expect(report.uncheckedFields).toBeGreaterThan(0);

    const { bundle: later } = await exported(runtime, loopId, second.claimedAt);
    expect(later.header.streams.map((s) => s.streamId)).toEqual([`loop:${loopId}`, `run:${second.id}`]);
    expect(later.header.subject.since).toBe(second.claimedAt);
  });
});
