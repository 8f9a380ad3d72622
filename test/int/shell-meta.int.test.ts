/**
 * Shell metacharacters in every templated or passed-on field (issue 11, hostile input): a value full
 * of `; | & $() \` ' " \n * ?` — or a `${{ … }}` of its own — reaches the process as data, never as
 * shell syntax. Real processes print what they got (test/fixtures/report.mjs: argv, cwd, env; the
 * fake agent CLIs log their prompt and argv), compared with what was given:
 *  - a workflow's inputs and a step's outputs substituted into a later step's args, env and cwd and
 *    into an agent step's prompt, prompt-file and extra-args (`${{ inputs.… }}`, `${{ steps.….outputs.… }}`);
 *  - a loop's --arg (no shell) and --env (read by shell text as "$X"), and an agent loop's prompt.
 * And nothing the values spell ran: no file PWNED anywhere the steps ran.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createAgentLoop, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { fixture } from '../helpers/fixtures.js';
import { fuzzParams, shellText } from '../helpers/fuzz.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const N = 5;
const REPORT = fixture('report.mjs');

/** Shell syntax, and templates of our own, in a value: no NUL (no argv or variable can hold one). */
const value = fc
  .oneof(
    { weight: 4, arbitrary: shellText },
    { weight: 1, arbitrary: fc.constantFrom('${{ inputs.v0 }}', '${{ steps.emit.outputs.o1 }}', '$${{ inputs.v1 }}', '"; touch PWNED; echo "', "'; touch PWNED; '", '$(touch PWNED)', '`touch PWNED`', '\n touch PWNED \n', '-c', '--version', '', ' ') },
  )
  .filter((v) => !v.includes('\0'));

/** Sets variables for the current test (the fake agent CLIs first on PATH, their log). */
function withEnv(vars: Record<string, string>): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  onTestFinished(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

function agentLog(file: string): Array<{ argv: string[]; prompt: string; cwd: string }> {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { argv: string[]; prompt: string; cwd: string }) : [];
}

/** Every file named PWNED under these directories. */
function pwned(...dirs: string[]): string[] {
  return dirs.flatMap((dir) => (readdirSync(dir, { recursive: true, encoding: 'utf8' }) as string[]).filter((f) => f.split('/').pop() === 'PWNED').map((f) => join(dir, f)));
}

