/**
 * `events$` of the PostgreSQL store: this store's events as its transactions commit, and — a fleet
 * has several writers — every other process's too, all in position order, each once
 * (docs/design/postgres.md, item 8).
 *
 * Others' events are learnt of through LISTEN/NOTIFY: every writing transaction sends `NOTIFY` with
 * its new head as payload, which PostgreSQL delivers at its commit. The payload is only a nudge;
 * the events are read by position (`position > last published`), which misses none because
 * positions are taken in commit order (the log head, core.ts). While the LISTEN connection is down
 * the head is polled instead (every `pollMs`) and the connection retried (every `reconnectMs`);
 * `listening$` says which.
 *
 * One publisher (`lastPublished`, one chain of steps) serves both: after this store's own commit,
 * the events committed by others in between (positions up to the head its transaction found) are
 * read and published first, then its own, without reading them back.
 */
import { BehaviorSubject, type Observable, type Subject } from 'rxjs';
import type { Client } from 'pg';
import { rowToEvent, type EventRow } from '../sqlite-log.js';
import type { StoredEvent } from '../types.js';
import type { PgConnection } from './connect.js';
import { selectHead, type Names } from './sql.js';

export interface FollowOptions {
  /** Deliver other processes' events on `events$` (default true); false: only this store's, as SQLite's. */
  follow?: boolean;
  /** While LISTEN is down: how often the head is polled (default 1000 ms). */
  pollMs?: number;
  /** While LISTEN is down: how often its connection is tried again (default 1000 ms). */
  reconnectMs?: number;
}

/** Rows read per catch-up query. */
const PAGE = 1000;

export class Follower {
  private lastPublished: number;
  private chain: Promise<void> = Promise.resolve();
  private catchUpQueued = false;
  /** A read for publication failed: catch up at the next tick even while listening. */
  private behind = false;
  private listener: Client | null = null;
  private connecting = false;
  private lastAttempt = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly state = new BehaviorSubject<boolean>(false);
  readonly listening$: Observable<boolean> = this.state.asObservable();
  /** The LISTEN connection's backend pid (pg_stat_activity), null while it is down. */
  listenerPid: number | null = null;
  private readonly follow: boolean;
  private readonly pollMs: number;
  private readonly reconnectMs: number;

  constructor(
    private readonly conn: PgConnection,
    private readonly names: Names,
    private readonly subject: Subject<StoredEvent>,
    head: number,
    options: FollowOptions = {},
  ) {
    this.lastPublished = head;
    this.follow = options.follow ?? true;
    this.pollMs = options.pollMs ?? 1000;
    this.reconnectMs = options.reconnectMs ?? 1000;
  }

  get listening(): boolean {
    return this.state.value;
  }

  /** Starts listening (or, when that fails, polling). Never throws: the store works without it. */
  async start(): Promise<void> {
    if (this.follow) await this.connectListener();
  }

  /**
   * Publishes this store's committed events, after those others committed before them (positions
   * in (`lastPublished`, `headBefore`]), where following. If that read fails, its own wait too and
   * come from the log at the next catch-up: `events$` never skips a position or reorders.
   */
  publishLocal(headBefore: number | null, events: readonly StoredEvent[]): Promise<void> {
    if (events.length === 0 || headBefore === null) return Promise.resolve();
    return this.step(async () => {
      if (this.follow && this.lastPublished < headBefore) {
        try {
          await this.readAndPublish(headBefore);
        } catch {
          this.fallBehind();
          return;
        }
      }
      for (const event of events) this.publish(event);
    });
  }

  /** Reads and publishes everything committed after `lastPublished` (once per burst of nudges). */
  catchUp(): void {
    if (this.catchUpQueued || this.closed) return;
    this.catchUpQueued = true;
    void this.step(async () => {
      this.catchUpQueued = false;
      try {
        await this.readAndPublish(Number.MAX_SAFE_INTEGER);
      } catch {
        this.fallBehind();
      }
    });
  }

