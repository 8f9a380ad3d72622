/**
 * The library's surface is deliberate: the names src/index.ts exports (values; types vanish at run
 * time) equal the checked-in list test/unit/surface-names.json, and those of the SDK entry
 * (src/sdk.ts) equal its own list there. Changing the surface means changing the list in the
 * same commit.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as index from '../../src/index.js';
import * as sdk from '../../src/sdk.js';

const names = JSON.parse(readFileSync(new URL('./surface-names.json', import.meta.url), 'utf8')) as { index: string[]; sdk: string[]; client: string[] };

describe('the library surface', () => {
  it('src/index.ts exports exactly the checked-in names', () => {
    expect(Object.keys(index).sort()).toEqual([...names.index].sort());
  });

  it('src/sdk.ts exports exactly the checked-in names', () => {
    expect(Object.keys(sdk).sort()).toEqual([...names.sdk].sort());
  });

  it('LoopsClient has exactly the checked-in public methods', () => {
    const methods = Object.getOwnPropertyNames(sdk.LoopsClient.prototype).filter((m) => m !== 'constructor' && !PRIVATE.has(m));
    expect(methods.sort()).toEqual([...names.client].sort());
  });

  it('no internal helper leaks: nothing from src/cli, no SQL builders or process internals', () => {
    for (const name of ['sql', 'cached', 'writeTransaction', 'resolveCommand', 'main', 'processGroup', 'signalGroup', 'rowToEvent']) {
      expect(Object.keys(index), name).not.toContain(name);
    }
  });
});

/** TypeScript's `private` methods are on the prototype too: these are not part of the surface. */
const PRIVATE = new Set(['runtime', 'changeState', 'eventFilter', 'forkOrRerun']);
