/** Agent-CLI adapters (argv, prompt channel, environment) and their output parser. */
export * from './providers.js';
export * from './parse.js';
