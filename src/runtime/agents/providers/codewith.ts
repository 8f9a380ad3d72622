/**
 * codewith — the predecessor's CLI with no public documentation, assumed codex-compatible: codex's
 * argv, permission flags and `exec --json` reader (./codex.ts), its own binary and variables.
 * docs/agents.md, "codewith and aicopilot — assumptions".
 */
import { CODEX_SHAPE, CODEX_TRANSCRIPT, codexArgv, codexPermissionArgs } from './codex.js';
import { defineProvider } from './define.js';

export const codewith = defineProvider({
  info: {
    id: 'codewith',
    name: 'codewith (assumed codex-compatible)',
    binary: 'codewith',
    ...CODEX_SHAPE,
    writtenAgainst: 'no public documentation: assumed to take codex exec flags and print codex exec --json events',
    assumed: true,
    modelledOn: 'codex',
    authEnv: ['OPENAI_API_KEY', 'CODEWITH_API_KEY', 'CODEWITH_HOME'],
    configDirEnv: 'CODEWITH_HOME',
    isolationEnv: { CODEWITH_HOME: '' },
    // What the predecessor passed it in safe mode (its codex-like flag); nothing more is known.
    settingsIsolationArgs: ['--ignore-rules'],
  },
  permissionArgs: codexPermissionArgs,
  argv: codexArgv,
  transcript: CODEX_TRANSCRIPT,
});
