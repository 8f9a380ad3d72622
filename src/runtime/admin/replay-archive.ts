/**
 * The history of an archived stream (`loops prune --archive`), read back from its archive file for
 * `loops replay --archive`: the file must be the one the tombstone recorded (its sha256) and hold
 * exactly the versions the tombstone says it moved.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData } from '../../events/catalog.js';
import { DeterminismError, NotFoundError } from '../../events/errors.js';
import type { EventStore, StoredEvent, StreamInfo } from '../../events/types.js';
import { ARCHIVED } from '../../machines/fold.js';

/** A stream's tombstone, when its history was archived (its first event). */
export function tombstoneOf(events: readonly StoredEvent[]): EventData<'stream.archived'> | null {
  const first = events[0];
  return first?.type === ARCHIVED ? (first.data as EventData<'stream.archived'>) : null;
}

/**
 * An archived stream's moved history (from the archive file, checked) and its live events (the
 * tombstone first). `file`: where the archive is now (default: where the tombstone says, under
 * `dataDir`).
 */
export async function archivedHistory(
  log: EventStore,
  dataDir: string,
  streamId: string,
  file?: string,
): Promise<{ info: StreamInfo; history: StoredEvent[]; live: StoredEvent[]; file: string }> {
  const info = await log.streamInfo(streamId);
  const live = info ? await log.readStream(streamId) : [];
  const tombstone = tombstoneOf(live);
  if (!info || !tombstone) throw new NotFoundError(info ? `${streamId} is not archived: its whole history is in the log` : `no stream ${streamId} in the log`);
  const path = file ?? join(dataDir, tombstone.file);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new NotFoundError(`cannot read the archive of ${streamId}: ${(error as Error).message}`, {
      hint: `its versions ${tombstone.fromVersion}-${tombstone.toVersion} were archived to ${tombstone.file}; give its new place with --archive-file`,
    });
  }
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== tombstone.sha256) {
    throw new DeterminismError(`archive ${path} is not the file ${streamId} was archived to: its sha256 is ${sha256}, the tombstone recorded ${tombstone.sha256}`, tombstone.fromVersion, {
      hint: 'the file was changed or replaced; restore it from a backup',
    });
  }
  const history: StoredEvent[] = [];
  const lines = bytes.toString('utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]) continue;
    let entry: { event?: StoredEvent };
    try {
      entry = JSON.parse(lines[i]!) as { event?: StoredEvent };
    } catch {
      throw new DeterminismError(`archive ${path}, line ${i + 1}: not JSON`, tombstone.fromVersion);
    }
    if (entry.event?.streamId === streamId) history.push(entry.event);
  }
  const versions = history.map((e) => e.version);
  const expected = Array.from({ length: tombstone.events }, (_, i) => tombstone.fromVersion + i);
  if (JSON.stringify(versions) !== JSON.stringify(expected)) {
    throw new DeterminismError(`archive ${path} holds versions ${versions.join(',') || 'none'} of ${streamId}, the tombstone says ${tombstone.fromVersion}-${tombstone.toVersion}`, tombstone.fromVersion);
  }
  return { info, history, live, file: path };
}