describe('shell metacharacters reach processes as data', () => {
  it("a workflow's inputs and outputs, substituted into args, env, cwd and an agent's prompt, prompt-file and extra-args, arrive byte for byte", async () => {
    const runtime = await useRuntime();
    const root = tempDir();
    const sandbox = join(root, 'sandbox');
    mkdirSync(sandbox);
    const log = join(root, 'agent.jsonl');
    withEnv({ PATH: `${fixture('agents')}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: log });
    const file = join(root, 'meta.yaml');
    const range = Array.from({ length: N }, (_, i) => i);
    // Step emit copies its V* variables into its outputs o*; show prints what it got; ask is an agent.
    const emit = `const fs = require('fs'); const out = {}; for (let i = 0; i < ${N}; i++) out['o' + i] = process.env['V' + i]; fs.writeFileSync(process.env.LOOPS_OUTPUT, JSON.stringify(out));`;
    const spec = {
      name: 'meta',
      inputs: Object.fromEntries([...range.map((i) => [`v${i}`, null]), ['dir', null]]),
      steps: [
        { id: 'emit', command: process.execPath, args: ['-e', emit], cwd: sandbox, env: Object.fromEntries(range.map((i) => [`V${i}`, `\${{ inputs.v${i} }}`])), outputs: range.map((i) => `o${i}`) },
        {
          id: 'show',
          needs: 'emit',
          command: REPORT,
          args: [...range.map((i) => `\${{ inputs.v${i} }}`), ...range.map((i) => `\${{ steps.emit.outputs.o${i} }}`), 'x${{ inputs.v0 }}y${{ steps.emit.outputs.o1 }}z'],
          cwd: '${{ inputs.dir }}',
          env: {
            REPORT_ENV: [...range.map((i) => `I${i}`), ...range.map((i) => `O${i}`)].join(','),
            ...Object.fromEntries(range.map((i) => [`I${i}`, `\${{ inputs.v${i} }}`])),
            ...Object.fromEntries(range.map((i) => [`O${i}`, `\${{ steps.emit.outputs.o${i} }}`])),
          },
        },
        {
          id: 'ask',
          needs: 'emit',
          agent: { provider: 'claude', prompt: 'first: ${{ inputs.v0 }}\nthen: ${{ steps.emit.outputs.o1 }}', 'extra-args': ['--append-system-prompt=${{ inputs.v2 }}', '--settings=${{ steps.emit.outputs.o3 }}'] },
          cwd: sandbox,
        },
        { id: 'read', needs: 'emit', agent: { provider: 'claude', 'prompt-file': '${{ inputs.dir }}/prompt.md' }, cwd: sandbox },
      ],
    };
    writeFileSync(file, stringify(spec));
    await createWorkflow(runtime, file);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: N, maxLength: N }), async (values) => {
        // A directory whose name is itself shell syntax, given as the cwd input.
        const dir = join(root, `d${n++} ;$(touch PWNED)&|\`id\`'"*?`);
        mkdirSync(dir);
        writeFileSync(join(dir, 'prompt.md'), `from the file: ${values[4]}`);
        const inputs = { ...Object.fromEntries(values.map((v, i) => [`v${i}`, v])), dir };
        const before = agentLog(log).length;
        const { run } = await runWorkflow(runtime, 'meta', { inputs });
        const steps = workflowRunSteps(runtime.db, run.id);
        expect(run.status, JSON.stringify(steps.map((s) => [s.stepId, s.status, s.error, s.stderr]))).toBe('succeeded');
        const shown = JSON.parse(steps.find((s) => s.stepId === 'show')!.stdout) as { argv: string[]; cwd: string; env: Record<string, string> };
        expect(shown.argv).toEqual([...values, ...values, `x${values[0]}y${values[1]}z`]);
        expect(shown.cwd).toBe(dir);
        expect(shown.env).toEqual({ ...Object.fromEntries(values.map((v, i) => [`I${i}`, v])), ...Object.fromEntries(values.map((v, i) => [`O${i}`, v])) });
        expect(steps.find((s) => s.stepId === 'emit')!.outputs).toEqual(Object.fromEntries(values.map((v, i) => [`o${i}`, v])));
        const asked = agentLog(log).slice(before);
        const ask = asked.find((l) => l.prompt.startsWith('first: '))!;
        expect(ask, JSON.stringify(asked)).toBeDefined();
        expect(ask.prompt).toBe(`first: ${values[0]}\nthen: ${values[1]}`);
        // The extra arguments, each one argument (they were passed as written, templates and all, before).
        expect(ask.argv.slice(-2)).toEqual([`--append-system-prompt=${values[2]}`, `--settings=${values[3]}`]);
        // A prompt-file path with a template is read from where it points (the literal path before).
        expect(asked.filter((l) => l !== ask).map((l) => l.prompt)).toEqual([`from the file: ${values[4]}`]);
        expect(pwned(root, process.cwd())).toEqual([]);
      }),
      fuzzParams(0x11e1, 4),
    );
  });

  it("a loop's --arg (no shell), its --env read by shell text as \"$X\", and an agent loop's prompt arrive byte for byte", async () => {
    const runtime = await useRuntime();
    const root = tempDir();
    const sandbox = join(root, 'sandbox');
    mkdirSync(sandbox);
    const log = join(root, 'agent.jsonl');
    withEnv({ PATH: `${fixture('agents')}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: log });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: N, maxLength: N }), async (values) => {
        const k = n++;
        const env = Object.fromEntries(values.map((v, i) => [`X${i}`, v]));
        const names = values.map((_, i) => `X${i}`);
        await createCommandLoop(runtime, { name: `argv-${k}`, command: REPORT, shell: false, args: values, cwd: sandbox, env: { ...env, REPORT_ENV: names.join(',') }, schedule: { manual: true } });
        await createCommandLoop(runtime, {
          name: `shell-${k}`,
          // The user's shell text expands the variables inside double quotes: their values are not parsed again.
          command: `"${process.execPath}" "${REPORT}" ${names.map((x) => `"$${x}"`).join(' ')}`,
          cwd: sandbox,
          env: { ...env, REPORT_ENV: names.join(',') },
          schedule: { manual: true },
        });
        await createAgentLoop(runtime, { name: `agent-${k}`, provider: 'claude', prompt: `p:${values.join('|')}`, cwd: sandbox, schedule: { manual: true } });
        for (const name of [`argv-${k}`, `shell-${k}`]) {
          const run = await runNow(runtime, name);
          expect(run.status, `${name}: ${run.error}`).toBe('succeeded');
          const shown = JSON.parse(run.stdout) as { argv: string[]; env: Record<string, string> };
          expect(shown.argv).toEqual(values);
          expect(shown.env).toEqual(env);
        }
        const before = agentLog(log).length;
        expect((await runNow(runtime, `agent-${k}`)).status).toBe('succeeded');
        expect(agentLog(log).slice(before).map((l) => l.prompt)).toEqual([`p:${values.join('|')}`]);
        expect(pwned(root, process.cwd())).toEqual([]);
      }),
      fuzzParams(0x11e2, 3),
    );
  });

  it('what it found: an agent step whose prompt-file cannot be read fails to start, naming the file — it started the bare CLI, with no prompt', async () => {
    const runtime = await useRuntime();
    const root = tempDir();
    const log = join(root, 'agent.jsonl');
    withEnv({ PATH: `${fixture('agents')}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: log });
    const file = join(root, 'missing.yaml');
    writeFileSync(file, stringify({ name: 'missing', inputs: { which: 'gone' }, steps: [{ id: 'read', agent: { provider: 'claude', 'prompt-file': `${root}/\${{ inputs.which }}.md` } }] }));
    await createWorkflow(runtime, file);
    const { run } = await runWorkflow(runtime, 'missing');
    expect(run.status).toBe('failed');
    const [step] = workflowRunSteps(runtime.db, run.id);
    expect(step!.error).toBe(`ENOENT: no such file or directory, open '${root}/gone.md'`);
    expect(agentLog(log)).toEqual([]);
  });
});
