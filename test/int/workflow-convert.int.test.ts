/**
 * `loops workflows convert` as a function: a spec file in the native form, read back to the same
 * spec — every field the canonical spec can hold (accounts, isolation, retries, inputs, agent
 * limits), relative paths made absolute when the output goes elsewhere, and a refusal naming the
 * field when a round trip would change the meaning.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { convertWorkflowFile, durationSpelling } from '../../src/runtime/workflows/convert.js';
import { loadWorkflowFile } from '../../src/runtime/workflows/files.js';
import { tempDir } from '../helpers/tmp.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'workflows');

describe('convertWorkflowFile', () => {
  it('durations are written exactly', () => {
    expect([1, 999, 1000, 90_000, 5_400_000, 86_400_000 + 1500].map(durationSpelling)).toEqual(['1ms', '999ms', '1s', '1m30s', '1h30m', '1d1s500ms']);
  });

  it.each(['predecessor.json', 'predecessor-readme.json', 'diamond.yaml'])('%s: the native text gives the very spec the source gives', (name) => {
    const file = join(FIXTURES, name);
    const converted = convertWorkflowFile(file);
    const out = join(tempDir('loops-convert-'), 'out.yaml');
    writeFileSync(out, converted.text);
    const source = loadWorkflowFile(file).spec;
    expect(loadWorkflowFile(out).spec).toEqual(source);
    expect(loadWorkflowFile(out).format).toBe('native');
    if (name.startsWith('predecessor')) expect(parseYaml(converted.text).execution).toBe('sequential');
    else expect(parseYaml(converted.text).execution).toBeUndefined();
  });

  it('keeps accounts (a command step names its tool), isolation, retries, inputs and limits', () => {
    const dir = tempDir('loops-convert-');
    const file = join(dir, 'native.yaml');
    writeFileSync(
      file,
      [
        'name: rich',
        'version: 2026.1',
        'concurrency: 2',
        'timeout: 1h',
        'inputs: { branch: main, level: { description: how much, required: true } }',
        'secrets: [GH_TOKEN]',
        'steps:',
        '  - { id: a, command: gh, args: [pr, list], account: { profile: work, tool: gh }, retries: { limit: 2, delay: 5s, backoff: 3, max-delay: 1m } }',
        '  - id: b',
        '    needs: a',
        '    if: always()',
        '    outputs: [summary]',
        '    agent: { provider: claude, prompt: "fix ${{ inputs.branch }}", config-isolation: empty, account: { profile: p, tool: codex }, max-turns: 3, idle-timeout: 5m }',
      ].join('\n'),
    );
    const converted = convertWorkflowFile(file);
    const out = join(dir, 'out.yaml');
    writeFileSync(out, converted.text);
    expect(loadWorkflowFile(out).spec).toEqual(loadWorkflowFile(file).spec);
    expect(parseYaml(converted.text)).toMatchObject({ concurrency: 2, version: '2026.1' });
  });

  it('relative cwd is made absolute when the output is written to another directory', () => {
    const dir = tempDir('loops-convert-');
    mkdirSync(join(dir, 'src'));
    const file = join(dir, 'src', 'wf.json');
    writeFileSync(file, JSON.stringify({ name: 'rel', steps: [{ id: 'a', target: { type: 'command', command: 'true', cwd: 'app' } }] }));
    expect(parseYaml(convertWorkflowFile(file, { outFile: join(dir, 'src', 'wf.yaml') }).text).steps[0].cwd).toBe('app');
    expect(parseYaml(convertWorkflowFile(file, { outFile: join(dir, 'wf.yaml') }).text).steps[0].cwd).toBe(join(dir, 'src', 'app'));
  });
});
