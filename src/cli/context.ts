import type { CommandSpec, Parsed } from './args.js';
import type { Output } from './render.js';

export interface CliContext extends Output {
  dataDir: string;
  json: boolean;
  color: boolean;
}

export interface CliCommand {
  spec: CommandSpec;
  run(parsed: Parsed, ctx: CliContext): Promise<number>;
}
