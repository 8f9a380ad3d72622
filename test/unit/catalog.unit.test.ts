import { describe, expect, it } from 'vitest';
import { eventSchemas, isEventType, schemaVersion, upcast, validateEventData, type EventType } from '../../src/events/catalog.js';
import { LoopsError, ValidationError, isLoopsError, ConcurrencyConflictError } from '../../src/events/errors.js';
import { loopEv, runEv, slotEv, wfrunEv, workflowEv, accountEv, retentionEv, noticeEv, hostEv } from '../helpers/events.js';

function messageOf(type: string, data: unknown): string {
  try {
    validateEventData(type, data);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as Error).message;
  }
  throw new Error('expected a validation error');
}

describe('event catalogue', () => {
  it('every builder used by the tests produces a valid payload', () => {
    const samples = [
      loopEv.created(),
      loopEv.paused('x'),
      loopEv.resumed(),
      loopEv.stopped(),
      loopEv.archived(),
      loopEv.removed(),
      runEv.claimed(),
      runEv.spawnRequested(),
      runEv.spawned(),
      runEv.spawnFailed(),
      runEv.cancelRequested('r'),
      runEv.exited(),
      runEv.abandoned(),
      runEv.adopted(),
      runEv.agentReported(),
      accountEv.added(),
      accountEv.removed(),
      runEv.workflowStarted(),
      runEv.workflowEnded(),
      runEv.imported(),
      wfrunEv.imported(),
      loopEv.expired(),
      loopEv.rescheduled(),
      slotEv.fired(),
      slotEv.skipped(),
      slotEv.buffered(),
      slotEv.retryScheduled(),
      slotEv.coalesced(),
      slotEv.missed(),
      slotEv.dropped(),
      workflowEv.created(),
      workflowEv.updated(),
      workflowEv.archived('old'),
      wfrunEv.started(),
      wfrunEv.spawnRequested('a'),
      wfrunEv.spawned('a'),
      wfrunEv.spawnFailed('a'),
      wfrunEv.exited('a'),
      wfrunEv.abandoned('a'),
      wfrunEv.retryDue('a'),
      wfrunEv.skipped('b'),
      wfrunEv.retryScheduled('a'),
      wfrunEv.cancelRequested('r'),
      wfrunEv.timedOut(),
      wfrunEv.reused('a'),
      wfrunEv.forked(),
      retentionEv.runOutputPruned(),
      retentionEv.wfrunOutputPruned(),
      retentionEv.archived(),
      noticeEv.requested(),
      noticeEv.hookClaimed(),
      noticeEv.hookEnded(),
      noticeEv.attemptFailed(),
      noticeEv.delivered(),
      noticeEv.givenUp(),
      hostEv.started(),
      hostEv.stopped(),
    ];
    expect(new Set(samples.map((s) => s.type))).toEqual(new Set(Object.keys(eventSchemas)));
    for (const sample of samples) expect(validateEventData(sample.type, sample.data)).toEqual(sample.data);
  });

  it('names the bad field, nested fields by path', () => {
    const created = loopEv.created().data;
    expect(messageOf('loop.created', { ...created, name: '' })).toMatch(/^invalid loop\.created event: name: /);
    expect(messageOf('loop.created', { ...created, schedule: { kind: 'every', everyMs: -5, anchorAt: created.schedule.kind === 'every' ? created.schedule.anchorAt : '' } })).toMatch(
      /schedule\.everyMs: /,
    );
    expect(messageOf('loop.created', { ...created, target: { ...created.target, args: 'a b' } })).toMatch(/target\.args: /);
    expect(messageOf('loop.created', { ...created, nextRunAt: 'tomorrow' })).toMatch(/nextRunAt: /);
    expect(messageOf('run.claimed', { ...runEv.claimed().data, attempt: 0 })).toMatch(/attempt: /);
    expect(messageOf('run.claimed', { ...runEv.claimed().data, trigger: 'cron' })).toMatch(/trigger: /);
    expect(messageOf('process.spawned', { ...runEv.spawned().data, pid: 1.5 })).toMatch(/pid: /);
  });

  it('lists every bad field, and unknown keys are refused (strict)', () => {
    const message = messageOf('process.exited', { ...runEv.exited().data, exitCode: 'zero', stdoutBytes: -1, extra: true });
    expect(message).toMatch(/exitCode: /);
    expect(message).toMatch(/stdoutBytes: /);
    expect(message).toMatch(/extra/);
  });

  it('a missing or non-object payload is reported at the root or by field', () => {
    expect(messageOf('loop.paused', null)).toMatch(/\(root\): /);
    expect(messageOf('loop.paused', {})).toMatch(/reason: /);
  });

  it('unknown event types are refused', () => {
    expect(isEventType('loop.exploded')).toBe(false);
    expect(isEventType('toString')).toBe(false);
    expect(() => validateEventData('loop.exploded', {})).toThrow(/unknown event type "loop.exploded"/);
    expect(() => schemaVersion('constructor')).toThrow(ValidationError);
  });

  it('a v1 notice.hook_claimed (always the first claim) reads as one that replaces nothing', () => {
    const v1 = { hookRunId: 'run_1' };
    expect(upcast('notice.hook_claimed', 1, v1)).toEqual({ hookRunId: 'run_1', replaces: null });
    expect(() => validateEventData('notice.hook_claimed', upcast('notice.hook_claimed', 1, v1))).not.toThrow();
    expect(() => validateEventData('notice.hook_claimed', v1)).toThrow(ValidationError);
  });

  it('every event type is at schema version 1, except those with an upcaster from v1; upcasting the current version is the identity', () => {
    const upgraded = new Set(['loop.created', 'run.claimed', 'wfrun.started', 'notice.hook_claimed']);
    for (const type of Object.keys(eventSchemas) as EventType[]) {
      expect(schemaVersion(type)).toBe(upgraded.has(type) ? 2 : 1);
      const data = { any: 'thing' };
      expect(upcast(type, schemaVersion(type), data)).toBe(data);
      if (!upgraded.has(type)) expect(upcast(type, 1, data)).toBe(data);
    }
  });
});

describe('errors', () => {
  it('carry a stable code, hint and retryable flag', () => {
    const conflict = new ConcurrencyConflictError('run:x', 2, 3);
    expect(conflict).toBeInstanceOf(LoopsError);
    expect(isLoopsError(conflict)).toBe(true);
    expect(isLoopsError(new Error('x'))).toBe(false);
    expect(conflict).toMatchObject({ code: 'conflict', retryable: true, streamId: 'run:x', expectedVersion: 2, actualVersion: 3 });
    expect(conflict.message).toMatch(/stream run:x is at version 3, expected 2/);
    expect(conflict.hint).toBeTruthy();
    expect(new ValidationError('bad', { hint: 'fix it' })).toMatchObject({ code: 'validation', hint: 'fix it', retryable: false, name: 'ValidationError' });
  });
});
