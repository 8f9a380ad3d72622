#!/usr/bin/env node
// `npm start`: the main job end to end on the embedded SQLite default — create a command loop
// (once), run it now, list runs, replay the run from the log. Uses the real `loops` binary.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const loops = (...args) => {
  process.stdout.write(`\n$ loops ${args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(' ')}\n`);
  return spawnSync(process.execPath, [bin, ...args], { stdio: ['ignore', 'inherit', 'inherit'] }).status;
};

const exists = spawnSync(process.execPath, [bin, 'show', 'hello', '--json'], { stdio: 'ignore' }).status === 0;
if (!exists && loops('create', 'command', 'hello', '--cmd', 'echo "hello from loops at $(date)"', '--every', '1h', '-d', 'demo loop') !== 0) {
  process.stderr.write('\nThe demo could not create its loop (see the error above).\n');
  process.exit(1);
}
loops('list');
const status = loops('run-now', 'hello', '--show-output');
loops('runs', 'hello', '--limit', '3');
const last = spawnSync(process.execPath, [bin, 'runs', 'hello', '--limit', '1', '--json'], { encoding: 'utf8' });
const run = last.status === 0 ? JSON.parse(last.stdout)[0] : undefined;
if (run) loops('replay', run.id);
loops('projections', 'verify');
process.stdout.write('\nDone. Put `loops` on your PATH with `npm link`, then try `loops --help`.\n');
process.exit(status ?? 1);
