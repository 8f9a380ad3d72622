/**
 * Every machine version that ever wrote a stream, so an old run replays on the machine that
 * wrote it. Bump a machine's version when a change would alter recorded history, and keep the
 * old definition here.
 */
import type { AnyStateMachine } from 'xstate';
import { LOOP_MACHINE_ID, LOOP_MACHINE_VERSION, loopMachine } from './loop.js';
import { RUN_MACHINE_ID, RUN_MACHINE_VERSION, runMachine } from './run.js';
import { ACCOUNT_MACHINE_ID, ACCOUNT_MACHINE_VERSION, accountMachine } from './account.js';
import { RETENTION_MACHINE_ID, RETENTION_MACHINE_VERSION, retentionMachine } from './retention.js';
import { NOTICE_MACHINE_ID, NOTICE_MACHINE_VERSION, noticeMachine } from './notice.js';
import { WORKFLOW_MACHINE_ID, WORKFLOW_MACHINE_VERSION, workflowMachine } from './workflow.js';
import { HOST_MACHINE_ID, HOST_MACHINE_VERSION, hostMachine } from './host.js';
import { WORKFLOW_RUN_MACHINE_ID, WORKFLOW_RUN_MACHINE_VERSION, workflowRunMachine } from './workflow-run.js';

/**
 * A machine's id and version — what a stream records as its owner. The type parameter is the
 * machine's type (phantom: never a value), so a ref from `currentMachines` types the actor it makes.
 */
export interface MachineRef<M extends AnyStateMachine = AnyStateMachine> {
  id: string;
  version: number;
  readonly __machine?: M;
}

function ref<M extends AnyStateMachine>(id: string, version: number, _machine: M): MachineRef<M> {
  return { id, version };
}

const machines = new Map<string, AnyStateMachine>([
  [`${LOOP_MACHINE_ID}@${LOOP_MACHINE_VERSION}`, loopMachine],
  [`${RUN_MACHINE_ID}@${RUN_MACHINE_VERSION}`, runMachine],
  [`${ACCOUNT_MACHINE_ID}@${ACCOUNT_MACHINE_VERSION}`, accountMachine],
  [`${RETENTION_MACHINE_ID}@${RETENTION_MACHINE_VERSION}`, retentionMachine],
  [`${NOTICE_MACHINE_ID}@${NOTICE_MACHINE_VERSION}`, noticeMachine],
  [`${HOST_MACHINE_ID}@${HOST_MACHINE_VERSION}`, hostMachine],
  [`${WORKFLOW_MACHINE_ID}@${WORKFLOW_MACHINE_VERSION}`, workflowMachine],
  // Version 1 streams (decisions derived, not recorded) fold on the same definition: their
  // wfrun.started v1 is upcast to `decisions: 'derived'`, on which it behaves as version 1 did
  // (why one definition serves both: the top of workflow-run.ts; the golden logs check it).
  [`${WORKFLOW_RUN_MACHINE_ID}@1`, workflowRunMachine],
  [`${WORKFLOW_RUN_MACHINE_ID}@${WORKFLOW_RUN_MACHINE_VERSION}`, workflowRunMachine],
]);

export const currentMachines = {
  loop: ref(LOOP_MACHINE_ID, LOOP_MACHINE_VERSION, loopMachine),
  run: ref(RUN_MACHINE_ID, RUN_MACHINE_VERSION, runMachine),
  account: ref(ACCOUNT_MACHINE_ID, ACCOUNT_MACHINE_VERSION, accountMachine),
  retention: ref(RETENTION_MACHINE_ID, RETENTION_MACHINE_VERSION, retentionMachine),
  notice: ref(NOTICE_MACHINE_ID, NOTICE_MACHINE_VERSION, noticeMachine),
  host: ref(HOST_MACHINE_ID, HOST_MACHINE_VERSION, hostMachine),
  workflow: ref(WORKFLOW_MACHINE_ID, WORKFLOW_MACHINE_VERSION, workflowMachine),
  workflowRun: ref(WORKFLOW_RUN_MACHINE_ID, WORKFLOW_RUN_MACHINE_VERSION, workflowRunMachine),
} as const;

export function getMachine(ref: MachineRef): AnyStateMachine | undefined {
  return machines.get(`${ref.id}@${ref.version}`);
}
