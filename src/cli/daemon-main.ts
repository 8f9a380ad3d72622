#!/usr/bin/env node
/**
 * The `loops-daemon` binary of `@hasna/loops`, kept for its users: with no subcommand (or only
 * options) it runs the daemon in the foreground (`loops daemon run`), as a service manager starts
 * it; `loops-daemon run|start|stop|status|install|logs …` is `loops daemon <subcommand> …`.
 */
import { main, reportError } from './main.js';

const SUBCOMMANDS = new Set(['run', 'start', 'stop', 'status', 'install', 'logs']);
const JSON_BY_DEFAULT = new Set(['start', 'stop', 'status', 'install']);

const HELP = [
  'loops-daemon — the loops scheduler daemon (the predecessor @hasna/loops binary of the same name)',
  '',
  'Usage: loops-daemon [options]                 run the daemon in the foreground (= loops daemon run)',
  '       loops-daemon <subcommand> [options]    = loops daemon <subcommand> (start, stop, status and install print JSON, as before)',
  '',
  `Subcommands: ${[...SUBCOMMANDS].join(', ')} (loops daemon <subcommand> --help for each)`,
  '',
].join('\n');

/** `loops-daemon …` as the `loops` arguments it stands for, or null for its own help. */
export function daemonArgv(argv: string[]): string[] | null {
  const first = argv[0];
  if (first === '--help' || first === '-h' || first === 'help') return null;
  if (first === '--version' || first === '-V') return ['--version'];
  if (first !== undefined && SUBCOMMANDS.has(first)) {
    // The predecessor's loops-daemon printed JSON for these (scripts parse it): so does this one.
    const json = JSON_BY_DEFAULT.has(first) && !argv.includes('--json') && !argv.includes('-j') && !argv.includes('--help') && !argv.includes('-h');
    return ['daemon', ...argv, ...(json ? ['--json'] : [])];
  }
  return ['daemon', 'run', ...argv];
}

export async function daemonMain(argv: string[]): Promise<number> {
  const args = daemonArgv(argv);
  if (args === null) {
    process.stdout.write(HELP);
    return 0;
  }
  return main(args);
}

const invokedAs = process.argv[1] ?? '';
if (/(?:^|[\\/])(?:daemon-main\.js|loops-daemon)$/.test(invokedAs)) {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw error;
    });
  }
  daemonMain(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.exitCode = reportError(process.stderr, error);
    },
  );
}

