import { existsSync, fstatSync, watch, writeSync } from 'node:fs';
import { LoopsError } from '../../events/errors.js';
import { parseLabels } from '../../events/names.js';
import { CLOCK_WARN_MS, Daemon, logFile } from '../../runtime/daemon/daemon.js';
import { cliEntry, daemonLogLines, daemonStatus, startDaemon, stopDaemon, watchInterval } from '../../runtime/daemon/control.js';
import { formatDuration } from '../../events/durations.js';
import { DaemonLog, daemonLogMaxBytes } from '../../runtime/daemon/log-file.js';
import { FileCursor } from '../../runtime/queries/follow-file.js';
import { openRuntime } from '../../runtime/runtime.js';
import { parseStore } from '../../runtime/store-choice.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson } from '../render.js';

const VERSION = '0.1.0';

const LOG_MAX_SIZE_OPTION = {
  type: 'string',
  value: '<size>',
  description: 'rotate daemon.log past this size (10M, 512K; 0 never; default $LOOPS_DAEMON_LOG_MAX_BYTES or 10M)',
} as const;

function isFile(fd: number): boolean {
  try {
    return fstatSync(fd).isFile();
  } catch {
    return false;
  }
}

/** Writes all of `text` to `fd`, throwing when it cannot (ENOSPC). */
function writeAll(fd: number, text: string): void {
  const buf = Buffer.from(text);
  for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off);
}

const INTERVAL_OPTION = {
  type: 'string',
  value: '<ms>',
  description: 'how often changes made elsewhere (CLI, SDK) are looked for, 10 to 30000 (default $LOOPS_DAEMON_INTERVAL_MS or 1000)',
} as const;

const STORE_OPTION = {
  type: 'string',
  value: '<url>',
  description: 'the store: a PostgreSQL URL shared by a fleet, postgres://user@host/db?schema=loops (default $LOOPS_STORE, else this data directory’s SQLite; a password is better in PGPASSWORD or ~/.pgpass)',
} as const;

const LABELS_OPTION = {
  type: 'string',
  multiple: true,
  value: '<labels>',
  description: "this host's labels, comma-separated: it runs loops created with --runs-on naming them (default $LOOPS_HOST_LABELS; its host id is always one)",
} as const;

const run: CliCommand = {
  spec: {
    name: 'daemon run',
    summary: 'Run the scheduler daemon in the foreground (what systemd / launchd start).',
    description: [
      'One daemon per data directory. It fires due loops on time, runs up to --concurrency at once,',
      'and notices loops created or changed from the CLI within a second. SIGTERM or Ctrl-C stops it',
      'gracefully: no new runs; running ones are cancelled (process groups killed) and recorded as',
      'cancelled; a second signal exits at once.',
    ].join('\n'),
    positionals: [],
    options: {
      concurrency: { type: 'string', value: '<n>', description: 'runs at once (default 4)' },
      'interval-ms': INTERVAL_OPTION,
      'log-max-size': LOG_MAX_SIZE_OPTION,
      store: STORE_OPTION,
      labels: LABELS_OPTION,
    },
  },
  async run({ values }, ctx) {
    const concurrency = intOption(this.spec, 'concurrency', values.concurrency, 4);
    const watchMs = watchInterval(values['interval-ms']);
    const maxBytes = daemonLogMaxBytes(values['log-max-size'] as string | undefined);
    const store = typeof values.store === 'string' ? parseStore(values.store, '--store') : undefined;
    const labels = values.labels !== undefined ? parseLabels(values.labels as string[], '--labels') : undefined;
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock, ...(store ? { store } : {}), ...(labels ? { labels } : {}) });
    // When stdout is daemon.log (daemon start, a LaunchAgent), it is rotated past the cap.
    // A file stdout (daemon.log) is written with writeSync, whose failure (the disk full) the log
    // catches and holds the line; through process.stdout it would be an 'error' event that kills
    // the daemon. Stray writes to stdout/stderr on a full disk are dropped, not fatal, likewise.
    const toFile = isFile(1);
    const daemonLog = new DaemonLog({ path: logFile(ctx.dataDir), maxBytes, write: toFile ? (text) => writeAll(1, text) : (text) => ctx.out.write(text) });
    const ignore = () => undefined;
    process.stdout.on('error', ignore);
    process.stderr.on('error', ignore);
    const daemon = new Daemon(runtime, { concurrency, watchMs, version: VERSION, log: (line) => daemonLog.line(line) });
    let signals = 0;
    // Handled from the first moment: a stop asked for while the daemon starts (taking its lease,
    // recovering) is carried out as soon as it has started, not by the signal's default action.
    let started = false;
    let asked: string | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) process.exit(EXIT.error);
      if (started) void daemon.stop(`${signal} received`);
      else asked = `${signal} received`;
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    try {
      await daemon.start();
      started = true;
      if (watchMs !== 1000) daemonLog.line(`changes made elsewhere (CLI, SDK) are looked for every ${watchMs} ms (--interval-ms / LOOPS_DAEMON_INTERVAL_MS)`);
      if (asked !== null) void daemon.stop(asked);
      await daemon.done;
      await daemon.stop();
      return EXIT.ok;
    } finally {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      runtime.close();
    }
  },
};

