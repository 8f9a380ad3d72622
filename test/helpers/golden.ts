/**
 * The golden logs (test/fixtures/golden, recorded by scripts/record-golden.mjs; what each holds and
 * how to re-record: its README.md), as the tests that load them read them (golden.int,
 * pg-projections.int, replica.int): where they are, which scenarios there are, one scenario's
 * recorded events, `streams` rows and projection tables, and which of those tables the current
 * code's must equal. LOOPS_GOLDEN_DIR points them at another copy of the goldens (e.g. a doctored one).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EventRow, PreparedEvent, StreamRow } from '../../src/events/sqlite-log.js';
import { projections } from '../../src/projections/registry.js';
import type { Projection, ProjectionTable } from '../../src/projections/types.js';

export const goldenDir = process.env.LOOPS_GOLDEN_DIR ?? fileURLToPath(new URL('../fixtures/golden', import.meta.url));

/** A line of events.jsonl: an `events` row with its JSON columns parsed (`data`, `meta` and `state` as appended). */
export type GoldenEvent = Pick<EventRow, 'position' | 'stream_id' | 'version'> & PreparedEvent;

/** An element of streams.json: a `streams` row as recorded. */
export type GoldenStream = StreamRow;

/** A table of projections.json: its projection (null: a table of no projection of the recording build), its rows in `orderBy`. */
export interface GoldenTable {
  projection: string | null;
  orderBy: string;
  rows: Array<Record<string, unknown>>;
}

/** projections.json. */
export interface GoldenProjections {
  /** The `projections` table as recorded: name → version. */
  versions: Record<string, number>;
  /** Every projection table, by name. */
  tables: Record<string, GoldenTable>;
}

export interface Golden {
  events: GoldenEvent[];
  streams: GoldenStream[];
  projections: GoldenProjections;
}

/** The scenarios: every directory of `goldenDir`, sorted. */
export function goldenScenarios(): string[] {
  return readdirSync(goldenDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

/** The scenario `name` as recorded. */
export function loadGolden(name: string): Golden {
  const dir = join(goldenDir, name);
  return {
    events: readFileSync(join(dir, 'events.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as GoldenEvent),
    streams: JSON.parse(readFileSync(join(dir, 'streams.json'), 'utf8')) as GoldenStream[],
    projections: JSON.parse(readFileSync(join(dir, 'projections.json'), 'utf8')) as GoldenProjections,
  };
}

/**
 * The recorded tables the current code's must equal: every table of each projection whose version
 * is the recorded one (a projection new since the recording, or one whose version moved, is not
 * compared), with its recorded rows.
 */
export function recordedTables(golden: Golden): Array<{ projection: Projection; table: ProjectionTable; recorded: GoldenTable }> {
  const out: Array<{ projection: Projection; table: ProjectionTable; recorded: GoldenTable }> = [];
  for (const projection of projections) {
    if (golden.projections.versions[projection.name] !== projection.version) continue;
    for (const table of projection.tables) {
      const recorded = golden.projections.tables[table.name];
      if (recorded) out.push({ projection, table, recorded });
    }
  }
  return out;
}
