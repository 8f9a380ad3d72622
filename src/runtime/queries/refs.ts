/**
 * What a user typed to name a loop, run or workflow: the LIKE pattern of an id prefix, and how the
 * text is quoted back in an error. One place, so a 100,000-character argument is an ordinary "not
 * found" (exit 2) everywhere rather than SQLite's "LIKE or GLOB pattern too complex".
 */

/** Longer than any id (a prefix and 22 characters) or name (64) loops makes: matches nothing. */
export const MAX_REF_LENGTH = 200;

/** The `LIKE … ESCAPE '\'` pattern of an id prefix, or null when `text` cannot be one (under 4 characters, or longer than any id). */
export function prefixPattern(text: string): string | null {
  if (text.length < 4 || text.length > MAX_REF_LENGTH) return null;
  return `${escapeLike(text)}%`;
}

/** `%text%` for a LIKE … ESCAPE '\' search (names that contain it). */
export function containsPattern(text: string): string {
  return `%${escapeLike(text)}%`;
}

/** The text quoted for an error message: whole when short, else its start and its length. */
export function shownRef(text: string): string {
  return text.length <= 80 ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, 40))}… (${text.length} characters)`;
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
