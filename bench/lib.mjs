// Shared helpers for the benchmark harness: statistics, temp directories, machine info and
// WAL inspection. Plain ESM, no dependencies beyond what the project already has.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, platform, arch, release, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';

export function median(values) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function minMax(values) {
  return [Math.min(...values), Math.max(...values)];
}

export const now = () => performance.now();

// ── temp directories, removed on exit (also on Ctrl-C) ──────────────────────────────────────
const tempDirs = new Set();

export function makeTempDir(label) {
  const dir = mkdtempSync(join(tmpdir(), `loops-bench-${label}-`));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir) {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // best effort
  }
  tempDirs.delete(dir);
}

export function removeAllTempDirs() {
  for (const dir of [...tempDirs]) removeTempDir(dir);
}

process.once('exit', removeAllTempDirs);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    removeAllTempDirs();
    process.exit(130);
  });
}

// ── machine ──────────────────────────────────────────────────────────────────────────────────
export function machineInfo() {
  const list = cpus();
  return {
    node: process.version,
    v8: process.versions.v8,
    sqlite: null, // filled in by the caller once better-sqlite3 is loaded
    platform: `${platform()} ${release()} ${arch()}`,
    cpus: list.length,
    cpuModel: list[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    tmpdir: tmpdir(),
    loadavg: loadavg().map((x) => Math.round(x * 100) / 100),
    cpuTimes: cpuCounters(),
  };
}

/** The machine's CPU time counters (the aggregate line of Linux's /proc/stat, in ticks), or null. */
function cpuCounters() {
  try {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return { user, nice, system, idle, iowait, irq, softirq, steal };
  } catch {
    return null;
  }
}

/**
 * How the machine's CPUs spent the time since `from` (a `machineInfo()`), in % of all of it: busy
 * (user, nice, system, irq, softirq) and steal — time this VM wanted to run and its host ran someone
 * else. Steal makes every figure of the run noisier; a bench prints it beside its load averages.
 * null where /proc/stat is not there.
 */
export function cpuSince(from) {
  const now = cpuCounters();
  const then = from?.cpuTimes;
  if (!now || !then) return null;
  const d = Object.fromEntries(Object.keys(now).map((k) => [k, now[k] - then[k]]));
  const total = Object.values(d).reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const pct = (x) => Math.round((x / total) * 1000) / 10;
  return { busyPct: pct(d.user + d.nice + d.system + d.irq + d.softirq), stealPct: pct(d.steal) };
}

/** `cpuSince(from)` as a phrase for a bench's header ('' where unknown). */
export function cpuPhrase(from) {
  const c = cpuSince(from);
  return c ? `; CPUs ${c.busyPct}% busy, ${c.stealPct}% stolen by the VM's host` : '';
}

// ── WAL inspection ───────────────────────────────────────────────────────────────────────────
/**
 * Frames and commits in a WAL file (https://sqlite.org/fileformat.html#the_write_ahead_log):
 * a 32-byte header, then frames of a 24-byte header + one page; a frame whose "database size
 * after commit" field is non-zero ends a transaction.
 */
export function walStats(walFile, pageSize) {
  if (!existsSync(walFile)) return { frames: 0, commits: 0, pages: [] };
  const wal = readFileSync(walFile);
  let frames = 0;
  let commits = 0;
  const pages = [];
  for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
    frames += 1;
    pages.push(wal.readUInt32BE(off));
    if (wal.readUInt32BE(off + 4) !== 0) commits += 1;
  }
  return { frames, commits, pages };
}

// ── formatting ───────────────────────────────────────────────────────────────────────────────
export function fmt(value, unit) {
  if (!Number.isFinite(value)) return '-';
  if (unit === 'events/s') return `${Math.round(value).toLocaleString('en-US')}/s`;
  if (unit === 'ms') return value >= 100 ? `${value.toFixed(0)} ms` : `${value.toFixed(2)} ms`;
  if (unit === 'µs') return `${value.toFixed(1)} µs`;
  return String(value);
}

export function table(headers, rows, align = []) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) =>
    cells
      .map((c, i) => (align[i] === 'r' ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function readJsonFile(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/**
 * A bench script's options checked before it starts: `-h`/`--help` prints `usage` and exits 0; an
 * unknown option, or an option that needs a value given none, prints the error and `usage` and exits
 * 2 (a typo must not start a long run with the defaults). `flags` take no value, `valued` take one.
 */
export function checkOptions(args, { flags = [], valued = [] }, usage) {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${usage}\n`);
      process.exit(0);
    }
    if (flags.includes(arg)) continue;
    if (valued.includes(arg)) {
      if (args[i + 1] === undefined || args[i + 1].startsWith('--')) {
        process.stderr.write(`bench: ${arg} needs a value\n${usage}\n`);
        process.exit(2);
      }
      i += 1;
      continue;
    }
    process.stderr.write(`bench: unknown option ${arg}\n${usage}\n`);
    process.exit(2);
  }
}

// ── PostgreSQL server binaries and ports (bench/fleet.mjs) ───────────────────────────────────
/**
 * The directory holding PostgreSQL's server programs (`initdb`, `pg_ctl`, `postgres`): the first of
 * `$LOOPS_PG_BINDIR`, the directories of `PATH`, `pg_config --bindir`, and Debian's
 * /usr/lib/postgresql/<version>/bin (newest first) that has all three; null when none has.
 */
export function findPgBinDir(env = process.env) {
  const has = (dir) => ['initdb', 'pg_ctl', 'postgres'].every((name) => existsSync(join(dir, name)));
  const candidates = [];
  if (env.LOOPS_PG_BINDIR) candidates.push(env.LOOPS_PG_BINDIR);
  for (const dir of (env.PATH ?? '').split(':')) if (dir) candidates.push(dir);
  const config = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (config.status === 0 && config.stdout.trim()) candidates.push(config.stdout.trim());
  try {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join('/usr/lib/postgresql', v, 'bin'));
  } catch {
    // not Debian's layout
  }
  for (const dir of candidates) {
    // PATH may hold symbolic links (/usr/local/bin/initdb → …): pg_ctl finds `postgres` next to
    // itself, so the directory used is the one the links point into.
    if (has(dir)) return dirname(realpathSync(join(dir, 'pg_ctl')));
  }
  return null;
}

/** A TCP port free on 127.0.0.1 now (the kernel's pick; free again once this returns). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}
