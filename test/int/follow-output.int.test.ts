/**
 * Following output on real files (src/runtime/queries/follow-output.ts, follow-file.ts), the
 * engine behind `loops logs -f` and `loops daemon logs -f`:
 *  - a run's output, followed from its claim: every line the files hold, once and in order,
 *    across the runner's rotation past the 16 MiB cap; the stream ends, and following ends, when
 *    the log says the run ended, with its status;
 *  - stopping (the signal) ends following while the run goes on;
 *  - one cursor, two writers: a run's output file rotated by the runner (OutputFile, `.1` written in
 *    place) and daemon.log rotated by the daemon (DaemonLog, a whole copy renamed to `.1`), each
 *    followed line by line across many rotations — from before the file exists too, and (daemon.log,
 *    which keeps .2 and .3) with several rotations between two polls;
 *  - a runner's rotation that drops bytes past its chase (by hand, step by step): .1 cut mid-line,
 *    then the file; and bytes the cursor read before they were dropped, not reported lost.
 */
import { appendFileSync, existsSync, fstatSync, ftruncateSync, readFileSync, statSync, writeFileSync, writeSync, closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DaemonLog } from '../../src/runtime/daemon/log-file.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { OutputFile, TailBuffer } from '../../src/runtime/execution/output.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { runDir } from '../../src/runtime/paths.js';
import { FileCursor } from '../../src/runtime/queries/follow-file.js';
import { followRunOutput, type FollowEvent } from '../../src/runtime/queries/follow-output.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const PAD = 'x'.repeat(40);
const numbered = (i: number) => `line ${String(i).padStart(7, '0')} ${PAD}`;

/** Collects a follow's events: the bytes per stream, and the others in order. */
async function collect(events: AsyncIterable<FollowEvent>, onOutput?: (text: string) => void) {
  const out = { stdout: '', stderr: '' };
  const others: FollowEvent[] = [];
  for await (const event of events) {
    if (event.type === 'output') {
      out[event.stream] += event.chunk.toString('utf8');
      onOutput?.(out.stdout);
    } else others.push(event);
  }
  return { ...out, events: others };
}

