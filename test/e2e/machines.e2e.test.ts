/**
 * `loops machines list` / `loops machines export` through the built binary: the registry's
 * machines with every version kept, and a version's definition as JSON — the same definition the
 * package's `./machines` entry exports (`machine.toJSON()`), so a visualizer reads what replays.
 */
import { describe, expect, it } from 'vitest';
import { workflowRunMachine } from '../../src/machines/workflow-run.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

describe('loops machines', () => {
  it('list: every machine, its id, current version and the versions kept', () => {
    const s = sandbox();
    const list = s.json<Array<{ name: string; id: string; current: number; versions: number[] }>>(['machines', 'list']);
    expect(list.find((m) => m.name === 'workflowRun')).toEqual({ name: 'workflowRun', id: 'loops.workflow-run', current: 2, versions: [1, 2] });
    expect(list.map((m) => m.name)).toEqual(expect.arrayContaining(['run', 'loop', 'workflow', 'notice']));
    const text = s.run(['machines', 'list']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^NAME\s+ID\s+CURRENT\s+VERSIONS/);
    expect(text.stdout).toMatch(/workflowRun\s+loops\.workflow-run\s+2\s+1, 2/);
  });

  it('export: the definition as JSON, by name or id, current or --version N', () => {
    const s = sandbox();
    const current = s.json<{ id: string; version: number; current: boolean; definition: { id: string; states: Record<string, unknown> } }>(['machines', 'export', 'workflowRun']);
    expect(current).toMatchObject({ id: 'loops.workflow-run', version: 2, current: true });
    expect(current.definition).toEqual(JSON.parse(JSON.stringify(workflowRunMachine.toJSON())));
    expect(Object.keys(current.definition.states)).toEqual(['new', 'running', 'ended', 'succeeded', 'failed', 'cancelled', 'timed_out']);
    const old = s.json<{ version: number; current: boolean }>(['machines', 'export', 'loops.workflow-run', '--version', '1']);
    expect(old).toMatchObject({ version: 1, current: false });
  });

  it('refuses an unknown machine or version with exit 2 and a hint, no stack trace', () => {
    const s = sandbox();
    const unknown = s.run(['machines', 'export', 'rnu']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no machine named "rnu"; did you mean run\?/);
    const version = s.run(['machines', 'export', 'run', '--version', '9']);
    expect(version.code).toBe(2);
    expect(version.stderr).toMatch(/machine run has no version 9; its versions: 1/);
    expect(`${unknown.stderr}${version.stderr}`).not.toMatch(/\n\s+at /);
  });
});