const start: CliCommand = {
  spec: {
    name: 'daemon start',
    summary: 'Start the daemon in the background; it logs to daemon.log in the data directory.',
    positionals: [],
    options: {
      concurrency: { type: 'string', value: '<n>', description: 'runs at once (default 4)' },
      'interval-ms': INTERVAL_OPTION,
      'log-max-size': LOG_MAX_SIZE_OPTION,
      store: STORE_OPTION,
      labels: LABELS_OPTION,
      json: JSON_OPTION,
    },
  },
  async run({ values }, ctx) {
    const concurrency = intOption(this.spec, 'concurrency', values.concurrency, 4);
    // Checked here, under the name it was given by: the daemon gets it in its environment (LOOPS_STORE).
    if (typeof values.store === 'string') parseStore(values.store, '--store');
    const started = await startDaemon(ctx.dataDir, {
      concurrency,
      ...(typeof values.store === 'string' ? { store: values.store } : {}),
      ...(values.labels !== undefined ? { labels: values.labels as string[] } : {}),
      ...(typeof values['interval-ms'] === 'string' ? { intervalMs: values['interval-ms'] } : {}),
      ...(typeof values['log-max-size'] === 'string' ? { logMaxSize: values['log-max-size'] } : {}),
    });
    if (ctx.json) printJson(ctx, started);
    else ctx.out.write(`Started the loops daemon (pid ${started.pid}); logs: ${started.log}\n`);
    return EXIT.ok;
  },
};

const stop: CliCommand = {
  spec: {
    name: 'daemon stop',
    summary: 'Stop the daemon gracefully (running runs are cancelled and recorded).',
    positionals: [],
    options: {
      timeout: { type: 'string', value: '<duration>', description: 'how long to wait before giving up (default 60s)' },
      json: JSON_OPTION,
    },
  },
  async run({ values }, ctx) {
    const { parseDuration } = await import('../../events/durations.js');
    const timeoutMs = values.timeout ? parseDuration(values.timeout as string, '--timeout') : 60_000;
    const result = await stopDaemon(ctx.dataDir, { timeoutMs });
    if (!result.stopped) {
      if (ctx.json) printJson(ctx, result);
      else ctx.err.write(`No daemon is running for ${ctx.dataDir}.\n`);
      return EXIT.ok;
    }
    if (ctx.json) printJson(ctx, result);
    else ctx.out.write(`Stopped the loops daemon (pid ${result.pid}).\n`);
    return EXIT.ok;
  },
};

