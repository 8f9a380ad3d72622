/**
 * The notice machine (stream `notice:<id>`, --on-failure / --notify-url) and the `notices`
 * projection: a URL notice counts its failed tries and ends delivered or given up; a command
 * notice records its hook run's id, then how that run ended; neither accepts the other's events;
 * `loop_notify` holds what loop.created says, and nothing for a loop created without it.
 */
import { describe, expect, it } from 'vitest';
import { fold, stateOf } from '../../src/machines/fold.js';
import { noticeMachine } from '../../src/machines/notice.js';
import { noticesProjection } from '../../src/projections/notices.js';
import { buildNotify } from '../../src/runtime/loops/notify.js';
import { at, loopEv, noticeEv } from '../helpers/events.js';
import { projectionSpec } from '../helpers/projection-spec.js';

describe('notice machine', () => {
  it('a URL notice: failed tries, then delivered (final)', () => {
    const { snapshot, steps } = fold(noticeMachine, [noticeEv.requested(), noticeEv.attemptFailed(), noticeEv.delivered()]);
    expect(steps.every((s) => s.accepted)).toBe(true);
    expect(steps.map((s) => stateOf(s.after))).toEqual(['pending', 'pending', 'delivered']);
    expect(snapshot.status).toBe('done');
    expect(snapshot.context).toMatchObject({ failedAttempts: 1, retryAt: at(3500), lastError: 'HTTP 500 Internal Server Error' });
  });

  it('a command notice: its hook run, then how it ended; a URL event is refused', () => {
    const requested = noticeEv.requested({ noticeId: 'run_1.hook', channel: 'command', command: 'echo x', env: { LOOPS_RUN_ID: 'run_1' }, url: null, payload: null });
    const { snapshot, steps } = fold(noticeMachine, [requested, noticeEv.hookClaimed(), noticeEv.attemptFailed(), noticeEv.hookEnded()]);
    expect(steps.map((s) => s.accepted)).toEqual([true, true, false, true]);
    expect(stateOf(snapshot)).toBe('ran');
    expect(snapshot.context.hookRunId).toBe('run_2');
    // A URL notice takes no hook events.
    expect(fold(noticeMachine, [noticeEv.requested(), noticeEv.hookClaimed()]).steps[1]!.accepted).toBe(false);
    expect(stateOf(fold(noticeMachine, [noticeEv.requested(), noticeEv.givenUp()]).snapshot)).toBe('given_up');
  });

  it('a hook run that never started is replaced: a claim names the run it replaces, and only the current one', () => {
    const requested = noticeEv.requested({ noticeId: 'run_1.hook', channel: 'command', command: 'echo x', env: { LOOPS_RUN_ID: 'run_1' }, url: null, payload: null });
    const { snapshot, steps } = fold(noticeMachine, [
      requested,
      noticeEv.hookClaimed('run_2'),
      noticeEv.hookClaimed('run_3'), // replaces nothing named: a second first claim is refused
      noticeEv.hookClaimed('run_3', at(2200), 'run_9'), // replaces a run that is not the notice's
      noticeEv.hookClaimed('run_3', at(2300), 'run_2'),
    ]);
    expect(steps.map((s) => s.accepted)).toEqual([true, true, false, false, true]);
    expect(snapshot.context).toMatchObject({ hookRunId: 'run_3', hookAttempt: 2 });
    expect(stateOf(snapshot)).toBe('pending');
  });
});

describe('notices projection', () => {
  it('loop_notify from loop.created (none without it); a notice row follows its events', () => {
    const spec = projectionSpec(noticesProjection)
      .given('loop:loop_1', loopEv.created())
      .given('loop:loop_2', loopEv.created({ loopId: 'loop_2', name: 'told', notify: { onFailure: 'echo x', url: 'https://h.example/x', on: ['failure', 'success'] } }))
      .expectRows('loop_notify', [{ loop_id: 'loop_2', on_failure: 'echo x', url: 'https://h.example/x', notify_on: 'failure,success' }])
      .given('notice:run_1.url', noticeEv.requested(), noticeEv.attemptFailed())
      .expectRows('notices', [{ id: 'run_1.url', run_id: 'run_1', channel: 'url', status: 'pending', attempts: 1, retry_at: at(3500), http_status: 500 }])
      .given('notice:run_1.url', noticeEv.delivered())
      .expectRows('notices', [{ status: 'delivered', attempts: 2, http_status: 200, retry_at: null, finished_at: at(4000) }]);
    expect(spec.rows('notices')).toHaveLength(1);
  });
});

describe('buildNotify', () => {
  it('nothing given: null (the loop is recorded without the field); defaults: failure only', () => {
    expect(buildNotify({})).toBeNull();
    expect(buildNotify({ onFailure: null, notifyUrl: null, notifyOn: null })).toBeNull();
    expect(buildNotify({ notifyUrl: 'http://127.0.0.1:9/x' })).toEqual({ onFailure: null, url: 'http://127.0.0.1:9/x', on: ['failure'] });
    expect(buildNotify({ notifyUrl: 'https://h.example/x', notifyOn: 'success' })).toEqual({ onFailure: null, url: 'https://h.example/x', on: ['success'] });
    expect(buildNotify({ onFailure: 'echo x' })).toEqual({ onFailure: 'echo x', url: null, on: ['failure'] });
  });
});
