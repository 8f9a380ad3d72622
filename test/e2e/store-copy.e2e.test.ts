/**
 * `loops store copy` through the built binary, as a user moves a host onto a fleet and back: a
 * data directory with history on its SQLite database is refused while its daemon runs, then
 * copied into a PostgreSQL schema with --switch (verified; no password shown or stored); its
 * commands then act on the fleet (list, runs, replay, projections verify, a new run); the fleet's
 * log is copied back into a SQLite file, restored into another data directory, and reads the same.
 * A non-empty destination and a bad URL are one clear line and exit 2.
 *
 * Each test uses a schema of its own, dropped at the end. The daemon is another process: it is
 * started and stopped by the binary (`daemon start` returns once it runs), never waited for by sleeping.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_PG_URL, PG_URL, dropSchemas, pgReachable, testSchemaName } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { useSandboxes } from './cli-helpers.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for loops store copy (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);
const sandbox = useSandboxes();
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

interface Report {
  ok: boolean;
  switched: boolean;
  events: number;
  streams: number;
  head: number;
  sha256: string;
  from: { kind: string; store: string };
  to: { kind: string; store: string };
  verified: { events: boolean; streams: boolean; projections: boolean };
}

interface Run {
  id: string;
  status: string;
}

describe.skipIf(!havePg)('loops store copy (the binary)', () => {
  it('moves a host onto PostgreSQL (--switch) and back into SQLite, verified, never showing the password', () => {
    const schema = testSchemaName();
    schemas.push(schema);
    const store = `${PG_URL}?schema=${schema}`;
    const withPassword = store.replace('postgres@', 'postgres:s3cret-pw@');
    const host = sandbox();
    expect(host.run(['create', 'command', 'hello', '--manual', '--cmd', 'echo hi']).code).toBe(0);
    expect(host.run(['create', 'command', 'broken', '--manual', '--cmd', 'exit 7']).code).toBe(0);
    expect(host.run(['run-now', 'hello']).code).toBe(0);
    expect(host.run(['run-now', 'broken']).code).toBe(3);
    const runsBefore = host.json(['runs']) as Run[];
    expect(runsBefore).toHaveLength(2);

    // Refused while the data directory's daemon runs.
    const started = host.run(['daemon', 'start']);
    expect(started.code, started.stderr).toBe(0);
    try {
      const refused = host.run(['store', 'copy', '--to', withPassword]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/^loops store copy: a daemon \(pid \d+\) is running on .*; loops daemon stop, copy, then loops daemon start/);
      expect(refused.stderr).not.toContain('s3cret-pw');
    } finally {
      expect(host.run(['daemon', 'stop']).code).toBe(0);
    }
    const events = host.eventCount();

    const copied = host.run(['store', 'copy', '--to', withPassword, '--switch', '--json']);
    expect(copied.code, copied.stderr).toBe(0);
    expect(copied.stdout + copied.stderr).not.toContain('s3cret-pw');
    const report = JSON.parse(copied.stdout) as Report;
    expect(report).toMatchObject({ ok: true, switched: true, events, from: { kind: 'sqlite' }, to: { kind: 'postgres', store } });
    expect(report.verified).toEqual({ events: true, streams: true, projections: true });
    expect(readFileSync(join(host.dataDir, 'store.json'), 'utf8')).not.toContain('s3cret-pw');
    expect(JSON.parse(readFileSync(join(host.dataDir, 'store.json'), 'utf8'))).toEqual({ store });

    // The data directory now acts on the fleet, with no LOOPS_STORE: the same loops and runs.
    expect((host.json(['list']) as Array<{ name: string }>).map((l) => l.name).sort()).toEqual(['broken', 'hello']);
    expect((host.json(['runs']) as Run[]).map((r) => [r.id, r.status])).toEqual(runsBefore.map((r) => [r.id, r.status]));
    const replayed = host.run(['replay', runsBefore[0]!.id]);
    expect(replayed.code, replayed.stderr).toBe(0);
    const verified = host.json(['projections', 'verify']) as { ok: boolean; postgres: { ok: boolean; events: number } };
    expect(verified).toMatchObject({ ok: true, postgres: { ok: true, events } });
    expect((host.json(['run-now', 'hello']) as Run).status).toBe('succeeded');
    // Its own SQLite log is kept as it was.
    expect(host.eventCount()).toBe(events);

    // Copying into it again: refused, it holds a log.
    const again = host.run(['store', 'copy', '--from', 'sqlite', '--to', withPassword]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already holds a log \(up to position \d+\); copy into a schema of its own/);
    expect(again.stderr).not.toContain('s3cret-pw');

    // And back: the fleet's log into a SQLite file (human output), restored into a new data directory.
    const file = join(sandbox().dataDir, 'fleet.db');
    const back = host.run(['store', 'copy', '--to', `sqlite:${file}`]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(new RegExp(`^Copied \\d+ event\\(s\\) of \\d+ stream\\(s\\) and \\d+ lease\\(s\\) from ${store.replace(/[?.]/g, '\\$&')} to ${file} in \\d+\\.\\d s`));
    expect(back.stdout).toMatch(/^ok {2}events: \d+ in the source, \d+ in the copy/m);
    expect(back.stdout).toMatch(/^ok {2}projections: \d+ table\(s\) compared/m);
    expect(back.stdout).toMatch(/^Next: to use it: LOOPS_DATA_DIR=<a new directory> loops restore /m);
    const other = sandbox();
    expect(other.run(['restore', file]).code).toBe(0);
    expect((other.json(['runs']) as Run[]).map((r) => r.status).sort()).toEqual(['failed', 'succeeded', 'succeeded']);
    expect(other.run(['replay', runsBefore[1]!.id]).code).toBe(0);
    expect(existsSync(join(other.dataDir, 'store.json'))).toBe(false);
  }, 60_000);

  it('a bad URL is one line and exit 2, the password hidden; --help documents the command', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'hello', '--manual', '--cmd', 'true']).code).toBe(0);
    const bad = s.run(['store', 'copy', '--to', 'postgres://postgres:hunter2@[nope/test']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loops: --to: not a valid URL: "postgres:\/\/postgres:\*\*\*@\[nope\/test"/);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).not.toContain('hunter2');
    const missing = s.run(['store', 'copy']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/missing --to <store>/);
    const help = s.run(['store', 'copy', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--switch/);
    expect(help.stdout).toMatch(/--from <store>/);
    expect(s.run(['--help']).stdout).toMatch(/store copy\s+copy the log into another store/);
  });
});