const status: CliCommand = {
  spec: {
    name: 'daemon status',
    summary: 'Is the daemon running and healthy? pid, uptime, version, database, runs, next fire time, last error.',
    description: [
      'Exit code 0 when the daemon runs and is healthy, 1 otherwise: not running; degraded (writes fail:',
      'the disk is full, the database is locked beyond its busy timeout, an I/O error — it backs off and',
      'recovers by itself once they succeed); no pass for 2 minutes; passes that spin (something stays due',
      'right after every pass); or due runs that wait for a minute while nothing runs. `problem` says which.',
      '',
      '--fleet lists every runner of the store instead — on a store hosts share (LOOPS_STORE=postgres://…),',
      "each host's daemon with its lease and running runs, runners holding runs without a daemon, and the",
      'work fired but not claimed yet; exit code 0 when at least one daemon is live, 1 otherwise.',
    ].join('\n'),
    positionals: [],
    options: { fleet: { type: 'boolean', description: 'every runner of the store (all hosts), from its leases' }, json: JSON_OPTION },
  },
  async run({ values }, ctx: CliContext) {
    if (values.fleet === true) return fleetView(ctx);
    const view = daemonStatus(ctx.dataDir, ctx.now);
    if (ctx.json) printJson(ctx, view);
    else if (!view.running) ctx.out.write(`${paint(ctx.color, 'yellow', 'not running')}  (data ${ctx.dataDir}; start it with loops daemon start)\n`);
    else {
      const lines = [
        `${view.healthy ? paint(ctx.color, 'green', 'running') : paint(ctx.color, 'red', `running, but unhealthy: ${view.problem}`)}  pid ${view.pid}, up ${formatDuration(Math.max(1000, view.uptimeMs ?? 0))}, loops ${view.version}`,
        `data        ${view.dataDir}`,
        `database    ${view.database.path} (${(view.database.bytes / 1024).toFixed(0)} KiB)`,
        `runs        ${view.activeRuns} running, ${view.queuedRuns} queued${
          view.spawner ? `; forked by ${view.spawner.mode === 'helper' ? `the spawner helper${view.spawner.pid ? ` (pid ${view.spawner.pid})` : ''}` : `the daemon (${view.spawner.reason ?? 'inline'})`}` : ''
        }`,
        `next fire   ${view.nextFireAt ?? '-'}`,
        `last pass   ${view.lastPassAt ?? '-'}`,
        `last error  ${view.lastError ?? 'none'}`,
      ];
      ctx.out.write(lines.join('\n') + '\n');
    }
    return view.healthy ? EXIT.ok : EXIT.error;
  },
};

