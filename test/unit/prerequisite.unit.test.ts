/**
 * requirePrerequisite (test/helpers/prerequisite.ts): a missing prerequisite skips loudly locally
 * and fails under CI=true; a check that throws counts as missing.
 */
import { describe, expect, it, vi } from 'vitest';
import { MissingPrerequisiteError, requirePrerequisite, underCi } from '../helpers/prerequisite.js';

describe('requirePrerequisite', () => {
  it('present: true, nothing said', () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(requirePrerequisite('thing', () => true, {})).toBe(true);
      expect(requirePrerequisite('thing', () => true, { CI: 'true' })).toBe(true);
      expect(write).not.toHaveBeenCalled();
    } finally {
      write.mockRestore();
    }
  });

  it('missing locally: false, and one loud line on stderr naming it and why', () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(requirePrerequisite('a tmpfs mount', () => 'not root (uid 1000)', {})).toBe(false);
      expect(requirePrerequisite('setpriv', () => {
        throw new Error('spawn setpriv ENOENT');
      }, { CI: 'false' })).toBe(false);
      const said = write.mock.calls.map((c) => String(c[0])).join('');
      expect(said).toContain('SKIPPED: prerequisite missing: a tmpfs mount: not root (uid 1000) (under CI=true this fails)');
      expect(said).toContain('SKIPPED: prerequisite missing: setpriv: spawn setpriv ENOENT');
    } finally {
      write.mockRestore();
    }
  });

  it('missing under CI=true (or CI=1): throws, naming it and why', () => {
    expect(() => requirePrerequisite('a tmpfs mount', () => 'not root', { CI: 'true' })).toThrow(MissingPrerequisiteError);
    expect(() => requirePrerequisite('a tmpfs mount', () => 'not root', { CI: '1' })).toThrow(
      'prerequisite missing: a tmpfs mount: not root (CI=true: this is a failure; CI must provide it)',
    );
    expect(underCi({ CI: 'TRUE' })).toBe(true);
    expect(underCi({})).toBe(false);
  });
});
