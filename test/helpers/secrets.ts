/**
 * The check every secrets test ends with: no file under a data directory (database, WAL, run
 * files, logs, archives) holds a secret value in raw, base64 or URL-encoded form.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every file under `dir`, recursively. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

/** The forms looked for: raw, base64 (standard and url-safe, padded or not), percent-encoded (encodeURIComponent and form encoding). */
export function leakForms(secret: string): string[] {
  const b64 = Buffer.from(secret).toString('base64');
  const url = b64.replace(/\+/g, '-').replace(/\//g, '_');
  return [...new Set([secret, b64, b64.replace(/=+$/, ''), url, url.replace(/=+$/, ''), encodeURIComponent(secret), new URLSearchParams({ s: secret }).toString().slice(2)])];
}

/** `file: form` for every file under `dir` holding a form of one of `secrets` (empty: none). */
export function secretHolders(dir: string, secrets: readonly string[]): string[] {
  const found: string[] = [];
  for (const file of filesUnder(dir)) {
    if (!statSync(file).isFile()) continue;
    const bytes = readFileSync(file);
    for (const secret of secrets) for (const form of leakForms(secret)) if (bytes.includes(form)) found.push(`${file}: ${form}`);
  }
  return found;
}