describe('followRunOutput', () => {
  it('follows a run from its claim across the rotation past the cap, every line once and in order, and ends with the run', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    // ~18.4 MB of numbered lines (the cap is 16 MiB), ~1 MB every 20 ms; then exit 3.
    const writer = join(dir, 'writer.mjs');
    writeFileSync(
      writer,
      `import { writeSync } from 'node:fs';
const block = (from, n) => { let t = ''; for (let i = from; i < from + n; i++) t += 'line ' + String(i).padStart(7, '0') + ' ${PAD}\\n'; return t; };
writeSync(2, 'starting\\n');
const next = (from) => {
  if (from >= 340000) { writeSync(1, '<END>\\n'); writeSync(2, 'done\\n'); process.exit(3); }
  writeSync(1, block(from, 20000));
  setTimeout(() => next(from + 20000), 20);
};
next(0);
`,
    );
    await createCommandLoop(runtime, { name: 'big', schedule: { manual: true, tz: 'UTC' }, command: `'${process.execPath}' '${writer}'` });
    let following: ReturnType<typeof collect> | null = null;
    const ran = runNow(runtime, 'big', {
      // Followed from the claim: before the process and its files exist.
      onClaimed: (id) => (following = collect(followRunOutput(runtime.db, runtime.dataDir, id, { pollMs: 50 }))),
    });
    const run = await ran;
    expect(run.status).toBe('failed');
    const followed = await following!;

    const file = join(runDir(runtime.dataDir, run.id), 'stdout.log');
    expect(existsSync(`${file}.1`)).toBe(true); // rotated
    expect(followed.stderr).toBe('starting\ndone\n');
    const lines = followed.stdout.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.at(-2)).toBe('<END>');
    const numbers = lines.slice(0, -2).map((l) => Number(l.slice(5, 12)));
    expect(numbers[0]).toBe(0);
    const disorder = numbers.findIndex((n, i) => i > 0 && n <= numbers[i - 1]!);
    expect(disorder, `line ${numbers[disorder]} given after line ${numbers[disorder - 1]}`).toBe(-1);
    // Every line the files hold was given (the runner's copytruncate window loses what is in no file).
    const given = new Set(numbers);
    const inFiles = [`${file}.1`, file]
      .flatMap((f) => readFileSync(f, 'utf8').split('\n'))
      .filter((l) => l.startsWith('line ') && l.length === 53)
      .map((l) => Number(l.slice(5, 12)));
    expect(inFiles.length).toBeGreaterThan(300_000);
    expect(inFiles.filter((n) => !given.has(n)).slice(0, 20)).toEqual([]);

    // Its events: the unit, then caught up, both streams closed, and done with the run's status.
    const types = followed.events.map((e) => e.type).filter((t) => t !== 'idle' && t !== 'settled');
    expect(types[0]).toBe('unit');
    expect(types[1]).toBe('caught-up');
    expect(types).not.toContain('lost');
    expect(types.slice(-3)).toEqual(['closed', 'closed', 'done']);
    const done = followed.events.at(-1) as Extract<FollowEvent, { type: 'done' }>;
    expect(done.aborted).toBe(false);
    expect(done.view).toMatchObject({ ended: true, status: 'failed', what: `run ${run.id}` });
  });

  it('stops when its signal is aborted, the run going on; --tail-like `tail` gives the last lines at the start', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const go = join(dir, 'go');
    await createCommandLoop(runtime, {
      name: 'slow',
      schedule: { manual: true, tz: 'UTC' },
      command: `echo one; echo two; echo three; while [ ! -e '${go}' ]; do sleep 0.02; done; echo four`,
    });
    // The run ends once `go` exists: made at the end, or when the test ends (a failed assertion too).
    onTestFinished(() => writeFileSync(go, ''));
    // Recorded running (its process recorded), not only writing: a child can write before its
    // runner records it spawned.
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    let claimed: string | null = null;
    const ran = runNow(runtime, 'slow', { onClaimed: (id) => (claimed = id) });
    await spawned;
    const file = () => (claimed ? join(runDir(runtime.dataDir, claimed), 'stdout.log') : '');
    const deadline = Date.now() + 10_000;
    while (!(claimed && existsSync(file()) && statSync(file()).size >= 14)) {
      if (Date.now() > deadline) throw new Error('no output from the run');
      await new Promise((r) => setTimeout(r, 20));
    }
    const abort = new AbortController();
    const followed = await collect(followRunOutput(runtime.db, runtime.dataDir, 'slow', { streams: ['stdout'], tail: 2, signal: abort.signal, pollMs: 20 }), (text) => {
      if (text.includes('three\n')) abort.abort();
    });
    expect(followed.stdout).toBe('two\nthree\n');
    const done = followed.events.at(-1) as Extract<FollowEvent, { type: 'done' }>;
    expect(done).toMatchObject({ type: 'done', aborted: true, view: { ended: false, status: 'running' } });
    writeFileSync(go, '');
    expect((await ran).status).toBe('succeeded');
  });
});

