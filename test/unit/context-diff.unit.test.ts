import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contextChanges, fieldHashes, firstFieldMismatch, hashValue, valueAt } from '../../src/machines/context-diff.js';
import { LOOPS_VERSION } from '../../src/runtime/acting.js';
import { applyChanges } from '../../src/runtime/admin/bundle-html.js';
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

  it('a list of entries naming their id is keyed like a map: the same paths and the same hashes (property)', () => {
    // A step-like entry: flat fields, a nested object, a null, some NaN (JSON: null) and undefined (JSON: absent).
    const entry = fc.record({
      status: fc.constantFrom('pending', 'running', 'failed'),
      attempt: fc.integer({ min: 0, max: 3 }),
      exitCode: fc.oneof(fc.constant(null), fc.integer(), fc.constant(Number.NaN)),
      outputs: fc.dictionary(fc.constantFrom('k', 'v'), fc.string()),
      note: fc.option(fc.string(), { nil: undefined }),
    });
    const steps = fc.uniqueArray(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), entry), { selector: ([id]) => id, maxLength: 4 });
    const asMap = (list: Array<[string, object]>) => ({ steps: Object.fromEntries(list.map(([id, e]) => [id, e])) });
    const asList = (list: Array<[string, object]>) => ({ steps: list.map(([id, e]) => ({ id, ...e })) });
    fc.assert(
      fc.property(steps, steps, fc.boolean(), (before, after, sameRefs) => {
        // Either fresh objects everywhere, or the after side keeping the before side's unchanged entries.
        const b = asList(before);
        const a = sameRefs ? { steps: asList(after).steps.map((e) => b.steps.find((x) => JSON.stringify(x) === JSON.stringify(e)) ?? e) } : asList(after);
        const fromMap = fieldHashes(contextChanges(asMap(before), asMap(after)));
        const fromList = fieldHashes(contextChanges(b, a));
        expect(fromList).toEqual(fromMap);
        for (const [id] of after) expect(valueAt(a, `steps.${id}`)).toEqual(valueAt(asMap(after), `steps.${id}`));
      }),
      { numRuns: 500 },
    );
  });

  it('entries are compared by their JSON: a new object with the same JSON is no change, whatever made it', () => {
    const e = { id: 'a', status: 'running', outputs: { k: 'v' }, code: null as number | null };
    expect(contextChanges({ steps: [e] }, { steps: [{ ...e, outputs: { k: 'v' } }] })).toEqual([]);
    expect(contextChanges({ steps: [e] }, { steps: [{ ...e, code: Number.NaN }] })).toEqual([]);
    expect(contextChanges({ steps: [e] }, { steps: [{ ...e, extra: undefined }] })).toEqual([]);
    // The same members in another order serialise differently: a change (as it always was for maps).
    const { id, code, ...rest } = e;
    expect(contextChanges({ steps: [e] }, { steps: [{ code, id, ...rest }] }).map((c) => c.path)).toEqual(['steps.a']);
    // Entries added, removed or moved: by id, before's order then the new ones.
    const b = { id: 'b', status: 'pending' };
    const c = { id: 'c', status: 'pending' };
    expect(contextChanges({ steps: [e, b] }, { steps: [c, e] })).toEqual([
      { path: 'steps.b', before: { status: 'pending' }, after: undefined },
      { path: 'steps.c', before: undefined, after: { status: 'pending' } },
    ]);
  });

  it('applying the changes to before gives after, for maps and for lists of entries (property; applyChanges is what the HTML page runs)', () => {
    const value = fc.oneof(fc.integer(), fc.string(), fc.dictionary(fc.constantFrom('x', 'y', 'z'), fc.integer()));
    const list = fc.uniqueArray(fc.record({ id: fc.constantFrom('p', 'q', 'r'), n: fc.integer() }), { selector: (e) => e.id, maxLength: 3 });
    const ctx = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'steps'), value).chain((c) => fc.oneof(fc.constant(c), list.map((l) => ({ ...c, list: l }))));
    fc.assert(
      fc.property(ctx, ctx, (before, after) => {
        const changes = contextChanges(before, after).map((c): [string] | [string, unknown] => (c.after === undefined ? [c.path] : [c.path, c.after]));
        const result = applyChanges(JSON.parse(JSON.stringify(before)), changes) as Record<string, unknown>;
        // A list's entries compare as a set keyed by id: a moved entry is no change.
        const norm = (c: Record<string, unknown>) => JSON.parse(JSON.stringify({ ...c, ...(Array.isArray(c.list) ? { list: [...(c.list as Array<{ id: string }>)].sort((x, y) => x.id.localeCompare(y.id)) } : {}) }));
        expect(norm(result)).toEqual(norm(after));
      }),
      { numRuns: 500 },
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
