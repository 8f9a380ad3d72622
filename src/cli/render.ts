/**
 * Rendering for people and for scripts. Tables are aligned; colour only on a TTY and never with
 * NO_COLOR or --json; times are relative ("in 14m", "3h ago") on a TTY, ISO when piped.
 */
export interface Output {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  err: NodeJS.WritableStream & { isTTY?: boolean };
  /** Epoch ms used for relative times. */
  now: number;
}

export function useColor(stream: { isTTY?: boolean }): boolean {
  if (process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '') return false;
  if (process.env.FORCE_COLOR !== undefined && process.env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true && process.env.TERM !== 'dumb';
}

const CODES = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1, dim: 2 } as const;
export type Color = keyof typeof CODES;

export function paint(enabled: boolean, color: Color, text: string): string {
  return enabled ? `\u001b[${CODES[color]}m${text}\u001b[0m` : text;
}

export function statusColor(status: string | null): Color {
  switch (status) {
    case 'succeeded':
    case 'active':
      return 'green';
    case 'failed':
    case 'timed_out':
    case 'abandoned':
      return 'red';
    case 'cancelled':
    case 'paused':
    case 'stopped':
      return 'yellow';
    case 'running':
    case 'spawning':
    case 'claimed':
      return 'cyan';
    default:
      return 'gray';
  }
}

const ANSI = /\u001b\[[0-9;]*m/g;
function width(text: string): number {
  return [...text.replace(ANSI, '')].length;
}

/** An aligned table; the last column is not padded. */
export function table(headers: string[], rows: string[][], color: boolean): string {
  const widths = headers.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ''))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - width(c))))
      .join('  ')
      .trimEnd();
  return [paint(color, 'bold', line(headers)), ...rows.map(line)].join('\n') + '\n';
}

export function relativeTime(iso: string | null, now: number): string {
  if (!iso) return '-';
  const diff = Date.parse(iso) - now;
  const abs = Math.abs(diff);
  let text: string;
  if (abs < 1000) return 'now';
  if (abs < 60_000) text = `${Math.round(abs / 1000)}s`;
  else if (abs < 3_600_000) text = `${Math.round(abs / 60_000)}m`;
  else if (abs < 86_400_000) text = `${Math.round(abs / 3_600_000)}h`;
  else text = `${Math.round(abs / 86_400_000)}d`;
  return diff > 0 ? `in ${text}` : `${text} ago`;
}

/** Relative on a TTY (people), ISO when piped (scripts, grep). */
export function when(iso: string | null, out: Output): string {
  if (!iso) return '-';
  return out.out.isTTY ? relativeTime(iso, out.now) : iso;
}

export function durationText(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  if (m < 60) return `${m}m${s ? `${s}s` : ''}`;
  return `${Math.floor(m / 60)}h${m % 60 ? `${m % 60}m` : ''}`;
}

export function printJson(out: Output, value: unknown): void {
  out.out.write(JSON.stringify(value, null, 2) + '\n');
}

export function truncate(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Tokens (in/out) and cost an agent CLI reported for a run, for tables: `12.3k/4.1k $0.0421`. */
export function agentUsage(agent: { tokens: { input: number | null; output: number | null }; costUsd: number | null } | null): string {
  if (!agent) return '-';
  const k = (n: number | null) => (n === null ? '?' : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
  const tokens = agent.tokens.input === null && agent.tokens.output === null ? '' : `${k(agent.tokens.input)}/${k(agent.tokens.output)}`;
  const cost = agent.costUsd === null ? '' : `$${agent.costUsd.toFixed(4)}`;
  return [tokens, cost].filter(Boolean).join(' ') || '-';
}
