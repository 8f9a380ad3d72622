/**
 * `loops prune` as one request — what the CLI command and the SDK's `prune` both call: the
 * options checked (something to prune; `vacuum` without a dry run, and with the daemon stopped),
 * then the output folders pruned (prune.ts), the selected runs' events archived (archive.ts,
 * `archive`) and loops.db vacuumed (`vacuum`), in that order, on one runtime. A dry run records
 * and removes nothing.
 */
import { UsageError } from '../../events/errors.js';
import type { SpaceReport } from '../../events/types.js';
import { runningDaemon } from '../daemon/daemon-info.js';
import type { Runtime } from '../runtime.js';
import type { ArchiveReport } from './archive.js';
import { parseKeepLast, parseOlderThan, planPrune, prune, type PruneOptions, type PruneReport } from './prune.js';

/** What to prune (`loops prune`'s options); give `olderThan`, `keepLast`, `vacuum` or several. */
export interface PruneRequest {
  /** Only runs finished before this: how long ago (`30d`, `12h`; `0s` = now) or an ISO time (`--older-than`). */
  olderThan?: string | null;
  /** Keep the n most recent finished runs of each loop and each workflow: a whole number, 0 or more (`--keep-last`). */
  keepLast?: string | number | null;
  /** Also move the selected runs' events from the log to an archive file (`--archive`). */
  archive?: boolean;
  /** Rewrite loops.db to give its free space back to the disk; the daemon must be stopped; no dry run (`--vacuum`). */
  vacuum?: boolean;
  /** List what would be removed; remove nothing, record nothing (`--dry-run`). */
  dryRun?: boolean;
}

/** What a prune did (or, in a dry run, would do). */
export interface PruneOutcome {
  /** The output folders pruned; null for a vacuum alone. */
  prune: PruneReport | null;
  /** What `archive` moved (or would); null without it. */
  archive: ArchiveReport | null;
  /** The space `vacuum` gave back; null without it. */
  vacuum: SpaceReport | null;
}

/**
 * Checks `request` and prunes `runtime`'s data directory as it says (see the header); `now` (default
 * the runtime's clock) is what `olderThan` counts back from and a dry run selects at. UsageError for
 * a request that cannot be served.
 */
export async function runPrune(runtime: Runtime, request: PruneRequest, now: number = runtime.clock.now()): Promise<PruneOutcome> {
  const { olderThan, keepLast } = request;
  const given = (v: unknown) => v !== undefined && v !== null;
  const vacuuming = request.vacuum === true;
  const dryRun = request.dryRun === true;
  if (!given(olderThan) && !given(keepLast) && !vacuuming) {
    throw new UsageError('loops prune: say what to prune: --older-than <duration>, --keep-last <n>, or both', {
      hint: 'e.g. loops prune --older-than 30d --keep-last 10 --dry-run (nothing is pruned without one of them)',
    });
  }
  if (vacuuming && dryRun) {
    throw new UsageError('loops prune: --vacuum rewrites loops.db; it has no dry run', { hint: 'drop --dry-run to vacuum, or drop --vacuum to see what would be pruned' });
  }
  if (vacuuming) {
    const daemon = runningDaemon(runtime.dataDir);
    if (daemon) {
      throw new UsageError(`loops prune: --vacuum needs the daemon stopped (pid ${daemon.pid} is running): it rewrites loops.db under the write lock`, {
        hint: 'loops daemon stop && loops prune --vacuum && loops daemon start',
      });
    }
  }
  if (!given(olderThan) && !given(keepLast)) return { prune: null, archive: null, vacuum: await runtime.log.reclaimSpace({ full: true }) };
  if (given(olderThan) && typeof olderThan !== 'string') throw new UsageError(`loops prune: --older-than must be a duration or an ISO time, got ${JSON.stringify(olderThan)}`);
  if (given(keepLast) && typeof keepLast !== 'string' && typeof keepLast !== 'number') {
    throw new UsageError(`loops prune: --keep-last must be a whole number of runs, got ${JSON.stringify(keepLast)}`);
  }
  const options: PruneOptions = {
    cutoff: typeof olderThan === 'string' ? await parseOlderThan(olderThan, now) : null,
    keepLast: given(keepLast) ? parseKeepLast(String(keepLast)) : null,
  };
  const { archive, planArchive } = request.archive === true ? await import('./archive.js') : { archive: null, planArchive: null };
  if (dryRun) {
    return {
      prune: await planPrune(runtime, options, now),
      archive: planArchive ? await planArchive(runtime, options) : null,
      vacuum: null,
    };
  }
  const report = await prune(runtime, options);
  const archived = archive ? await archive(runtime, options) : null;
  return { prune: report, archive: archived, vacuum: vacuuming ? await runtime.log.reclaimSpace({ full: true }) : null };
}
