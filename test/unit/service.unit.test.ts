import { describe, expect, it } from 'vitest';
import { launchAgent, systemdQuote, systemdUnit, xmlEscape } from '../../src/runtime/daemon/service.js';

const spec = {
  node: '/opt/node 20/bin/node',
  main: '/home/me/my "apps"/loops/dist/cli/main.js',
  dataDir: '/home/me/data 100%/$HOME',
  path: '/usr/bin:/bin',
  home: '/home/me',
};

describe('daemon service files', () => {
  it('systemd quoting: backslashes, quotes and % always; $ only where ExecStart would expand it', () => {
    expect(systemdQuote('a b')).toBe('"a b"');
    expect(systemdQuote('50%')).toBe('"50%%"');
    expect(systemdQuote('say "hi" \\o/')).toBe('"say \\"hi\\" \\\\o/"');
    expect(systemdQuote('$HOME')).toBe('"$HOME"');
    expect(systemdQuote('$HOME', true)).toBe('"$$HOME"');
  });

  it('the systemd unit runs loops daemon run with the data dir and PATH, restarting on failure', () => {
    const unit = systemdUnit(spec);
    expect(unit.path).toBe('/home/me/.config/systemd/user/loops.service');
    expect(unit.content).toContain('ExecStart="/opt/node 20/bin/node" "/home/me/my \\"apps\\"/loops/dist/cli/main.js" "daemon" "run"');
    expect(unit.content).toContain('Environment="LOOPS_DATA_DIR=/home/me/data 100%%/$HOME"');
    expect(unit.content).toContain('Environment="PATH=/usr/bin:/bin"');
    expect(unit.content).toMatch(/Restart=on-failure/);
    expect(unit.content).toMatch(/KillMode=mixed/);
    expect(unit.content).toMatch(/WantedBy=default.target/);
    expect(unit.enable).toContain('systemctl --user enable --now loops.service');
  });

  it('the LaunchAgent escapes XML and keeps the daemon alive after a failure', () => {
    expect(xmlEscape(`a&b<c>"d'`)).toBe('a&amp;b&lt;c&gt;&quot;d&apos;');
    const plist = launchAgent(spec);
    expect(plist.path).toBe('/home/me/Library/LaunchAgents/dev.loops.daemon.plist');
    expect(plist.content).toContain('<string>/home/me/my &quot;apps&quot;/loops/dist/cli/main.js</string>');
    expect(plist.content).toContain('<string>/home/me/data 100%/$HOME</string>');
    expect(plist.content).toMatch(/<key>KeepAlive<\/key>\s*<dict><key>SuccessfulExit<\/key><false\/><\/dict>/);
    expect(plist.enable[0]).toMatch(/^launchctl bootstrap gui\/\$\(id -u\) '\/home\/me\/Library\/LaunchAgents\/dev.loops.daemon.plist'$/);
  });
});
