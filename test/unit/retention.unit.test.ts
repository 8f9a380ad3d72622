/**
 * The retention machine (stream `retention:output`) and what the projections make of its events:
 *  - it accepts every removal in its one state, `keeping`, and counts runs and bytes;
 *  - `run.output_pruned` marks the loop run; `wfrun.output_pruned` marks the workflow run and, when
 *    a workflow loop started it, that loop's run; nothing else of the rows changes.
 */
import { describe, expect, it } from 'vitest';
import { fold, stateOf } from '../../src/machines/fold.js';
import { retentionMachine } from '../../src/machines/retention.js';
import { runsProjection } from '../../src/projections/runs.js';
import { workflowRunsProjection } from '../../src/projections/workflows.js';
import { at, retentionEv, runEv, wfrunEv } from '../helpers/events.js';
import { projectionSpec } from '../helpers/projection-spec.js';

describe('retention machine', () => {
  it('keeps the totals of what was pruned, in its one state', () => {
    const { snapshot, steps } = fold(retentionMachine, [
      retentionEv.runOutputPruned({ runId: 'run_1', bytes: 100 }, at(1000)),
      retentionEv.wfrunOutputPruned({ wfRunId: 'wfrun_1', bytes: 50 }, at(2000)),
      retentionEv.runOutputPruned({ runId: 'run_2', bytes: 0 }, at(3000)),
    ]);
    expect(steps.every((s) => s.accepted)).toBe(true);
    expect(steps.map((s) => stateOf(s.after))).toEqual(['keeping', 'keeping', 'keeping']);
    expect(steps.flatMap((s) => s.actions.map((a) => a.type)).filter((t) => !t.startsWith('xstate.'))).toEqual([]);
    expect(snapshot.status).toBe('active');
    expect(snapshot.context).toEqual({ runsPruned: 3, bytesFreed: 150, lastPrunedAt: at(3000) });
  });

  it('accepts nothing else', () => {
    const { steps } = fold(retentionMachine, [runEv.claimed()]);
    expect(steps[0]!.accepted).toBe(false);
  });
});

describe('projections of the removals', () => {
  it('run.output_pruned sets output_pruned_at on the loop run, and only that', () => {
    const spec = projectionSpec(runsProjection)
      .given('run:run_1', runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited())
      .given('run:run_2', runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' }));
    const before = spec.row('loop_runs', { id: 'run_1' });
    expect(before.output_pruned_at).toBeNull();
    spec.given('retention:output', retentionEv.runOutputPruned({ runId: 'run_1' }, at(86_400_000)));
    expect(spec.row('loop_runs', { id: 'run_1' })).toEqual({ ...before, output_pruned_at: at(86_400_000) });
    spec.expectRow('loop_runs', { id: 'run_2' }, { output_pruned_at: null });
  });

  it('wfrun.output_pruned sets it on the workflow run and on the workflow loop\'s run that started it', () => {
    const spec = projectionSpec(runsProjection, workflowRunsProjection)
      .given('run:run_1', runEv.claimed({ target: { kind: 'workflow', workflowId: 'wf_1', workflowName: 'diamond' } }))
      .given('wfrun:wfrun_1', wfrunEv.started({ loopId: 'loop_1', slot: 'manual:run_1', idempotencyKey: 'loop:loop_1:manual:run_1:1' }))
      .given('wfrun:wfrun_2', wfrunEv.started({ wfRunId: 'wfrun_2', idempotencyKey: 'manual:wfrun_2' }));
    const before = spec.row('workflow_runs', { id: 'wfrun_1' });
    spec.given(
      'retention:output',
      retentionEv.wfrunOutputPruned({ wfRunId: 'wfrun_1', loopRunId: 'run_1' }, at(5000)),
      retentionEv.wfrunOutputPruned({ wfRunId: 'wfrun_2', loopRunId: null }, at(6000)),
    );
    expect(spec.row('workflow_runs', { id: 'wfrun_1' })).toEqual({ ...before, output_pruned_at: at(5000) });
    spec.expectRow('workflow_runs', { id: 'wfrun_2' }, { output_pruned_at: at(6000), status: 'running' });
    spec.expectRow('loop_runs', { id: 'run_1' }, { output_pruned_at: at(5000) });
  });
});
