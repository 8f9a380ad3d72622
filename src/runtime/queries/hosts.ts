/**
 * Runner hosts as the `hosts` projection holds them: each host's last daemon, its labels and
 * whether it last started or stopped (src/runtime/daemon/hosts.ts records them). Light: no
 * xstate or zod, for `show`, `why` and `daemon status`.
 */
import { cached, type Db } from '../../events/db.js';
import { runsOnMet } from '../host.js';

/** A host as its stream last told it (`hosts` projection). */
export interface HostRecord {
  id: string;
  runnerId: string;
  labels: string[];
  pid: number;
  bootId: string | null;
  version: string;
  /** The database server's clock less the host's at its daemon's start (null: not measured, e.g. on SQLite). */
  clockOffsetMs: number | null;
  /** `up`: its daemon started and recorded no stop (it may have been killed: ask its lease); `down`: it stopped. */
  status: 'up' | 'down';
  startedAt: string;
  stoppedAt: string | null;
}

interface HostRow {
  id: string;
  runner_id: string;
  labels: string;
  pid: number;
  boot_id: string | null;
  version: string;
  clock_offset_ms: number | null;
  status: 'up' | 'down';
  started_at: string;
  stopped_at: string | null;
}

/** Every host that ever started a daemon on this store, by id. */
export function knownHosts(db: Db): HostRecord[] {
  return cached<[], HostRow>(db, 'SELECT * FROM hosts ORDER BY id')
    .all()
    .map((r) => ({ id: r.id, runnerId: r.runner_id, labels: JSON.parse(r.labels) as string[], pid: r.pid, bootId: r.boot_id, version: r.version, clockOffsetMs: r.clock_offset_ms, status: r.status, startedAt: r.started_at, stoppedAt: r.stopped_at }));
}

/** Hosts whose last daemon had the labels `runsOn` names (for telling a user where such work could run). */
export function hostsWithLabels(db: Db, runsOn: ReadonlyArray<string>): HostRecord[] {
  return knownHosts(db).filter((h) => runsOnMet(runsOn, h.id, h.labels));
}
