import type { CommandSpec, Parsed } from './args.js';
import type { Clock } from '../runtime/clock.js';
import type { Output } from './render.js';

export interface CliContext extends Output {
  dataDir: string;
  json: boolean;
  color: boolean;
  /** The clock every command uses (the system clock, or LOOPS_NOW's shifted one). */
  clock: Clock;
}

export interface CliCommand {
  spec: CommandSpec;
  run(parsed: Parsed, ctx: CliContext): Promise<number>;
}
