/**
 * The end of a run's output survives a rotation that a runner held up (starved of CPU) meets late
 * (src/runtime/execution/output.ts): the runner reads past the cap, and before its rotation copies
 * the last cap bytes into `.1`, the process writes its last lines — more than the rotation's chase
 * takes (`ROTATE_CHASE` of the cap) — and ends. Those last lines must still be in the tail the run
 * records (`process.exited`'s stdout) and in the run's files (`.1`, then the file), in order and
 * without a gap; `.head` holds the start.
 *
 * Deterministic, without sleeps: the runner is held at that moment from its live-output callback
 * (called synchronously from the runner's read, on the runner's thread — as a runner starved of CPU
 * would be held there), which tells the process to write the rest and waits until it has.
 */
import { existsSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../src/runtime/clock.js';
import { spawnProcess, type SpawnSpec } from '../../src/runtime/execution/executor.js';
import { OutputFile, ROTATE_CHASE, TailBuffer } from '../../src/runtime/execution/output.js';
import { fixture } from '../helpers/fixtures.js';
import { killGroupIfAlive } from '../helpers/proc.js';
import { tempDir } from '../helpers/tmp.js';

/** The fixture's line i (test/fixtures/numbered-lines.mjs): 13 bytes. */
const line = (i: number) => `line ${String(i).padStart(7, '0')}\n`;
const LINE_BYTES = 13;
const lines = (from: number, count: number) => Array.from({ length: count }, (_, k) => line(from + k)).join('');

/** The numbers of the whole lines in `text` (a first line cut by a tail, and a last line cut short, left out). */
function numbersIn(text: string): number[] {
  const parts = text.split('\n');
  parts.pop(); // '' after a whole last line, or a line cut short
  if (parts.length && !/^line \d{7}$/.test(parts[0]!)) parts.shift(); // cut by the tail's start
  return parts.map((p) => (/^line \d{7}$/.test(p) ? Number(p.slice(5)) : Number.NaN));
}

/** `text` holds whole numbered lines, consecutive, ending with line `last`, and at least the last `atLeast`. */
function expectEndKept(text: string, last: number, atLeast: number, what: string) {
  const ending = lines(last - 2, 3);
  expect.soft(JSON.stringify(text.slice(-ending.length)), `${what}: how it ends`).toBe(JSON.stringify(ending));
  const numbers = numbersIn(text);
  expect.soft(numbers.at(-1), `${what}: its last whole line`).toBe(last);
  expect.soft(numbers.length, `${what}: how many of the last lines`).toBeGreaterThanOrEqual(atLeast);
  const gaps = numbers.filter((n, k) => k > 0 && n !== numbers[k - 1]! + 1);
  expect.soft(gaps, `${what}: lines missing before`).toEqual([]);
}

/** Blocks this thread until `file` exists (a child process writes it): bounded polling of OS state. */
function blockUntilExists(file: string, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  const cell = new Int32Array(new SharedArrayBuffer(4));
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${file}`);
    Atomics.wait(cell, 0, 0, 2);
  }
}

describe('a rotation met late keeps the end of the output', () => {
  it('a real process writes its last lines (more than the chase) while the runner is held between its read past the cap and the rotation: they are in the recorded tail and the files, in order; .head holds the start', async () => {
    const dir = tempDir();
    const stdoutFile = join(dir, 'stdout.log');
    const done = join(dir, 'done');
    const cap = 64 * 1024;
    const first = 6000; // 78 000 bytes: past the cap
    const then = 2000; // 26 000 bytes: far more than the chase takes (cap × ROTATE_CHASE = 4 KiB)
    expect(then * LINE_BYTES).toBeGreaterThan(cap * ROTATE_CHASE * 4);
    const total = first + then;

    let pid = 0;
    let read = 0;
    let held = 0;
    const spec: SpawnSpec = {
      command: fixture('numbered-lines.mjs'),
      args: [String(first), String(then), done],
      shell: false,
      cwd: null,
      env: {},
      deadline: null,
      killGraceMs: 1000,
      stdoutFile,
      stderrFile: join(dir, 'stderr.log'),
      fileCapBytes: cap,
      onOutput: (stream, chunk) => {
        if (stream !== 'stdout') return;
        read += chunk.length;
        // The read that takes the runner past the cap: its rotation comes next, in this same
        // drain. Held here, the runner is the starved one; the process writes the rest and ends.
        if (read > cap && held === 0) {
          held++;
          expect(pid).toBeGreaterThan(0);
          process.kill(pid, 'SIGUSR1');
          blockUntilExists(done, 10_000);
        }
      },
    };
    const handle = await spawnProcess(spec, systemClock);
    onTestFinished(() => killGroupIfAlive(handle.pgid));
    pid = handle.pid;
    const exit = await handle.exited;

    expect(exit.exitCode).toBe(0);
    expect(held).toBe(1); // the runner was held before its first rotation
    expect(existsSync(`${stdoutFile}.1`)).toBe(true); // and it rotated
    // Every byte the process wrote is counted (none dropped).
    expect.soft(exit.stdoutBytes).toBe(total * LINE_BYTES);
    // The recorded tail (process.exited's stdout) ends with the process's last lines, in order.
    expectEndKept(exit.stdout, total, then, 'the recorded tail');
    // So do the run's files as `loops logs` reads them: .1, then the file.
    const kept = readFileSync(`${stdoutFile}.1`, 'utf8') + readFileSync(stdoutFile, 'utf8');
    expectEndKept(kept, total, then, '.1 + the file');
    // The start is in .head: the first lines, whole.
    const head = readFileSync(`${stdoutFile}.head`, 'utf8');
    expect(head.startsWith(line(1))).toBe(true);
    expect(head).toBe(lines(1, head.length / LINE_BYTES));
  });

  it('the same in process (OutputFile), followed live or not: the last lines written between the read past the cap and the rotation are kept', () => {
    for (const live of [true, false]) {
      const what = live ? 'live' : 'not live';
      const path = join(tempDir(), 'out.log');
      const cap = 64 * 1024;
      const first = 6000; // past the cap
      const then = 2000; // more than the chase takes
      let f: OutputFile | null = null;
      let held = 0;
      // The runner is held right after the read that takes it past the cap (its rotation comes
      // next), and the process writes its last lines then. Live: from the live-output callback; not
      // live (nothing is called back), from the tail it keeps, which every read goes through.
      const hold = () => {
        if (f!.total > cap && held === 0) {
          held++;
          writeSync(f!.writeFd, lines(first + 1, then));
        }
      };
      class HeldTail extends TailBuffer {
        override push(chunk: Buffer): void {
          super.push(chunk);
          if (!live && f) hold();
        }
      }
      f = new OutputFile(path, cap, new HeldTail(64 * 1024), live ? () => hold() : null);
      writeSync(f.writeFd, lines(1, first));
      f.drain();
      expect(held, what).toBe(1);
      expect(existsSync(`${path}.1`), what).toBe(true);
      f.close();
      expect(f.total, what).toBe((first + then) * LINE_BYTES);
      expectEndKept(f.tail.toString(), first + then, then, `${what}: the tail`);
      expectEndKept(readFileSync(`${path}.1`, 'utf8') + readFileSync(path, 'utf8'), first + then, then, `${what}: .1 + the file`);
      expect(readFileSync(`${path}.head`, 'utf8').startsWith(line(1)), what).toBe(true);
    }
  });

  it('a process that outruns the rotation twice in a row (it writes more than the chase while .1 is copied, twice) and then ends: the end is kept, and .1 stays within its bound', () => {
    const path = join(tempDir(), 'out.log');
    const cap = 64 * 1024;
    const batch = 2000; // lines: 26 000 bytes, more than the chase takes
    let f: OutputFile | null = null;
    let last = 6000;
    let batches = 0;
    // Each read past the cap — the one that leads to the rotation, then the chase of each pass and
    // the read on after it — sees the process write another batch, four in all: it outruns the
    // first pass and the second, and ends while the second is under way.
    f = new OutputFile(path, cap, new TailBuffer(64 * 1024), () => {
      if (f!.total > cap && batches < 4) {
        batches++;
        writeSync(f!.writeFd, lines(last + 1, batch));
        last += batch;
      }
    });
    writeSync(f.writeFd, lines(1, last));
    f.drain();
    expect(batches).toBe(4);
    expect(statSync(`${path}.1`).size).toBeLessThanOrEqual(cap * (1 + ROTATE_CHASE));
    f.close();
    expect(f.total).toBe(last * LINE_BYTES);
    expectEndKept(f.tail.toString(), last, batch, 'the tail');
    expectEndKept(readFileSync(`${path}.1`, 'utf8') + readFileSync(path, 'utf8'), last, batch, '.1 + the file');
  });
});
