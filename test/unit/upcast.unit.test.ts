import { describe, expect, it } from 'vitest';
import { eventSchemas, upcast, validateEventData } from '../../src/events/catalog.js';
import { wfrunEv } from '../helpers/events.js';

// Payloads exactly as the first format wrote them (v1), before timing and scheduling policies.
const loopCreatedV1 = {
  loopId: 'loop_1',
  name: 'hello',
  description: 'demo loop',
  schedule: { kind: 'every', everyMs: 3_600_000, anchorAt: '2026-11-30T13:42:22.000Z' },
  target: { kind: 'command', command: 'echo hi', args: [], shell: true, cwd: null, env: {} },
  policies: { timeoutMs: null, killGraceMs: 5000 },
  nextRunAt: '2026-11-30T14:42:22.000Z',
};
const runClaimedV1 = {
  runId: 'run_1',
  loopId: 'loop_1',
  loopName: 'hello',
  slot: 'manual:run_1',
  scheduledFor: '2026-11-30T13:42:23.000Z',
  attempt: 1,
  trigger: 'manual',
  target: loopCreatedV1.target,
  policies: { timeoutMs: 1000, killGraceMs: 500 },
  runnerId: 'host:1:abc',
  leaseToken: 1,
};

describe('upcasting stored events (events are never rewritten)', () => {
  it('loop.created v1 becomes a valid current payload with default timing and policies', () => {
    expect(eventSchemas['loop.created'].v).toBe(2);
    const up = upcast('loop.created', 1, loopCreatedV1) as Record<string, any>;
    expect(validateEventData('loop.created', up)).toEqual(up);
    expect(up.schedule).toEqual({ ...loopCreatedV1.schedule, anchor: 'fixed-rate' });
    expect(up.timing).toEqual({ tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null });
    expect(up.policies).toMatchObject({ timeoutMs: null, killGraceMs: 5000, overlap: 'skip', catchUp: 'latest', attempts: 1 });
    // A cron schedule keeps its zone as the loop's zone.
    const cron = upcast('loop.created', 1, { ...loopCreatedV1, schedule: { kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin' } }) as any;
    expect(cron.timing.tz).toBe('Europe/Berlin');
    expect(validateEventData('loop.created', cron)).toEqual(cron);
  });

  it('run.claimed v1 keeps its own timeout and grace and gains the default policies', () => {
    const up = upcast('run.claimed', 1, runClaimedV1) as Record<string, any>;
    expect(validateEventData('run.claimed', up)).toEqual(up);
    expect(up.policies).toMatchObject({ timeoutMs: 1000, killGraceMs: 500, attempts: 1, leaseMs: 30_000 });
  });

  it('wfrun.started v1 is a run that recorded no step decisions: decisions derived', () => {
    expect(eventSchemas['wfrun.started'].v).toBe(2);
    // As a v1 build wrote it: no decisions field.
    const { decisions: _current, ...v1 } = wfrunEv.started().data;
    const up = upcast('wfrun.started', 1, v1) as Record<string, unknown>;
    expect(up).toEqual({ ...v1, decisions: 'derived' });
    expect(validateEventData('wfrun.started', up)).toEqual(up);
    expect(() => validateEventData('wfrun.started', v1)).toThrow(/decisions/);
  });

  it('current payloads pass through unchanged', () => {
    const up = upcast('loop.created', 1, loopCreatedV1);
    expect(upcast('loop.created', 2, up)).toBe(up);
    expect(upcast('process.exited', 1, { a: 1 })).toEqual({ a: 1 });
  });
});
