/**
 * aicopilot — the predecessor's CLI with no public documentation, assumed claude-compatible: claude's
 * argv, permission flags and stream-json reader (./claude.ts), its own binary and variables.
 * docs/agents.md, "codewith and aicopilot — assumptions".
 */
import { CLAUDE_SHAPE, CLAUDE_TRANSCRIPT, claudeArgv, claudePermissionArgs } from './claude.js';
import { defineProvider } from './define.js';

export const aicopilot = defineProvider({
  info: {
    id: 'aicopilot',
    name: 'aicopilot (assumed claude-compatible)',
    binary: 'aicopilot',
    ...CLAUDE_SHAPE,
    writtenAgainst: 'no public documentation: assumed to take claude -p flags and print claude stream-json events',
    assumed: true,
    modelledOn: 'claude',
    authEnv: ['ANTHROPIC_API_KEY', 'AICOPILOT_API_KEY', 'AICOPILOT_CONFIG_DIR'],
    configDirEnv: 'AICOPILOT_CONFIG_DIR',
    isolationEnv: { AICOPILOT_CONFIG_DIR: '' },
    // Its flags are not public: no settings flag is assumed (the predecessor's was for another argv shape).
    settingsIsolationArgs: [],
  },
  permissionArgs: claudePermissionArgs,
  argv: claudeArgv,
  transcript: CLAUDE_TRANSCRIPT,
});