async function fleetView(ctx: CliContext): Promise<number> {
  const { fleetStatus } = await import('../../runtime/daemon/fleet.js');
  const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
  try {
    const fleet = await fleetStatus(runtime);
    const daemons = fleet.runners.filter((r) => r.kind === 'daemon').length;
    if (ctx.json) printJson(ctx, fleet);
    else {
      const store = fleet.store.kind === 'sqlite'
        ? `sqlite (${ctx.dataDir})`
        : `${fleet.store.where} (schema ${fleet.store.schema})${fleet.store.listening === false ? `; ${paint(ctx.color, 'yellow', 'LISTEN is down: other hosts\' events are read from the head every second')}` : ''}`;
      const ago = (at: string | null) => (at === null ? '-' : `${formatDuration(Math.max(0, ctx.now - Date.parse(at)))} ago`);
      const rows = fleet.runners.map((r) => [
        r.host,
        r.kind,
        r.labels.length ? r.labels.join(',') : '-',
        r.runnerId,
        ago(r.heartbeatAt),
        r.clockOffsetMs === null ? '-' : `${r.clockOffsetMs > 0 ? 'behind' : 'ahead'} ${Math.abs(r.clockOffsetMs)}ms`,
        r.runs.length === 0 ? '0' : `${r.runs.length} (${r.runs.slice(0, 3).join(', ')}${r.runs.length > 3 ? ', …' : ''})`,
      ]);
      const head = ['HOST', 'KIND', 'LABELS', 'RUNNER', 'HEARTBEAT', 'CLOCK', 'RUNNING'];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
      const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
      ctx.out.write(`store    ${store}\ndaemons  ${daemons} live; ${fleet.waiting} fired slot(s) waiting for a runner\n\n`);
      ctx.out.write(rows.length ? `${[line(head), ...rows.map(line)].join('\n')}\n` : 'no runner holds a lease now\n');
      for (const r of fleet.runners) {
        if (r.clockOffsetMs !== null && Math.abs(r.clockOffsetMs) > CLOCK_WARN_MS) {
          ctx.out.write(`${paint(ctx.color, 'yellow', 'clock')}    ${r.host}: ${Math.abs(r.clockOffsetMs)} ms ${r.clockOffsetMs > 0 ? 'behind' : 'ahead of'} the database server's when its daemon started: leases and due times use each host's clock; sync it (NTP)\n`);
        }
      }
      for (const h of fleet.down) {
        const labels = h.labels.length ? ` (labels ${h.labels.join(',')})` : '';
        ctx.out.write(`${paint(ctx.color, 'yellow', 'down')}     ${h.host}${labels}: ${h.status === 'stopped' ? `stopped ${ago(h.stoppedAt)}` : `its daemon (started ${ago(h.startedAt)}) stopped renewing its lease without recording a stop`}\n`);
      }
      for (const w of fleet.noRunner) {
        ctx.out.write(
          `${paint(ctx.color, 'yellow', 'waiting')}  ${w.waiting} run(s) of ${w.loops.join(', ')} for a runner labelled ${w.runsOn.join(',')}: no live daemon has those labels (loops daemon start --labels ${w.runsOn.join(',')} on a host that should run them)\n`,
        );
      }
    }
    return daemons > 0 ? EXIT.ok : EXIT.error;
  } finally {
    runtime.close();
  }
}