describe('FileCursor: one follower for both writers', () => {
  function poller(cursor: FileCursor) {
    let seen = '';
    let lost = 0;
    return {
      poll: () => {
        if (cursor.poll((chunk) => (seen += chunk.toString('utf8'))) === 'lost') lost++;
      },
      get seen() {
        return seen;
      },
      get lost() {
        return lost;
      },
    };
  }

  it("a run's output file, rotated by the runner (the last cap bytes rewritten into .1, then truncated): every line once", () => {
    const path = join(tempDir(), 'stdout.log');
    const output = new OutputFile(path, 64 * 1024, new TailBuffer(1024));
    onTestFinished(() => output.close());
    const expected: string[] = [];
    for (let i = 0; i < 100; i++) {
      writeSync(output.writeFd, `${numbered(i)}\n`);
      expected.push(numbered(i));
    }
    output.drain();
    const cursor = new FileCursor(path);
    onTestFinished(() => cursor.close());
    cursor.open();
    let seen = readFileSync(path, 'utf8').slice(0, cursor.take()!.size);
    const follow = poller(cursor);
    for (let i = 100; i < 20_000; i++) {
      writeSync(output.writeFd, `${numbered(i)}\n`);
      expected.push(numbered(i));
      if (i % 13 === 0) output.drain(); // the runner reads (and rotates past the cap)
      if (i % 29 === 0) follow.poll();
    }
    output.drain();
    follow.poll();
    seen += follow.seen;
    expect(existsSync(`${path}.1`)).toBe(true);
    expect(statSync(path).size).toBeLessThan(64 * 1024); // rotated many times
    expect(follow.lost).toBe(0);
    expect(seen).toBe(`${expected.join('\n')}\n`);
  });

  /**
   * The runner's rotation (output.ts), by hand and in two steps: `.1` rewritten in place with the
   * last `cap` bytes it read; then `finish`: what the process appended since, up to `chase` bytes
   * (its bound, `ROTATE_CHASE` of the cap), added to `.1`, and the file truncated — what the process
   * wrote past the bound is in no file.
   */
  function rotateByHand(path: string, fd: number, cap: number) {
    const read = fstatSync(fd).size;
    writeFileSync(`${path}.1`, readFileSync(path).subarray(read - cap, read));
    return {
      finish: (chase: number) => {
        appendFileSync(`${path}.1`, readFileSync(path).subarray(read, read + chase));
        ftruncateSync(fd, 0);
      },
    };
  }

  /** A writer of blocks of 100 numbered lines (5,400 bytes), as a process writes a burst. */
  function blocks(fd: number) {
    let next = 0;
    const text: string[] = [];
    return {
      write: () => {
        const block = Array.from({ length: 100 }, (_, i) => `${numbered(next + i)}\n`).join('');
        next += 100;
        writeSync(fd, block);
        text.push(block);
      },
      get text() {
        return text.join('');
      },
    };
  }

  /** The numbered lines a text holds whole, wherever they start. */
  const wholeLines = (text: string) => [...text.matchAll(/line (\d{7}) x{40}\n/g)].map((m) => Number(m[1]));

  it("a run's output file whose rotation drops bytes mid-line (the runner's chase stops at its bound): .1's cut line, then the file's first line right after it — every line the files hold, nothing reported lost", () => {
    const path = join(tempDir(), 'stdout.log');
    const fd = openSync(path, 'a+', 0o600);
    onTestFinished(() => closeSync(fd));
    const cap = 64 * 1024;
    const chase = cap / 16;
    const writer = blocks(fd);
    const follow = poller(new FileCursor(path));
    while (fstatSync(fd).size <= cap) writer.write();
    follow.poll();
    const read = fstatSync(fd).size;
    const rotation = rotateByHand(path, fd, cap);
    // While the runner copies, the process writes more than the chase takes: the chase stops mid-line.
    writer.write();
    writer.write();
    rotation.finish(chase);
    writer.write();
    follow.poll();
    follow.poll();

    expect(follow.lost).toBe(0);
    const one = readFileSync(`${path}.1`, 'utf8');
    const now = readFileSync(path, 'utf8');
    expect(one.endsWith('\n')).toBe(false); // cut mid-line: what followed it is in no file
    // All it read before, what .1 holds after that, then the file: the file's first line follows the
    // cut line on the same line (no newline between them), as `loops logs` prints the files too.
    expect(follow.seen).toBe(writer.text.slice(0, read + chase) + now);
    expect(follow.seen).toContain(`${one.slice(one.lastIndexOf('\n') + 1)}${now.slice(0, now.indexOf('\n') + 1)}`);
    const given = new Set(wholeLines(follow.seen));
    const inFiles = [...wholeLines(one), ...wholeLines(now)];
    expect(inFiles.filter((n) => !given.has(n))).toEqual([]);
    // A reader that splits the output on newlines does not find the file's first line at a line's start.
    const starts = new Set(follow.seen.split('\n').map((l) => Number(l.slice(5, 12))));
    expect(starts.has(wholeLines(now)[0]!)).toBe(false);
  });

  it("a run's output file whose rotation drops bytes the cursor had read already (read past the end of .1 by more than 4 KiB before the truncation): nothing is missing, nothing reported lost", () => {
    const path = join(tempDir(), 'stdout.log');
    const fd = openSync(path, 'a+', 0o600);
    onTestFinished(() => closeSync(fd));
    const cap = 64 * 1024;
    const chase = cap / 16;
    const writer = blocks(fd);
    const follow = poller(new FileCursor(path));
    while (fstatSync(fd).size <= cap) writer.write();
    follow.poll();
    const rotation = rotateByHand(path, fd, cap);
    writer.write();
    writer.write();
    // The cursor looks while the runner copies: .1 changed, the file not truncated yet — it reads on,
    // past what the chase will take (by 2 × 5,400 − 4,096 bytes).
    follow.poll();
    rotation.finish(chase);
    writer.write();
    follow.poll();
    follow.poll();

    expect(follow.lost).toBe(0);
    // Every byte written was read: those dropped by the rotation too, before it dropped them.
    expect(follow.seen).toBe(writer.text);
  });

  it('daemon.log, rotated by the daemon (a whole copy renamed to .1): every line once, from a tail offset, from before the file exists, and with several rotations between two polls', () => {
    const path = join(tempDir(), 'daemon.log');
    // Followed from before the file exists: nothing read yet when the first rotation comes.
    const early = poller(new FileCursor(path, { from: 0, wholeRotations: true }));
    const later = poller(new FileCursor(path, { from: 0, wholeRotations: true })); // first read after two rotations
    const fd = openSync(path, 'a', 0o600);
    onTestFinished(() => closeSync(fd));
    const log = new DaemonLog({ path, maxBytes: 1024, fd, write: (text) => void writeSync(fd, text) });
    const expected: string[] = [];
    const line = (i: number) => `2026-05-01T00:00:00.000Z line ${String(i).padStart(5, '0')} ${'x'.repeat(i % 37)}`;
    for (let i = 0; i < 30; i++) {
      log.line(line(i));
      expected.push(line(i));
    }
    expect(log.rotations).toBe(1);
    early.poll(); // first read: after a rotation
    for (let i = 30; log.rotations < 2; i++) {
      log.line(line(i));
      expected.push(line(i));
    }
    later.poll();
    // `daemon logs -f`: the tail printed, then the cursor from the bytes of daemon.log read.
    const tailed = expected.length;
    const printed = statSync(path).size;
    const late = poller(new FileCursor(path, { from: printed, wholeRotations: true }));
    // Polled rarely: two or three rotations in between (the daemon keeps .1, .2 and .3).
    const rare = poller(new FileCursor(path, { from: printed, wholeRotations: true }));
    for (let i = expected.length; i < 400; i++) {
      log.line(line(i));
      expected.push(line(i));
      // Polled every few lines: at most one rotation in between.
      if (i % 7 === 0) {
        early.poll();
        later.poll();
        late.poll();
      }
      if (i % 40 === 0) rare.poll();
    }
    early.poll();
    later.poll();
    late.poll();
    rare.poll();
    expect(log.rotations).toBeGreaterThan(10);
    expect(early.lost + later.lost + late.lost + rare.lost).toBe(0);
    expect(early.seen).toBe(`${expected.join('\n')}\n`);
    expect(later.seen).toBe(early.seen);
    expect(late.seen).toBe(`${expected.slice(tailed).join('\n')}\n`);
    expect(rare.seen).toBe(late.seen);
  });
});
