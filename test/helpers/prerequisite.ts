/**
 * Conditions a test cannot assume of the machine it runs on — root for a tmpfs mount, `setpriv` to
 * run a process as another uid — are checked, never guessed (issue 11, item 8). A missing one:
 *  - locally: the test is skipped, and says so loudly (one line on stderr naming the prerequisite
 *    and why it is missing), so a green run never hides a fault suite that did not run;
 *  - under `CI=true`: the test fails with that reason — CI must provide what the suite needs
 *    (.ci/run installs or starts it).
 *
 *   const tmpfs = requirePrerequisite('tmpfs mount (root)', canMountTmpfs);
 *   it.skipIf(!tmpfs)('disk full …', …)   // or: it('…', (ctx) => { if (!tmpfs) ctx.skip(); … })
 *
 * Call it at the top level of a test file (collection time): under CI it throws there, which fails
 * the file with the reason.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** True under CI (`CI=true` or `CI=1`): a missing prerequisite is then a failure, not a skip. */
export function underCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = (env.CI ?? '').toLowerCase();
  return ci === 'true' || ci === '1';
}

/** A prerequisite found missing: what it is and why. */
export class MissingPrerequisiteError extends Error {
  constructor(
    readonly prerequisite: string,
    readonly reason: string,
  ) {
    super(`prerequisite missing: ${prerequisite}: ${reason} (CI=true: this is a failure; CI must provide it)`);
    this.name = 'MissingPrerequisiteError';
  }
}

/**
 * Runs `check` (true, or a string saying why the prerequisite is missing; a throw counts as
 * missing too). Returns true when it is there. Missing: under CI, throws a
 * `MissingPrerequisiteError`; locally, writes one loud line to stderr and returns false.
 */
export function requirePrerequisite(name: string, check: () => true | string, env: NodeJS.ProcessEnv = process.env): boolean {
  let verdict: true | string;
  try {
    verdict = check();
  } catch (error) {
    verdict = (error as Error).message;
  }
  if (verdict === true) return true;
  if (underCi(env)) throw new MissingPrerequisiteError(name, verdict);
  process.stderr.write(`\n*** SKIPPED: prerequisite missing: ${name}: ${verdict} (under CI=true this fails) ***\n\n`);
  return false;
}

/** Root on Linux can mount a small tmpfs (checked by mounting and unmounting one). */
export function canMountTmpfs(): true | string {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return `not root (uid ${process.getuid?.()}): mount -t tmpfs needs root`;
  const dir = mkdtempSync(join(tmpdir(), 'loops-prereq-'));
  try {
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { encoding: 'utf8' });
    if (mount.status !== 0) return `mount -t tmpfs failed: ${(mount.stderr || mount.error?.message || `exit ${mount.status}`).trim()}`;
    spawnSync('umount', [dir]);
    return true;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `setpriv` runs a command as another uid (nobody, 65534): needs root and util-linux's setpriv. */
export function canSetpriv(uid = 65534): true | string {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return `not root (uid ${process.getuid?.()}): only root can start a process as uid ${uid}`;
  const r = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'id', '-u'], { encoding: 'utf8' });
  if (r.error) return `setpriv: ${r.error.message} (Debian: apt-get install util-linux)`;
  if (r.status !== 0 || r.stdout.trim() !== String(uid)) return `setpriv --reuid=${uid} … id -u: exit ${r.status}, ${JSON.stringify(r.stdout.trim() || r.stderr.trim())}`;
  return true;
}
