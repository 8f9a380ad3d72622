/**
 * Who acts: every event this process appends carries it in `meta.by` — the trigger source (the
 * CLI command, `daemon`, `sdk`, or `library` for code that opens a runtime itself), the OS user,
 * the host and the loops version — so an audit of a run says who started, cancelled or adopted
 * it, not only which runner process did.
 */
import { hostname, userInfo } from 'node:os';

/** The version of loops that appends (kept equal to package.json's by a unit test). */
export const LOOPS_VERSION = '0.1.0';

export interface ActedBy {
  /** `run-now`, `tick`, `cancel`, `daemon`, `sdk`, `library`, … */
  source: string;
  user: string;
  host: string;
  loops: string;
}

let defaultSource = 'library';

/** The source of runtimes opened from now on without one of their own (the CLI sets its command). */
export function setTriggerSource(source: string): void {
  defaultSource = source;
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    // No passwd entry for this uid (a container): the uid is still who it is.
    return String(process.getuid?.() ?? 'unknown');
  }
}

export function actedBy(source?: string): ActedBy {
  return { source: source ?? defaultSource, user: osUser(), host: hostname(), loops: LOOPS_VERSION };
}
