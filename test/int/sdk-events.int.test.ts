/**
 * The SDK's events (issue 13 part 5): one stream's, the whole log's with filters, and `events$` —
 * live events appended by any process (a second process through the built SDK), polled by log
 * position; unsubscribing stops the polling; close() completes it. Real SQLite, real processes.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { firstValueFrom, filter as where, take, toArray } from 'rxjs';
import { afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import type { StoredEvent } from '../../src/events/types.js';
import { liveEvents } from '../../src/runtime/queries/log-events.js';
import { openReader } from '../../src/runtime/store.js';
import { LoopsClient, NotFoundError, UsageError } from '../../src/sdk.js';
import { ensureCoreBuilt } from '../helpers/build.js';
import { fixture } from '../helpers/fixtures.js';
import { tempDir } from '../helpers/tmp.js';

function client(): { client: LoopsClient; dataDir: string } {
  const dataDir = join(tempDir('loops-sdk-events-'), 'data');
  const c = new LoopsClient({ dataDir, runnerId: 'sdk-events:1:r' });
  onTestFinished(() => c.close());
  return { client: c, dataDir };
}

const target = { type: 'command' as const, command: 'true' };

/** Runs the second-process writer to its end; resolves with the loop id it printed. */
function secondProcess(dataDir: string, name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fixture('sdk-writer.mjs'), dataDir, name], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const id = /^done (\S+)/.exec(out)?.[1];
      if (code === 0 && id) resolve(id);
      else reject(new Error(`sdk-writer exited ${code}: ${out}${err}`));
    });
  });
}

beforeAll(() => ensureCoreBuilt(), 240_000);

afterEach(() => {
  vi.useRealTimers();
});