const logs: CliCommand = {
  spec: {
    name: 'daemon logs',
    summary: "Print the daemon's log (daemon.log in the data directory).",
    positionals: [],
    options: {
      lines: { type: 'string', short: 'n', value: '<n>', description: 'the last n lines (default 50)' },
      follow: { type: 'boolean', short: 'f', description: 'keep printing new lines (Ctrl-C to stop)' },
    },
  },
  async run({ values }, ctx) {
    const n = intOption(this.spec, 'lines', values.lines, 50);
    const file = logFile(ctx.dataDir);
    if (!existsSync(file)) {
      ctx.err.write(`No daemon log yet (${file}).\n`);
      if (!values.follow) return EXIT.ok;
    }
    // Ctrl-C ends a follow: listened for before anything is printed (a signal that arrives with no
    // listener kills the process at once, and a reader may answer the first line with it).
    let stop: () => void = () => undefined;
    const stopped = values.follow
      ? new Promise<void>((resolve) => {
          stop = resolve;
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        })
      : null;
    // Following: watch (inotify/FSEvents on the data directory: the log created, grown or rotated —
    // no polling loop) BEFORE printing what is there, so nothing appended meanwhile is missed.
    // Across a rotation the end of the old file is read from daemon.log.1: the cursor of `loops logs -f`.
    let follower: FileCursor | null = null;
    const readNew = () => follower?.poll((chunk) => ctx.out.write(chunk));
    const watcher = values.follow
      ? watch(ctx.dataDir, (_event, name) => {
          if (name === null || name.startsWith('daemon.log')) readNew();
        })
      : null;
    const { text, offset } = daemonLogLines(ctx.dataDir, n);
    if (text) ctx.out.write(text);
    follower = new FileCursor(file, { from: offset, wholeRotations: true });
    readNew();
    if (!watcher || !stopped) {
      follower.close();
      return EXIT.ok;
    }
    await stopped;
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    watcher.close();
    follower.close();
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = {
  'daemon run': run,
  'daemon start': start,
  'daemon stop': stop,
  'daemon status': status,
  'daemon logs': logs,
};

const install: CliCommand = {
  spec: {
    name: 'daemon install',
    summary: 'Install the daemon as a systemd user unit (Linux) or a LaunchAgent (macOS), and print how to enable it.',
    description: [
      'Writes the file (paths quoted for its format) and prints it and the commands to run; it starts',
      'nothing itself unless --enable is given, which runs those commands (systemctl --user / launchctl)',
      'one after the other, stopping at the first that fails (exit 1, with its output).',
    ].join('\n'),
    positionals: [],
    options: {
      'dry-run': { type: 'boolean', description: 'print what would be written, write nothing' },
      enable: { type: 'boolean', description: 'also run the commands that enable and start it' },
      json: JSON_OPTION,
    },
  },
  async run({ values }, ctx) {
    const { systemdUnit, launchAgent } = await import('../../runtime/daemon/service.js');
    const { mkdirSync, writeFileSync } = await import('node:fs');
    const { dirname } = await import('node:path');
    const spec = {
      node: process.execPath,
      main: cliEntry(),
      dataDir: ctx.dataDir,
      path: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    };
    if (process.platform !== 'linux' && process.platform !== 'darwin') {
      throw new LoopsError('usage', `loops daemon install supports Linux (systemd) and macOS (launchd), not ${process.platform}`, {
        hint: 'run loops daemon run under your service manager',
      });
    }
    const file = process.platform === 'darwin' ? launchAgent(spec) : systemdUnit(spec);
    const dry = values['dry-run'] === true;
    if (!dry) {
      mkdirSync(dirname(file.path), { recursive: true });
      writeFileSync(file.path, file.content, { mode: 0o644 });
    }
    const enableResults = values.enable === true && !dry ? await enableService(file.enable) : undefined;
    const failed = enableResults?.find((r) => r.status !== 0);
    if (ctx.json) printJson(ctx, { ...file, written: !dry, ...(enableResults ? { enableResults } : {}) });
    else {
      ctx.out.write(`${dry ? 'Would write' : 'Wrote'} ${file.path}:\n\n${file.content}\n`);
      if (enableResults) ctx.out.write(`Enabled:\n${enableResults.map((r) => `  ${r.command} -> ${r.status === 0 ? 'ok' : `exit ${r.status ?? 'by a signal'}`}`).join('\n')}\n`);
      else ctx.out.write(`To enable and start it${dry && values.enable === true ? ' (--enable would run these)' : ''}:\n${file.enable.map((c) => `  ${c}`).join('\n')}\n`);
      for (const w of file.warnings) ctx.err.write(`warning: ${w}\n`);
    }
    if (failed) {
      throw new LoopsError('internal', `daemon install --enable: ${failed.command} exited with ${failed.status ?? 'a signal'}${failed.stderr ? `: ${failed.stderr.split('\n').slice(-1)[0]}` : ''}`, {
        hint: `${file.path} is written; run the remaining commands by hand once the cause is fixed`,
      });
    }
    return EXIT.ok;
  },
};

interface EnableResult {
  command: string;
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the service manager's enable commands (sh -c: launchctl's use $(id -u)), stopping at the first failure. */
async function enableService(commands: string[]): Promise<EnableResult[]> {
  const { spawnSync } = await import('node:child_process');
  const results: EnableResult[] = [];
  for (const command of commands) {
    const r = spawnSync('/bin/sh', ['-c', command], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    results.push({ command, status: r.error ? 127 : r.status, stdout: (r.stdout ?? '').trim(), stderr: (r.stderr ?? r.error?.message ?? '').trim() });
    if (results[results.length - 1]!.status !== 0) break;
  }
  return results;
}

commands['daemon install'] = install;
