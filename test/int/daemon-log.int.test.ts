/**
 * daemon.log kept to a size (src/runtime/daemon/log-file.ts), on real files and descriptors:
 *  - past the cap it is copied to .1 (older ones shifted to .2, .3) and truncated in place, so the
 *    descriptor the daemon's stdout is stays valid; no line is lost, none is split, none repeats;
 *  - a follower (`loops daemon logs -f`) reads every line once across rotations;
 *  - nothing rotates when stdout is not daemon.log, or was opened without O_APPEND;
 *  - sizes and the cap's sources (flag, environment, default).
 */
import { closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  DaemonLog,
  DaemonLogFollower,
  daemonLogMaxBytes,
  daemonLogTail,
  DEFAULT_DAEMON_LOG_MAX_BYTES,
  parseLogSize,
} from '../../src/runtime/daemon/log-file.js';
import { tempDir } from '../helpers/tmp.js';

function openLog(flags = 'a'): { path: string; fd: number; log: (cap: number) => DaemonLog } {
  const path = join(tempDir(), 'daemon.log');
  const fd = openSync(path, flags, 0o600);
  onTestFinished(() => closeSync(fd));
  return {
    path,
    fd,
    log: (cap) => new DaemonLog({ path, maxBytes: cap, fd, write: (text) => void writeSync(fd, text) }),
  };
}

const line = (i: number) => `2026-05-01T00:00:00.000Z line ${String(i).padStart(5, '0')} ${'x'.repeat(i % 37)}`;
const read = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8') : '');

describe('DaemonLog', () => {
  it('rotates past the cap by copy and truncate: 3 old files kept, each under the cap, every line whole and in order', () => {
    const { path, fd, log } = openLog();
    const daemonLog = log(2048);
    const written: string[] = [];
    for (let i = 0; i < 400; i++) {
      written.push(line(i));
      daemonLog.line(line(i));
    }
    expect(daemonLog.rotations).toBeGreaterThan(5);
    for (const f of [path, `${path}.1`, `${path}.2`, `${path}.3`]) expect(statSync(f).size).toBeLessThanOrEqual(2048);
    expect(existsSync(`${path}.4`)).toBe(false);
    expect(existsSync(`${path}.1.tmp`)).toBe(false);
    expect(statSync(`${path}.1`).mode & 0o777).toBe(0o600);
    // The files, oldest first, are the last lines written, contiguous.
    const kept = [`${path}.3`, `${path}.2`, `${path}.1`, path].map(read).join('').replace(/\n$/, '').split('\n');
    expect(kept).toEqual(written.slice(-kept.length));
    expect(kept.length).toBeGreaterThan(60);
    // The same descriptor still writes to daemon.log (not to .1): what stdout/stderr would write too.
    writeSync(fd, 'a crash trace\n');
    expect(read(path).endsWith('a crash trace\n')).toBe(true);
  });

  it('a follower reads every line once across rotations; the tail reads on into .1 after a rotation', () => {
    const { path, log } = openLog();
    const daemonLog = log(1024);
    for (let i = 0; i < 10; i++) daemonLog.line(line(i));
    const start = daemonLogTail(path, 3);
    expect(start.text).toBe(`${[7, 8, 9].map(line).join('\n')}\n`);
    const follower = new DaemonLogFollower(path, start.offset);
    let seen = '';
    const expected: string[] = [];
    for (let i = 10; i < 300; i++) {
      daemonLog.line(line(i));
      expected.push(line(i));
      // Polled every few lines: at most one rotation in between.
      if (i % 7 === 0) follower.poll((chunk) => (seen += chunk.toString('utf8')));
    }
    follower.poll((chunk) => (seen += chunk.toString('utf8')));
    expect(daemonLog.rotations).toBeGreaterThan(10);
    expect(seen).toBe(`${expected.join('\n')}\n`);
    // Right after a rotation the file holds a line or two: the tail takes the rest from .1.
    while (statSync(path).size > 0 || !existsSync(`${path}.1`)) daemonLog.rotateIfNeeded(10_000);
    daemonLog.line(line(300));
    expect(daemonLogTail(path, 5).text).toBe(`${[296, 297, 298, 299, 300].map(line).join('\n')}\n`);
  });

  it('does not rotate when stdout is another file, when the cap is 0, or (Linux) when stdout was not opened for appending', () => {
    const { path, log } = openLog();
    const other = join(tempDir(), 'elsewhere.log');
    const otherFd = openSync(other, 'a');
    onTestFinished(() => closeSync(otherFd));
    const notStdout = new DaemonLog({ path, maxBytes: 1024, fd: otherFd, write: (text) => void writeSync(otherFd, text) });
    for (let i = 0; i < 100; i++) notStdout.line(line(i));
    expect(notStdout.rotations).toBe(0);
    expect(existsSync(`${path}.1`)).toBe(false);

    const never = log(0);
    for (let i = 0; i < 100; i++) never.line(line(i));
    expect(never.rotations).toBe(0);
    expect(statSync(path).size).toBeGreaterThan(1024);

    if (process.platform === 'linux') {
      const truncating = openLog('w');
      const daemonLog = truncating.log(1024);
      for (let i = 0; i < 100; i++) daemonLog.line(line(i));
      expect(daemonLog.rotations).toBe(0);
      expect(read(truncating.path)).toMatch(/^\S+ daemon\.log: stdout was not opened for appending/);
    }
  });
});

describe('the cap', () => {
  it('parses sizes with binary units; 0 never rotates; under 1 KiB is refused', () => {
    expect(parseLogSize('10M', '--log-max-size')).toBe(10 * 1024 * 1024);
    expect(parseLogSize('10MiB', '--log-max-size')).toBe(10 * 1024 * 1024);
    expect(parseLogSize('512k', '--log-max-size')).toBe(512 * 1024);
    expect(parseLogSize('1.5G', '--log-max-size')).toBe(1.5 * 1024 ** 3);
    expect(parseLogSize('4096', '--log-max-size')).toBe(4096);
    expect(parseLogSize('0', '--log-max-size')).toBe(0);
    expect(() => parseLogSize('100', '--log-max-size')).toThrow(/under the 1 KiB minimum/);
    expect(() => parseLogSize('ten megs', '--log-max-size')).toThrow(/--log-max-size: "ten megs" is not a size/);
  });

  it('comes from --log-max-size, else LOOPS_DAEMON_LOG_MAX_BYTES, else 10 MiB', () => {
    expect(daemonLogMaxBytes(undefined, {})).toBe(DEFAULT_DAEMON_LOG_MAX_BYTES);
    expect(daemonLogMaxBytes(undefined, { LOOPS_DAEMON_LOG_MAX_BYTES: '4096' })).toBe(4096);
    expect(daemonLogMaxBytes('2M', { LOOPS_DAEMON_LOG_MAX_BYTES: '4096' })).toBe(2 * 1024 * 1024);
    expect(() => daemonLogMaxBytes(undefined, { LOOPS_DAEMON_LOG_MAX_BYTES: 'big' })).toThrow(/LOOPS_DAEMON_LOG_MAX_BYTES: "big" is not a size/);
  });
});
