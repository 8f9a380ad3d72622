import { fileURLToPath } from 'node:url';
import type { AgentTarget } from '../../src/workflow/spec.js';

/** Absolute path of a fixture program in test/fixtures. */
export function fixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
}

/** An agent step's target as the adapters take it: every field at its plain default, `over` on top. */
export function agentTarget(provider: string, over: Partial<AgentTarget> = {}): AgentTarget {
  return {
    type: 'agent',
    provider,
    prompt: 'fix the failing tests',
    promptFile: null,
    model: null,
    agent: null,
    cwd: null,
    env: {},
    permissionMode: null,
    extraArgs: [],
    configIsolation: 'none',
    account: null,
    maxTurns: null,
    maxCostUsd: null,
    idleTimeoutMs: null,
    ...over,
  };
}
