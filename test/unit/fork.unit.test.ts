/**
 * The pure side of `loops fork`: a fork's wfrun.started makes its reused steps `reusing` and asks
 * for their step.reused inline (recordDecisions' `reuses`); each step.reused ends its step with the
 * recorded result and plans its dependants; an annotation (stream.forked) is accepted by a stream
 * in a final state and changes nothing; the planner's overlap rule.
 */
import { describe, expect, it } from 'vitest';
import { OVERLAP } from '../../src/events/policies.js';
import { fold, step } from '../../src/machines/fold.js';
import { workflowRunMachine, type WorkflowRunContext, stepsById } from '../../src/machines/workflow-run.js';
import { overlapVerdict } from '../../src/scheduling/planner.js';
import { wfrunEv, wfSpec, wfStep } from '../helpers/events.js';

const chain = wfSpec({ steps: [wfStep('a'), wfStep('b', { needs: ['a'] }), wfStep('c', { needs: ['b'] }), wfStep('d', { needs: ['c'] })] });
const forkedFrom = { runId: 'wfrun_parent', from: 'c', reason: null, how: 'fork' as const };

describe('a fork of a workflow run, on the machine', () => {
  it('starts its reused steps reusing and asks for their step.reused; nothing starts before them', () => {
    const { snapshot, steps } = fold(workflowRunMachine, [wfrunEv.started({ spec: chain, forkedFrom, reuse: ['a', 'b'] })]);
    const c = snapshot.context as WorkflowRunContext;
    expect(Object.fromEntries(Object.entries(stepsById(c)).map(([id, s]) => [id, s.status]))).toEqual({ a: 'reusing', b: 'reusing', c: 'pending', d: 'pending' });
    const decide = steps[0]!.actions.find((a) => a.type === 'recordDecisions');
    expect(decide?.params).toEqual({ retries: [], skips: [], starts: [], reuses: ['a', 'b'] });
  });

  it('each step.reused ends its step with the recorded result; the fork point starts after the last', () => {
    const { snapshot, steps } = fold(workflowRunMachine, [
      wfrunEv.started({ spec: chain, forkedFrom, reuse: ['a', 'b'] }),
      wfrunEv.reused('a', { outputs: { tok: 'x' } }),
      wfrunEv.reused('b', { outputs: { key: 'set' }, set: ['key'] }),
    ]);
    expect(steps.every((s) => s.accepted)).toBe(true);
    const c = snapshot.context as WorkflowRunContext;
    expect(stepsById(c).a).toMatchObject({ status: 'succeeded', exitCode: 0, outputs: { tok: 'x' }, attempt: 0 });
    expect(stepsById(c).b).toMatchObject({ status: 'succeeded', outputs: { key: 'set' } });
    expect(stepsById(c).c!.status).toBe('starting');
    expect(steps[1]!.actions.find((a) => a.type === 'recordDecisions')?.params).toEqual({ retries: [], skips: [], starts: [] });
    expect(steps[2]!.actions.find((a) => a.type === 'recordDecisions')?.params).toEqual({ retries: [], skips: [], starts: [{ stepId: 'c', attempt: 1 }] });
  });

  it('a step.reused for a step that is not reusing is refused; a sequential spec waits for its reused steps too', () => {
    const { snapshot } = fold(workflowRunMachine, [wfrunEv.started({ spec: chain })]);
    expect(step(workflowRunMachine, snapshot, wfrunEv.reused('b')).accepted).toBe(false);
    // Two independent steps: in parallel y starts at once; in sequential order it waits for x's step.reused.
    const two = wfSpec({ steps: [wfStep('x'), wfStep('y')] });
    const parallel = fold(workflowRunMachine, [wfrunEv.started({ spec: two, forkedFrom, reuse: ['x'] })]);
    expect(stepsById((parallel.snapshot.context as WorkflowRunContext)).y!.status).toBe('starting');
    const sequential = fold(workflowRunMachine, [wfrunEv.started({ spec: { ...two, execution: 'sequential' }, forkedFrom, reuse: ['x'] })]);
    expect(stepsById((sequential.snapshot.context as WorkflowRunContext)).y!.status).toBe('pending');
    const after = step(workflowRunMachine, sequential.snapshot, wfrunEv.reused('x'));
    expect(stepsById((after.after.context as WorkflowRunContext)).y!.status).toBe('starting');
  });

  it('an annotation is accepted by a stream in a final state and changes nothing', () => {
    const ended = fold(workflowRunMachine, [wfrunEv.imported()]).snapshot;
    expect(ended.status).toBe('done');
    const result = step(workflowRunMachine, ended, wfrunEv.forked());
    expect(result).toMatchObject({ accepted: true, actions: [] });
    expect(result.after).toBe(ended);
  });
});

describe('the overlap rule forks share with decideDue', () => {
  it('skip and the waiting policies hold a new run back while a run is going; allow does not', () => {
    expect(overlapVerdict(OVERLAP.policies.skip, 1, 0)).toEqual({ blocked: true, buffering: false, room: 0 });
    expect(overlapVerdict(OVERLAP.policies.skip, 0, 0)).toEqual({ blocked: false, buffering: false, room: 0 });
    expect(overlapVerdict(OVERLAP.policies['buffer-one'], 1, 1)).toEqual({ blocked: false, buffering: true, room: 0 });
    expect(overlapVerdict(OVERLAP.policies['buffer-all'], 0, 2)).toEqual({ blocked: false, buffering: true, room: Infinity });
    expect(overlapVerdict(OVERLAP.policies.allow, 3, 0)).toEqual({ blocked: false, buffering: false, room: 0 });
  });
});
