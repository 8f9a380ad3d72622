import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contextChanges, fieldHashes, firstFieldMismatch, hashValue, valueAt } from '../../src/machines/context-diff.js';
import { LOOPS_VERSION } from '../../src/runtime/acting.js';
import { readFileSync } from 'node:fs';

describe('contextChanges', () => {
  it('names top-level fields, and entries of a keyed map as key.entry', () => {
    const lint = { status: 'running' };
    const before = { status: 'running', steps: { lint, test: { status: 'pending' } }, attempts: 1 };
    const after = { ...before, steps: { ...before.steps, test: { status: 'running' } }, attempts: 2, error: 'x' };
    expect(contextChanges(before, after)).toEqual([
      { path: 'steps.test', before: { status: 'pending' }, after: { status: 'running' } },
      { path: 'attempts', before: 1, after: 2 },
      { path: 'error', before: undefined, after: 'x' },
    ]);
    expect(valueAt(after, 'steps.test')).toEqual({ status: 'running' });
    expect(valueAt(after, 'attempts')).toBe(2);
  });

  it('a new object with the same JSON is no change; arrays compare whole', () => {
    expect(contextChanges({ a: { b: [1] } }, { a: { b: [1] } })).toEqual([]);
    expect(contextChanges({ a: [1, 2] }, { a: [1, 3] })).toEqual([{ path: 'a', before: [1, 2], after: [1, 3] }]);
  });

  it('applying the changes to before gives after (property)', () => {
    const ctx = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'steps'), fc.oneof(fc.integer(), fc.string(), fc.dictionary(fc.constantFrom('x', 'y', 'z'), fc.integer())));
    fc.assert(
      fc.property(ctx, ctx, (before, after) => {
        const result: Record<string, unknown> = JSON.parse(JSON.stringify(before));
        for (const { path, after: value } of contextChanges(before, after)) {
          const [key, entry] = path.split('.') as [string, string | undefined];
          if (entry === undefined) {
            if (value === undefined) delete result[key];
            else result[key] = value;
          } else {
            const map = result[key] as Record<string, unknown>;
            if (value === undefined) delete map[entry];
            else map[entry] = value;
          }
        }
        expect(result).toEqual(JSON.parse(JSON.stringify(after)));
      }),
      { numRuns: 300 },
    );
  });
});

describe('field hashes', () => {
  it('differ for different values, agree for equal ones, and name the first field that differs', () => {
    expect(hashValue({ a: 1 })).toBe(hashValue({ a: 1 }));
    expect(hashValue({ a: 1 })).not.toBe(hashValue({ a: 2 }));
    expect(hashValue(undefined)).toBe('-');
    expect(hashValue('x')).toMatch(/^[0-9a-f]{14}$/);
    const recorded = fieldHashes([{ path: 'steps.lint', before: null, after: { status: 'failed' } }]);
    const replayed = fieldHashes([{ path: 'steps.lint', before: null, after: { status: 'succeeded' } }]);
    expect(firstFieldMismatch(recorded, recorded)).toBeNull();
    expect(firstFieldMismatch(recorded, replayed)).toEqual({ path: 'steps.lint', recorded: recorded['steps.lint'], replayed: replayed['steps.lint'] });
    expect(firstFieldMismatch({}, replayed)).toEqual({ path: 'steps.lint', recorded: null, replayed: replayed['steps.lint'] });
  });
});

describe('LOOPS_VERSION', () => {
  it('is package.json version', () => {
    expect(LOOPS_VERSION).toBe((JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version);
  });
});
