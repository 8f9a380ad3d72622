/**
 * src/runtime/agents — running AI coding-agent CLIs (claude, codex, cursor, …) as loop and step
 * targets.
 *
 * - providers/   one file per CLI (its description, argv, output reader) and the table of them
 *                (providers/index.ts): every id list, check and help text derives from it;
 * - invocation.ts  the argv, prompt channel and environment of a run, the same for every provider,
 *                  and the budget limits loops enforces itself;
 * - parse.ts     the streaming, memory-bounded parser of a CLI's JSON / JSONL output (extract.ts:
 *                the state each provider's reader fills; json.ts: reading untrusted JSON);
 * - run.ts       preparing a run (prompt file, isolated configuration) and its report;
 * - accounts.ts  credential profiles (`loops accounts`).
 *
 * Rendering a transcript for people (`loops logs --pretty`) is presentation: src/cli/agent-report.ts.
 */
export * from './providers/index.js';
export * from './invocation.js';
export * from './parse.js';
