import type { EventData } from '../../src/events/catalog.js';

/** A `run.agent_reported` payload: every field null but the provider (claude 2.1.31), unless given. */
export const agentReport = (overrides: Partial<EventData<'run.agent_reported'>> = {}): EventData<'run.agent_reported'> => ({
  provider: 'claude',
  cliVersion: '2.1.31',
  model: null,
  sessionId: null,
  turns: null,
  durationMs: null,
  tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
  costUsd: null,
  finalMessage: null,
  isError: null,
  parseError: null,
  ...overrides,
});
