/** Reading untrusted JSON from agent CLIs: each helper returns the value when it has the shape, else null. */

export type Json = Record<string, unknown>;

/** A plain object (not an array), or null. */
export function obj(value: unknown): Json | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : null;
}
/** A non-empty string, or null. */
export function str(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}
/** A finite, non-negative number, or null. */
export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}
export function bool(value: unknown): boolean | null {
  return typeof value === 'boolean' ? value : null;
}
