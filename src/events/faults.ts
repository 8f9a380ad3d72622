/**
 * Named crash points, for proving recovery (issue 11, docs/RELIABILITY.md). Inert unless the process
 * was started with `LOOPS_FAULT=<point>[:<n>][,<point>[:<n>]…]`: the n-th time (default the first)
 * this process reaches a named point, it writes one line to stderr and kills itself with SIGKILL —
 * exactly what a `kill -9` (or a power cut, for everything not yet fsynced) at that instant does.
 * Nothing is cleaned up, flushed or recorded on the way out: that is the point.
 *
 * The points, in the order a run meets them:
 *  - `between-lease-and-pidfile`: a daemon starting, after it took its lease (uncommitted) and before
 *    it wrote its pid file;
 *  - `before-append`: before any append to the log (inside a batch too);
 *  - `mid-batch`: a batch's appends made, its COMMIT not yet;
 *  - `between-fired-and-claimed`: a pass committed its decisions (slots fired) and claimed none yet;
 *  - `after-append-before-spawn`: a run's (or step's) intent is in the log, its process not started;
 *  - `after-spawn-before-record`: the process started, `process.spawned` (`step.spawned`) not recorded;
 *  - `after-exit-before-record`: the process ended, its exit not recorded.
 *
 * Reading `process.env` once, at the first point reached; a value naming no point is reported by
 * `checkFaultEnv` (the CLI calls it at start) rather than ignored.
 */
import { writeSync } from 'node:fs';
import { ValidationError } from './errors.js';

export const FAULT_POINTS = [
  'between-lease-and-pidfile',
  'before-append',
  'mid-batch',
  'between-fired-and-claimed',
  'after-append-before-spawn',
  'after-spawn-before-record',
  'after-exit-before-record',
] as const;

export type FaultPoint = (typeof FAULT_POINTS)[number];

/** `LOOPS_FAULT`'s value parsed: the pass (1-based) at which each named point kills the process. */
export function parseFaults(value: string): Map<FaultPoint, number> {
  const out = new Map<FaultPoint, number>();
  for (const part of value.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [name, count, ...rest] = part.split(':');
    if (!(FAULT_POINTS as readonly string[]).includes(name!) || rest.length > 0 || (count !== undefined && !/^[1-9]\d{0,8}$/.test(count))) {
      throw new ValidationError(`LOOPS_FAULT: "${part}" is not <point>[:<n>] with a known point and n ≥ 1`, {
        hint: `points: ${FAULT_POINTS.join(', ')} (crash points are for recovery tests; unset LOOPS_FAULT for normal use)`,
      });
    }
    out.set(name as FaultPoint, count === undefined ? 1 : Number(count));
  }
  return out;
}

let armed: Map<FaultPoint, number> | null | undefined;
const passes = new Map<FaultPoint, number>();

/** Throws a ValidationError when `LOOPS_FAULT` is set to something that names no crash point. */
export function checkFaultEnv(env: NodeJS.ProcessEnv = process.env): void {
  if (env.LOOPS_FAULT) parseFaults(env.LOOPS_FAULT);
}

/** A crash point: kills this process here when `LOOPS_FAULT` says so (see the module comment). */
export function faultPoint(point: FaultPoint): void {
  if (armed === undefined) {
    const value = process.env.LOOPS_FAULT;
    armed = value ? parseFaults(value) : null;
  }
  if (armed === null) return;
  const at = armed.get(point);
  if (at === undefined) return;
  const n = (passes.get(point) ?? 0) + 1;
  passes.set(point, n);
  if (n !== at) return;
  // Synchronously: a write to a piped stderr is asynchronous in Node and would die with the process.
  try {
    writeSync(2, `loops: LOOPS_FAULT: crash point ${point} (pass ${n}) reached in pid ${process.pid}: SIGKILL\n`);
  } catch {
    // no stderr: die all the same
  }
  process.kill(process.pid, 'SIGKILL');
}
