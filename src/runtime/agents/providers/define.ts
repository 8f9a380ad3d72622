/**
 * What a provider file declares (see ./index.ts for the table, docs/architecture.md "How to add an
 * agent provider"): its description (`info`), how a permission mode becomes flags, its argv, and the
 * provider-specific part of the output parser (`transcript`). Types and a few argv helpers only.
 */
import type { Reader } from '../extract.js';

/** How the prompt reaches the CLI. */
export type PromptChannel = 'stdin' | 'file' | 'argv';

/** What the CLI prints on stdout once its machine-readable output is forced. */
export type AgentOutputFormat = 'json' | 'jsonl' | 'text';

export interface ProviderSupports {
  /** The CLI reads the prompt from stdin (then it is written there and stdin is closed). */
  stdinPrompt: boolean;
  /** The CLI accepts a path to a file holding the prompt. */
  promptFile: boolean;
  /** The CLI has a machine-readable (JSON / JSONL) output mode. */
  json: boolean;
  /** A CLI flag caps the number of agent turns. */
  maxTurns: boolean;
  /** A CLI flag caps the cost in USD. */
  maxCostUsd: boolean;
  /** The output reports the cost in USD (opencode: per step, as it goes — so loops can enforce `maxCostUsd` itself). */
  reportsCost: boolean;
  /** The output reports each turn as it ends (opencode: steps), so loops can enforce `maxTurns` itself. */
  reportsTurns: boolean;
  /** A CLI flag selects the model. */
  model: boolean;
  /** A CLI flag selects a named agent / profile. */
  agent: boolean;
  /** A CLI flag selects the permission / sandbox / approval mode. */
  permissionMode: boolean;
}

/** A provider's description, as its file declares it (`ProviderInfo` in ./index.ts is the table's view of it). */
export interface ProviderInfoFields<Id extends string = string> {
  id: Id;
  /** Display name. */
  name: string;
  /** The executable, resolved on PATH by the caller. */
  binary: string;
  /** Where the non-interactive flags are documented. */
  docsUrl: string;
  /** Argv that prints the CLI's version and exits 0. */
  versionArgs: readonly string[];
  /** The CLI version (or source revision) the adapter was written against, and when. */
  writtenAgainst: string;
  /** True for the predecessor's CLIs whose flags are not public: modelled on another provider. */
  assumed: boolean;
  /** The provider this one is modelled on, when `assumed` (an id of the table). */
  modelledOn: string | null;
  promptVia: PromptChannel;
  output: AgentOutputFormat;
  supports: ProviderSupports;
  /** What `permissionMode` means for this CLI (the flag it becomes). */
  permissionFlag: string | null;
  /** The documented `permissionMode` values. */
  permissionModes: readonly string[];
  /** True when only `permissionModes` are accepted (they are mapped); false = passed to the CLI verbatim. */
  permissionModesStrict: boolean;
  /** Credential and configuration variables the CLI reads (removed from a run's inherited environment before an account's are set). */
  authEnv: readonly string[];
  /** The variable pointed at the isolated configuration directory under `configIsolation: 'safe'`, or null. */
  configDirEnv: string | null;
  /**
   * Every variable set under `configIsolation: 'safe'`, each to a sub-directory of the isolated
   * directory ('' = the directory itself).
   */
  isolationEnv: Readonly<Record<string, string>>;
  /**
   * The CLI's own flags that shut out user and project settings while it keeps its configuration
   * directory — the user's login — under `configIsolation: 'login'` (what the predecessor's `safe`
   * passed); empty where the CLI has no such flag (it then runs with the user's settings, as `none`).
   */
  settingsIsolationArgs: readonly string[];
}

/** The values an argv builder gets, each already checked by `buildInvocation` (../invocation.ts). */
export interface ArgvInput {
  /** A single-line flag value that does not start with "-", or null. */
  model: string | null;
  agent: string | null;
  /** The permission mode's flags (from `permissionArgs`), possibly none. */
  permission: string[];
  /** Set only when the provider has the flag or reports turns (else refused before). */
  maxTurns: number | null;
  maxCostUsd: number | null;
  /** The working directory, for CLIs that take it as a flag too (a falsy value: none). */
  cwd: string | null;
  /** Appended verbatim after the adapter's flags. */
  extraArgs: string[];
  /** `settingsIsolationArgs` under `configIsolation: 'login'`, else none: placed where the CLI takes them. */
  isolation: string[];
}

/** The provider-specific part of the output parser (../parse.ts holds the shared line machinery). */
export interface TranscriptReader<Format extends string = string> {
  /** The shape of the JSON the CLI prints; `loops logs --pretty` picks its renderer by it (src/cli/agent-report.ts). */
  format: Format;
  /** Reads one JSON event into the extraction state. */
  read: Reader;
  /** When the final event does not say how many turns there were, the counted events (`turnCount`) are the turns. */
  countsTurns: boolean;
  /** The last assistant message is the answer even when a final result text exists. */
  prefersLastText: boolean;
}

export interface ProviderDefinition<Id extends string = string, Format extends string = string> {
  info: ProviderInfoFields<Id>;
  /**
   * The flags for a permission mode (a checked flag value), or null when this CLI does not know the
   * mode (a ValidationError listing `info.permissionModes` follows).
   */
  permissionArgs(mode: string): string[] | null;
  /**
   * The exact argv after the binary. The prompt never goes here (every supported CLI reads it
   * from stdin). May throw a ValidationError for a value only this CLI refuses.
   */
  argv(input: ArgvInput): string[];
  transcript: TranscriptReader<Format>;
}

/** Declares a provider, keeping its id and transcript format as literal types (the table derives its unions from them). */
export function defineProvider<Id extends string, Format extends string>(definition: ProviderDefinition<Id, Format>): ProviderDefinition<Id, Format> {
  return definition;
}

/** A number as plain decimal text (never 1e-7), trailing zeros dropped. */
export function numberText(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(10).replace(/0+$/, '').replace(/\.$/, '');
}