describe('LoopsClient events', () => {
  it('events(ref): one stream in order, by loop name, run id or raw stream id; NotFoundError otherwise', async () => {
    const { client: c } = client();
    const loop = await c.create({ name: 'ev', schedule: { type: 'manual' }, target });
    await c.pause('ev');
    const byName = await c.events('ev');
    expect(byName.map((e) => e.type)).toEqual(['loop.created', 'loop.paused']);
    expect(byName.every((e) => e.streamId === `loop:${loop.id}`)).toBe(true);
    expect(await c.events(`loop:${loop.id}`, { limit: 1 })).toEqual(byName.slice(0, 1));
    const run = await c.runNow('ev');
    const runEvents = await c.events(run.id);
    expect(runEvents[0]!.type).toBe('run.claimed');
    expect(runEvents.map((e) => e.version)).toEqual(runEvents.map((_, i) => i + 1));
    expect(runEvents.map((e) => e.type)).toContain('process.exited');
    await expect(c.events('nope')).rejects.toBeInstanceOf(NotFoundError);
    await expect(c.events('run:run_nope')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('logEvents: the whole log, filtered by types (with prefix.*), loop, stream, since and position', async () => {
    const { client: c } = client();
    const a = await c.create({ name: 'a', schedule: { type: 'manual' }, target });
    await c.create({ name: 'b', schedule: { type: 'manual' }, target });
    const run = await c.runNow('a');
    await c.pause('b');
    const all = await c.logEvents();
    expect(all.map((e) => e.position)).toEqual([...all.map((e) => e.position)].sort((x, y) => x - y));
    expect((await c.logEvents({ types: ['loop.created'] })).map((e) => e.streamId)).toEqual([`loop:${a.id}`, expect.stringMatching(/^loop:/)]);
    const ofA = await c.logEvents({ loop: 'a' });
    // The loop's own stream and its run's stream, nothing of b.
    expect(new Set(ofA.map((e) => e.streamId))).toEqual(new Set([`loop:${a.id}`, `run:${run.id}`]));
    expect((await c.logEvents({ types: ['run.*'] })).every((e) => e.type.startsWith('run.') && e.streamId === `run:${run.id}`)).toBe(true);
    expect((await c.logEvents({ stream: run.id })).map((e) => e.streamId)).toEqual((await c.events(run.id)).map(() => `run:${run.id}`));
    const middle = all[2]!.position;
    expect((await c.logEvents({ afterPosition: middle, limit: 2 })).map((e) => e.position)).toEqual(all.filter((e) => e.position > middle).slice(0, 2).map((e) => e.position));
    expect(await c.logEvents({ since: '2999-01-01T00:00:00Z' })).toEqual([]);
    await expect(c.logEvents({ loop: 'nope' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(c.logEvents({ since: 'yesterday-ish' })).rejects.toBeInstanceOf(UsageError);
  });

  it('events$ sees what a second process appends (through the built SDK), filtered, in log order', async () => {
    const { client: c, dataDir } = client();
    await c.create({ name: 'mine', schedule: { type: 'manual' }, target });
    const seen: StoredEvent[] = [];
    const loopEvents = firstValueFrom(
      c.events$({ types: ['loop.*'], pollMs: 20 }).pipe(
        where((e) => {
          seen.push(e);
          return e.type === 'loop.resumed';
        }),
        take(1),
      ),
    );
    const id = await secondProcess(dataDir, 'theirs');
    await loopEvents;
    // Only what was appended after subscribing (not 'mine'), only loop events, in order.
    expect(seen.map((e) => e.type)).toEqual(['loop.created', 'loop.paused', 'loop.resumed']);
    expect(seen.every((e) => e.streamId === `loop:${id}`)).toBe(true);
    expect(seen[1]!.data).toMatchObject({ reason: 'from the second process' });
    expect(seen[0]!.meta.runnerId).toBe('sdk-writer:2:w');
  }, 60_000);

  it('events$ with a loop filter, from a position: history first, then what comes; NotFoundError for an unknown loop', async () => {
    const { client: c } = client();
    await c.create({ name: 'x', schedule: { type: 'manual' }, target });
    await c.create({ name: 'y', schedule: { type: 'manual' }, target });
    const firstThree = firstValueFrom(c.events$({ loop: 'x', afterPosition: 0, pollMs: 10 }).pipe(take(3), toArray()));
    await c.pause('y');
    await c.pause('x');
    const run = await c.runNow('x');
    const events = await firstThree;
    expect(events.map((e) => e.type)).toEqual(['loop.created', 'loop.paused', 'run.claimed']);
    expect(events[2]!.streamId).toBe(`run:${run.id}`);
    await expect(firstValueFrom(c.events$({ loop: 'nope' }))).rejects.toBeInstanceOf(NotFoundError);
  });

  it('close() completes events$; a closed client refuses with UsageError', async () => {
    const { client: c } = client();
    await c.create({ name: 'z', schedule: { type: 'manual' }, target });
    const all = firstValueFrom(c.events$({ pollMs: 10 }).pipe(toArray()));
    await c.close();
    expect(await all).toEqual([]);
    await expect(c.list()).rejects.toBeInstanceOf(UsageError);
  });

  it('unsubscribing stops the polling: no timer is left, and no read happens after', async () => {
    const { client: c, dataDir } = client();
    await c.create({ name: 'p', schedule: { type: 'manual' }, target });
    const reader = await openReader(dataDir);
    onTestFinished(() => reader.close());
    let reads = 0;
    const counting = new Proxy(reader.db, {
      get(target, key, receiver) {
        if (key === 'prepare') reads += 1;
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    vi.useFakeTimers();
    const got: StoredEvent[] = [];
    const subscription = liveEvents(counting, {}, { pollMs: 100 }).subscribe((e) => got.push(e));
    await vi.advanceTimersByTimeAsync(0);
    await c.pause('p');
    await vi.advanceTimersByTimeAsync(100);
    expect(got.map((e) => e.type)).toEqual(['loop.paused']);
    expect(vi.getTimerCount()).toBe(1);
    subscription.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    const before = reads;
    await c.resume('p');
    await vi.advanceTimersByTimeAsync(1000);
    expect(reads).toBe(before);
    expect(got.map((e) => e.type)).toEqual(['loop.paused']);
  });
});
