/**
 * A writer frozen inside a transaction on the PostgreSQL store (issue 15: a daemon paused with
 * SIGSTOP, a VM suspended, a partition): every writing transaction holds the log's head row until
 * it commits, so without a limit the whole fleet's writes would wait for as long as it is frozen.
 * The server ends a session idle in a transaction after `idleInTransactionMs` (default 10 s; 1 s
 * here): the frozen writer's transaction is rolled back, the others write again, and the frozen one
 * finds, when it runs on, that nothing it wrote was committed. Real PostgreSQL, a schema of its own.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/types.js';
import { at } from '../helpers/events.js';
import { DEFAULT_PG_URL, dropSchemas, pgLog, pgReachable } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the frozen writer's test (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

const paused = (reason: string): NewEvent => ({ type: 'loop.paused', data: { reason }, at: at(0) });

describe.skipIf(!havePg)('a writer frozen inside a transaction', () => {
  it('is ended by the server after idleInTransactionMs: the others write again, its own writes are rolled back', async () => {
    // The lock timeout (what another writer waits for the head) is longer than the idle limit: the
    // other writer's append waits for the frozen one's session to be ended, then commits.
    const log = pgLog(schemas, { idleInTransactionMs: 1000, lockTimeoutMs: 8000 });
    const frozen = await log.open();
    const other = await log.open();
    let thaw!: () => void;
    const thawed = new Promise<void>((resolve) => (thaw = resolve));
    let wrote!: () => void;
    const holding = new Promise<void>((resolve) => (wrote = resolve));
    // The frozen writer: it has written (it holds the head) and then sends nothing — as a process
    // stopped between two statements of its transaction.
    const stuck = frozen.events.batch(async (batch) => {
      await frozen.events.append('loop:frozen', [paused('never committed')], { expectedVersion: 0, kind: 'loop', batch });
      wrote();
      await thawed;
    });
    stuck.catch(() => undefined);
    await holding;
    const started = Date.now();
    const appended = await other.events.append('loop:other', [paused('written')], { expectedVersion: 0, kind: 'loop' });
    const waited = Date.now() - started;
    expect(appended.position).toBe(1); // the frozen writer's position 1 was rolled back
    expect(waited).toBeLessThan(8000); // not the lock timeout: the session was ended
    thaw();
    // Running on, the frozen writer learns its transaction is gone: a lost connection, nothing committed.
    await expect(stuck).rejects.toMatchObject({ retryable: true });
    expect((await other.events.readAll()).map((e) => e.streamId)).toEqual(['loop:other']);
    // And it writes again afterwards (a new connection from its pool).
    expect((await frozen.events.append('loop:frozen', [paused('later')], { expectedVersion: 0, kind: 'loop' })).position).toBe(2);
  });
});
