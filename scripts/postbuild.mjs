// Marks the CLI entries (loops, loops-daemon) executable after tsc (tsc does not keep modes).
import { chmodSync, existsSync } from 'node:fs';
for (const name of ['main.js', 'daemon-main.js']) {
  const bin = new URL(`../dist/cli/${name}`, import.meta.url);
  if (existsSync(bin)) chmodSync(bin, 0o755);
}
