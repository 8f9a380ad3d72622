import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain ESM script without types
import { check } from '../../scripts/check-layers.mjs';

describe('layer check (cli -> runtime -> {machines, projections} -> {workflow, scheduling} -> events; no import circle)', () => {
  it('finds no violation in src/', () => {
    expect(check()).toEqual([]);
  });

  it('reports upward imports, impure code in pure layers and value imports across layers', () => {
    const problems: string[] = check(join(__dirname, '..', 'fixtures', 'layers-bad'));
    const text = problems.join('\n');
    expect(text).toMatch(/machines\/bad\.ts:1: machines must not import the package node:fs/);
    expect(text).toMatch(/machines\/bad\.ts:2: machines must not import runtime/);
    expect(text).toMatch(/machines\/bad\.ts:3: machines is pure but uses Date\.now/);
    expect(text).toMatch(/projections\/bad\.ts:1: projections is pure and may import from events only types/);
    expect(text).toMatch(/events\/bad\.ts:1: events must not import machines/);
    expect(text).toMatch(/workflow\/bad\.ts:1: workflow must not import the package node:fs/);
    expect(text).toMatch(/scheduling\/bad\.ts:1: scheduling must not import runtime/);
    expect(text).toMatch(/scheduling\/bad\.ts:2: scheduling is pure but uses Date\.now/);
    expect(text).toMatch(/import circle: test\/fixtures\/layers-bad\/runtime\/a\.ts -> test\/fixtures\/layers-bad\/runtime\/b\.ts/);
  });
});
