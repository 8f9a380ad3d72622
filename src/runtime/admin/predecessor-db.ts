/**
 * The predecessor's database (`@hasna/loops` 0.3.x), read: its rows in its own schema, opened
 * read-only (never written), and whether its daemon still holds its lease. What the rows mean
 * here is ./import-hasna.ts's business.
 */
import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import Database from 'better-sqlite3';
import { LoopsError, ValidationError } from '../../events/errors.js';

export const PREDECESSOR = '@hasna/loops';

export interface PLoop {
  id: string;
  name: string;
  description: string | null;
  status: string;
  schedule_json: string;
  target_json: string;
  next_run_at: string | null;
  retry_scheduled_for: string | null;
  catch_up: string;
  catch_up_limit: number;
  overlap: string;
  max_attempts: number;
  retry_delay_ms: number;
  lease_ms: number;
  expires_at: string | null;
  created_at: string;
}
export interface PRun {
  id: string;
  loop_id: string;
  loop_name: string;
  scheduled_for: string;
  attempt: number;
  status: string;
  started_at: string | null;
  finished_at: string | null;
  claimed_by: string | null;
  pid: number | null;
  exit_code: number | null;
  duration_ms: number | null;
  stdout: string | null;
  stderr: string | null;
  error: string | null;
  created_at: string;
}
export interface PWorkflow {
  id: string;
  name: string;
  description: string | null;
  version: number;
  status: string;
  steps_json: string;
  created_at: string;
}
export interface PWorkflowRun {
  id: string;
  workflow_id: string;
  workflow_name: string;
  loop_id: string | null;
  loop_run_id: string | null;
  status: string;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  created_at: string;
}
export interface PStepRun {
  workflow_run_id: string;
  step_id: string;
  sequence: number;
  status: string;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  pid: number | null;
  duration_ms: number | null;
  stdout: string | null;
  stderr: string | null;
  error: string | null;
}

export interface Predecessor {
  file: string;
  loops: PLoop[];
  runs: PRun[];
  workflows: PWorkflow[];
  workflowRuns: PWorkflowRun[];
  stepRuns: PStepRun[];
  lease: { pid: number; hostname: string; expires_at: string } | null;
}

const REQUIRED_TABLES = ['loops', 'loop_runs', 'daemon_lease'];

function notPredecessor(file: string, why: string): ValidationError {
  return new ValidationError(`${file} is not a ${PREDECESSOR} database: ${why}`, {
    hint: `pass the predecessor's database with --db (its default is ~/.hasna/loops/loops.db, or loops.db in the directory its LOOPS_DATA_DIR named)`,
  });
}

export function readPredecessor(file: string): Predecessor {
  if (!existsSync(file)) throw new ValidationError(`--db: ${file} does not exist`, { hint: `pass the ${PREDECESSOR} database with --db <path> (its default is ~/.hasna/loops/loops.db)` });
  if (!statSync(file).isFile()) throw new ValidationError(`--db: ${file} is not a file`);
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new LoopsError('internal', `cannot open ${file} read-only: ${(error as Error).message}`, { cause: error, hint: 'check that the file is readable' });
  }
  try {
    let tables: Set<string>;
    try {
      tables = new Set(db.prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name));
    } catch (error) {
      throw notPredecessor(file, (error as Error).message);
    }
    if (tables.has('events')) throw notPredecessor(file, 'it is a loops database (it has an event log)');
    const missing = REQUIRED_TABLES.filter((t) => !tables.has(t));
    if (missing.length) throw notPredecessor(file, `no ${missing.join(', ')} table`);
    const all = <T>(table: string, order: string): T[] => (tables.has(table) ? (db.prepare(`SELECT * FROM ${table} ORDER BY ${order}`).all() as T[]) : []);
    return {
      file,
      loops: all<PLoop>('loops', 'created_at, id'),
      runs: all<PRun>('loop_runs', 'created_at, id'),
      workflows: all<PWorkflow>('workflow_specs', 'created_at, id'),
      workflowRuns: all<PWorkflowRun>('workflow_runs', 'created_at, id'),
      stepRuns: all<PStepRun>('workflow_step_runs', 'workflow_run_id, sequence'),
      lease: (db.prepare('SELECT pid, hostname, expires_at FROM daemon_lease ORDER BY expires_at DESC LIMIT 1').get() as Predecessor['lease']) ?? null,
    };
  } finally {
    db.close();
  }
}

/** Refused while the predecessor's daemon holds its lease: it would go on firing the same loops. */
export function checkLease(p: Predecessor, nowMs: number): string | null {
  const lease = p.lease;
  if (!lease || Date.parse(lease.expires_at) <= nowMs) return null;
  if (lease.hostname === hostname() && !pidAlive(lease.pid)) {
    return `its daemon's lease (pid ${lease.pid}) runs until ${lease.expires_at}, but that process is gone`;
  }
  throw new ValidationError(`the ${PREDECESSOR} daemon (pid ${lease.pid} on ${lease.hostname}) holds its lease until ${lease.expires_at}`, {
    hint: `stop it first (with the old tool: loops daemon stop), so the two do not both run these loops; then import again`,
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
