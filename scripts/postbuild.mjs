// Marks the CLI entry executable after tsc (tsc does not keep modes).
import { chmodSync, existsSync } from 'node:fs';
const bin = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(bin)) chmodSync(bin, 0o755);