  /** Stops listening and polling; resolves once the publisher is idle. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopTimer();
    const listener = this.listener;
    this.listener = null;
    this.listenerPid = null;
    if (this.state.value) this.state.next(false);
    this.state.complete();
    if (listener) {
      // Referenced again while it ends: an unreferenced socket's close would never be waited for
      // (the process would exit with the store's end still pending — exit 13 at a top-level await).
      (listener as Client & { ref(): void }).ref();
      await listener.end().catch(() => {});
    }
    await this.chain;
  }

  private step(fn: () => Promise<void>): Promise<void> {
    const next = this.chain.then(fn);
    this.chain = next.catch(() => {});
    return next;
  }

  private publish(event: StoredEvent): void {
    if (event.position <= this.lastPublished || this.closed) return;
    this.lastPublished = event.position;
    this.subject.next(event);
  }

  /** Committed events in (`lastPublished`, `upTo`], in position order, read from the pool (never a batch's connection: only what is committed). */
  private async readAndPublish(upTo: number): Promise<void> {
    for (;;) {
      const rows = await this.conn.pool.query<EventRow>({
        name: 'loops_follow',
        text: `SELECT position, stream_id, version, type, v, data, meta, at, state FROM ${this.names.events} WHERE position > $1 AND position <= $2 ORDER BY position LIMIT ${PAGE}`,
        values: [this.lastPublished, upTo],
      });
      for (const row of rows.rows) this.publish(rowToEvent(row));
      if (rows.rows.length < PAGE) return;
    }
  }

  private fallBehind(): void {
    this.behind = true;
    this.startTimer();
  }

  private async connectListener(): Promise<void> {
    if (this.connecting || this.closed || this.listener) return;
    this.connecting = true;
    this.lastAttempt = Date.now();
    const client = this.conn.newClient('listen');
    // The server ending the connection (a restart, pg_terminate_backend) arrives as 'error' and
    // 'end'; either one, once: back to polling.
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => {
      if (message.channel === this.names.channel.slice(1, -1) && Number(message.payload) > this.lastPublished) this.catchUp();
    });
    try {
      await client.connect();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await client.query(`LISTEN ${this.names.channel}`);
      if (this.closed) {
        await client.end().catch(() => {});
        return;
      }
      // The LISTEN connection alone does not keep the process alive: closing the store is not
      // needed for a process to exit (a daemon is kept alive by its own work).
      // (pg has Client#unref since 8.x; its type declarations lack it.)
      (client as Client & { unref(): void }).unref();
      this.listener = client;
      this.listenerPid = pid;
      this.state.next(true);
      this.stopTimerIfIdle();
      // What was committed before LISTEN took effect (or while it was down) is read now.
      this.catchUp();
    } catch {
      await client.end().catch(() => {});
      if (this.state.value) this.state.next(false);
      this.startTimer();
    } finally {
      this.connecting = false;
    }
  }

  private lost(client: Client): void {
    if (this.listener !== client) return;
    this.listener = null;
    this.listenerPid = null;
    if (this.closed) return;
    // The next attempt `reconnectMs` from now: a server that just went away is not hammered.
    this.lastAttempt = Date.now();
    this.state.next(false);
    this.startTimer();
  }

  private startTimer(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => void this.tick(), this.pollMs);
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private stopTimerIfIdle(): void {
    if (this.listener && !this.behind) this.stopTimer();
  }

  /** While LISTEN is down (or a read failed): poll the head, catch up, and try to listen again. */
  private async tick(): Promise<void> {
    if (this.closed) return;
    try {
      const head = (await this.conn.pool.query<{ position: number }>(selectHead(this.names))).rows[0]?.position ?? 0;
      if (head > this.lastPublished || this.behind) {
        this.behind = false;
        this.catchUp();
      }
    } catch {
      // The server is unreachable: the next tick tries again.
    }
    if (!this.listener && this.follow && Date.now() - this.lastAttempt >= this.reconnectMs) await this.connectListener();
    this.stopTimerIfIdle();
  }
}
