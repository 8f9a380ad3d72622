/** Durations are pure; they live in src/events so specs and catalog can use them. */
export { formatDuration, parseDuration } from '../events/durations.js';
