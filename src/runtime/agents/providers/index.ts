/**
 * src/runtime/agents/providers — one file per agent CLI loops can run, and the table of them.
 *
 * Each `<id>.ts` holds everything specific to one CLI: its description (`info`: binary, version
 * argv, documentation, capabilities, permission modes, credential and configuration variables), how
 * a permission mode becomes flags, its argv builder, and the provider-specific part of the output
 * parser (`transcript`: the reader of its JSON events). A CLI modelled on another (codewith on codex,
 * aicopilot on claude) imports that file's argv and reader. ./define.ts holds the types.
 *
 * This file is the table: `PROVIDER_DEFINITIONS` lists the files, in the order `loops` shows them,
 * and everything else derives from it — the id type and list, `isProviderId`, `providerInfo` and its
 * error, `AUTH_ENV_VARS`, the help text of `create agent`. The one list it cannot feed is the
 * catalogue's enum of recorded provider ids (src/events cannot import the runtime): a type check
 * below keeps the two equal. The shared machinery lives one folder up:
 * ../invocation.ts (argv checks, prompt channel, isolation env), ../parse.ts (the streaming line
 * parser), ../extract.ts (the state a reader fills). How to add a provider: docs/architecture.md,
 * "How to add an agent provider".
 */
import type { LoopAgentTarget } from '../../../events/catalog.js';
import { ValidationError } from '../../../events/errors.js';
import { aicopilot } from './aicopilot.js';
import { claude } from './claude.js';
import { codewith } from './codewith.js';
import { codex } from './codex.js';
import { cursor } from './cursor.js';
import type { ProviderDefinition, ProviderInfoFields } from './define.js';
import { gemini } from './gemini.js';
import { opencode } from './opencode.js';

export type { AgentOutputFormat, ArgvInput, PromptChannel, ProviderDefinition, ProviderSupports, TranscriptReader } from './define.js';

/** Every provider, in the order loops lists them. */
export const PROVIDER_DEFINITIONS = [claude, codex, cursor, opencode, gemini, codewith, aicopilot] as const;

type Definitions = (typeof PROVIDER_DEFINITIONS)[number];
export type ProviderId = Definitions['info']['id'];
/** The shape of the JSON a provider prints, i.e. which reader (and which `logs --pretty` renderer) reads it. */
export type TranscriptFormat = Definitions['transcript']['format'];

/**
 * A loop's recorded agent target names its provider from the catalogue's enum
 * (`agentTargetSchema.provider` in src/events/catalog.ts), which cannot import this table (src/events
 * imports nothing above it). The two lists must hold the same ids: this fails to compile otherwise.
 */
type Assert<T extends true> = T;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type CatalogNamesEveryProvider = Assert<Same<ProviderId, LoopAgentTarget['provider']>>;

/** A provider's description, as the rest of loops sees it. */
export interface ProviderInfo extends Omit<ProviderInfoFields, 'id' | 'modelledOn'> {
  id: ProviderId;
  /** The provider this one is modelled on, when `assumed`. */
  modelledOn: ProviderId | null;
  /** Which reader parses its output (`transcript.format` of its file). */
  transcript: TranscriptFormat;
}

export const PROVIDER_IDS: readonly ProviderId[] = PROVIDER_DEFINITIONS.map((p) => p.info.id);

const DEFINITIONS = Object.fromEntries(PROVIDER_DEFINITIONS.map((p) => [p.info.id, p])) as unknown as Readonly<
  Record<ProviderId, ProviderDefinition<ProviderId, TranscriptFormat>>
>;

export const PROVIDERS: Readonly<Record<ProviderId, ProviderInfo>> = Object.fromEntries(
  PROVIDER_DEFINITIONS.map((p) => [p.info.id, { ...p.info, transcript: p.transcript.format } as ProviderInfo]),
) as Record<ProviderId, ProviderInfo>;

/** Every provider's credential and configuration variables, deduplicated, sorted. */
export const AUTH_ENV_VARS: readonly string[] = [...new Set(PROVIDER_IDS.flatMap((id) => PROVIDERS[id].authEnv))].sort();

export function isProviderId(value: string): value is ProviderId {
  return (PROVIDER_IDS as readonly string[]).includes(value);
}

/** The provider's description; a ValidationError naming the known providers for anything else. */
export function providerInfo(provider: string): ProviderInfo {
  if (isProviderId(provider)) return PROVIDERS[provider];
  throw new ValidationError(`unknown agent provider "${provider}"`, {
    hint: `use one of: ${PROVIDER_IDS.join(', ')}`,
    details: { provider },
  });
}

/** The provider's file: its permission flags, argv builder and output reader. */
export function providerDefinition(provider: ProviderId): ProviderDefinition<ProviderId, TranscriptFormat> {
  return DEFINITIONS[provider];
}

/**
 * The providers for help text: `claude, codex, cursor (cursor-agent), …` — the binary in
 * parentheses where it is not the id. `or` before the last one when `last` is given.
 */
export function providerList(options: { binaries?: boolean; last?: 'or' | 'and' } = {}): string {
  const names = PROVIDER_IDS.map((id) => (options.binaries && PROVIDERS[id].binary !== id ? `${id} (${PROVIDERS[id].binary})` : id));
  if (!options.last || names.length < 2) return names.join(', ');
  return `${names.slice(0, -1).join(', ')} ${options.last} ${names[names.length - 1]}`;
}
