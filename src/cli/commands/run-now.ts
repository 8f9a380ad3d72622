import { openRuntime } from '../../runtime/runtime.js';
import { runNow } from '../../runtime/execution/run-now.js';
import type { RunView } from '../../runtime/queries/loops.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { exitCodeForRunStatus } from '../exit-codes.js';
import { durationText, paint, printJson, statusColor } from '../render.js';

const spec: CommandSpec = {
  name: 'run-now',
  summary: 'Run a loop now, in the foreground, and wait for it to finish.',
  description: [
    'The run is recorded like any other (loops runs, loops replay). Works on paused loops too.',
    'Ctrl-C cancels the run: its whole process group gets SIGTERM, then SIGKILL after the grace period.',
    'Exit code: 0 succeeded, 3 failed, 4 timed out, 5 cancelled.',
  ].join('\n'),
  positionals: [{ name: 'loop', required: true, description: 'loop name or id' }],
  options: {
    'show-output': { type: 'boolean', description: "stream the command's stdout and stderr while it runs" },
    here: { type: 'boolean', description: 'run a loop pinned with --runs-on on this host even without its labels' },
    json: JSON_OPTION,
  },
  examples: ['loops run-now backup', 'loops run-now tests --show-output', 'loops run-now tests --json | jq .status'],
};

function summary(run: RunView, ctx: CliContext): string {
  const status = paint(ctx.color, statusColor(run.status), run.status);
  // A workflow loop's run has no exit code of its own (its steps have theirs).
  const exit = run.exitCode !== null ? `exit ${run.exitCode}` : '';
  const detail = run.status === 'succeeded' ? exit : (run.error ?? exit);
  return `run ${run.id} ${status} in ${durationText(run.durationMs)}${detail ? ` (${detail})` : ''}\n`;
}

function lastLines(text: string, n: number): string {
  const lines = text.replace(/\n$/, '').split('\n');
  return lines.slice(-n).join('\n');
}

const runNowCommand: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const showOutput = values['show-output'] === true;
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    const controller = new AbortController();
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals === 1) {
        ctx.err.write(`loops: ${signal}: cancelling the run (again to force quit)\n`);
        controller.abort(`interrupted by ${signal}`);
      } else {
        process.exit(130);
      }
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      const run = await runNow(runtime, positionals[0]!, {
        signal: controller.signal,
        ...(values.here === true ? { here: true } : {}),
        onClaimed: (runId) => {
          if (!ctx.json && ctx.err.isTTY) ctx.err.write(paint(ctx.color, 'gray', `running ${positionals[0]} as ${runId}…\n`));
        },
        ...(showOutput
          ? {
              onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => {
                // With --json, stdout carries only the JSON result.
                (stream === 'stdout' && !ctx.json ? ctx.out : ctx.err).write(chunk);
              },
            }
          : {}),
      });
      if (ctx.json) printJson(ctx, run);
      else {
        if (!showOutput && run.status !== 'succeeded' && run.stderr.trim() !== '') {
          ctx.err.write(`${paint(ctx.color, 'gray', '── stderr (last lines) ──')}\n${lastLines(run.stderr, 10)}\n`);
        }
        (run.status === 'succeeded' ? ctx.out : ctx.err).write(summary(run, ctx));
      }
      return exitCodeForRunStatus(run.status);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { 'run-now': runNowCommand };
