/**
 * `loops daemon install`: a systemd user unit (Linux) or a LaunchAgent (macOS) that runs
 * `loops daemon run` at login and restarts it on failure — with every path quoted for the
 * format it goes into.
 */
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface ServiceSpec {
  /** Absolute path of node. */
  node: string;
  /** Absolute path of the CLI entry (dist/cli/main.js). */
  main: string;
  dataDir: string;
  /** PATH the daemon's runs should see (the installing user's). */
  path: string;
  home?: string;
}

export interface ServiceFile {
  kind: 'systemd' | 'launchd';
  path: string;
  content: string;
  /** Commands that enable and start it. */
  enable: string[];
  warnings: string[];
}

/**
 * systemd: a word in double quotes with backslashes, quotes and specifiers (%) escaped; `$` too
 * in ExecStart, which expands variables (Environment= does not).
 */
export function systemdQuote(value: string, exec = false): string {
  let text = value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%');
  if (exec) text = text.replace(/\$/g, '$$$$');
  return `"${text}"`;
}

export function xmlEscape(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

export function systemdUnit(spec: ServiceSpec): ServiceFile {
  const home = spec.home ?? homedir();
  const content = [
    '[Unit]',
    'Description=loops scheduler daemon',
    'After=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${[spec.node, spec.main, 'daemon', 'run'].map((w) => systemdQuote(w, true)).join(' ')}`,
    `Environment=${systemdQuote(`LOOPS_DATA_DIR=${spec.dataDir}`)}`,
    `Environment=${systemdQuote(`PATH=${spec.path}`)}`,
    'Restart=on-failure',
    'RestartSec=5',
    '# SIGTERM to the daemon only: it cancels its runs (whole process groups) and records them.',
    'KillMode=mixed',
    'TimeoutStopSec=90',
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
  const warnings: string[] = [];
  const linger = lingering();
  if (linger === false) {
    warnings.push(
      'user lingering is off: the daemon stops when you log out and starts only when you log in. To keep it running: loginctl enable-linger "$USER"',
    );
  }
  return {
    kind: 'systemd',
    path: join(home, '.config', 'systemd', 'user', 'loops.service'),
    content,
    enable: ['systemctl --user daemon-reload', 'systemctl --user enable --now loops.service', 'systemctl --user status loops.service'],
    warnings,
  };
}

export function launchAgent(spec: ServiceSpec): ServiceFile {
  const home = spec.home ?? homedir();
  const path = join(home, 'Library', 'LaunchAgents', 'dev.loops.daemon.plist');
  const log = join(spec.dataDir, 'daemon.log');
  const string = (s: string) => `    <string>${xmlEscape(s)}</string>`;
  const content = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    '<dict>',
    '  <key>Label</key>',
    '  <string>dev.loops.daemon</string>',
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...[spec.node, spec.main, 'daemon', 'run'].map(string),
    '  </array>',
    '  <key>EnvironmentVariables</key>',
    '  <dict>',
    '    <key>LOOPS_DATA_DIR</key>',
    string(spec.dataDir),
    '    <key>PATH</key>',
    string(spec.path),
    '  </dict>',
    '  <key>RunAtLoad</key>',
    '  <true/>',
    '  <key>KeepAlive</key>',
    '  <dict><key>SuccessfulExit</key><false/></dict>',
    '  <key>StandardOutPath</key>',
    `  <string>${xmlEscape(log)}</string>`,
    '  <key>StandardErrorPath</key>',
    `  <string>${xmlEscape(log)}</string>`,
    '</dict>',
    '</plist>',
    '',
  ].join('\n');
  return {
    kind: 'launchd',
    path,
    content,
    enable: [`launchctl bootstrap gui/$(id -u) '${path.replace(/'/g, `'\\''`)}'`, 'launchctl print gui/$(id -u)/dev.loops.daemon'],
    warnings: [],
  };
}

/** True / false when loginctl answers, null when it cannot be asked (no systemd-logind). */
function lingering(): boolean | null {
  try {
    const user = process.env.USER ?? '';
    const out = execFileSync('loginctl', ['show-user', user, '-p', 'Linger'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return /Linger=yes/.test(out);
  } catch {
    return null;
  }
}
