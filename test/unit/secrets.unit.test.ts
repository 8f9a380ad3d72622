import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  SecretMasker,
  StreamMasker,
  isSecretName,
  maskDeep,
  secretForms,
  secretValues,
} from '../../src/runtime/execution/secrets.js';

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
const url = (s: string) => s.replace(/\+/g, '-').replace(/\//g, '_');
const unpad = (s: string) => s.replace(/=+$/, '');

/** Pushes `buf` through a StreamMasker in chunks cut at `splits` (sorted offsets). */
function streamed(masker: SecretMasker, buf: Buffer, splits: number[]): Buffer {
  const stream = new StreamMasker(masker);
  const out: Buffer[] = [];
  let at = 0;
  for (const s of [...splits, buf.length]) {
    out.push(stream.push(buf.subarray(at, s)));
    at = s;
  }
  out.push(stream.flush());
  return Buffer.concat(out);
}

describe('secretForms', () => {
  it('lists the raw value, base64 (std/url, padded/unpadded, 3 offsets), JSON and percent forms', () => {
    const secret = 'ab?>~~~'; // base64 YWI/Pn5+fg== : has '/', '+' and padding
    const forms = secretForms(secret);
    expect(forms).toContain(secret);
    expect(forms).toContain('YWI/Pn5+fg==');
    expect(forms).toContain('YWI/Pn5+fg');
    expect(forms).toContain('YWI_Pn5-fg==');
    expect(forms).toContain('YWI_Pn5-fg');
    expect(forms).toContain('ab%3F%3E~~~');
    expect(forms).toContain('ab%3F%3E%7E%7E%7E');
    // Longest first.
    for (let i = 1; i < forms.length; i++) expect(forms[i - 1]!.length).toBeGreaterThanOrEqual(forms[i]!.length);
    const tricky = secretForms('a"b\\c\nd é');
    expect(tricky).toContain('a\\"b\\\\c\\nd é');
    expect(tricky).toContain('a\\"b\\\\c\\nd \\u00e9');
    expect(tricky).toContain('a%22b%5Cc%0Ad%20%C3%A9');
    expect(tricky).toContain('a%22b%5Cc%0Ad+%C3%A9');
    expect(tricky).toContain('a%22b%5cc%0ad%20%c3%a9');
  });

  it('ignores values shorter than 4 characters (code points)', () => {
    expect(secretForms('')).toEqual([]);
    expect(secretForms('abc')).toEqual([]);
    expect(secretForms('🙂🙂🙂')).toEqual([]); // 3 characters, 6 UTF-16 units
    expect(secretForms('abcd')).toContain('abcd');
    const m = new SecretMasker(['abc', '', 'x', '🙂🙂🙂']);
    expect(m.empty).toBe(true);
    expect(m.mask('abc x 🙂🙂🙂')).toBe('abc x 🙂🙂🙂');
    const buf = Buffer.from('abc');
    expect(m.maskBuffer(buf)).toBe(buf);
  });
});

describe('SecretMasker: every form is masked', () => {
  const secret = 'ab?>~~~';
  const m = new SecretMasker([secret]);

  it('raw', () => {
    expect(m.mask(`token=${secret};`)).toBe('token=***;');
    expect(m.mask(`${secret}${secret}`)).toBe('******');
    expect(m.mask(secret)).toBe('***');
  });

  it('base64, standard and url-safe, padded and unpadded', () => {
    const std = b64(secret);
    expect(std).toMatch(/[+/].*=$/);
    for (const form of [std, unpad(std), url(std), unpad(url(std))]) {
      expect(m.mask(`x ${form} y`)).toBe('x *** y');
    }
  });

  it('embedded in longer base64 at each of the 3 offsets (any prefix/suffix)', () => {
    const secrets = ['ab?>~~~', 'sk-live-0123456789', 'pässwörd😀!'];
    for (const s of secrets) {
      const masker = new SecretMasker([s]);
      const n = Buffer.byteLength(s);
      for (let p = 0; p <= 5; p++) {
        for (let q = 0; q <= 5; q++) {
          const prefix = Buffer.from(Array.from({ length: p }, (_, i) => (i * 37 + 11) & 0xff));
          const suffix = Buffer.from(Array.from({ length: q }, (_, i) => (i * 53 + 200) & 0xff));
          for (const encode of [(b: Buffer) => b.toString('base64'), (b: Buffer) => b.toString('base64url')]) {
            const enc = encode(Buffer.concat([prefix, Buffer.from(s), suffix]));
            const out = masker.mask(`[${enc}]`).slice(1, -1);
            const at = out.indexOf('***');
            expect(at, `${s} p=${p} q=${q}: ${out}`).toBeGreaterThanOrEqual(0);
            const left = out.slice(0, at);
            const right = out.slice(at + 3);
            // What is left is the encoding's own start and end…
            expect(enc.startsWith(left)).toBe(true);
            expect(enc.endsWith(right)).toBe(true);
            // …and every character whose 6 bits are all the secret's is masked.
            const firstInside = Math.ceil((8 * p) / 6);
            const endInside = Math.floor((8 * (p + n)) / 6);
            expect(left.length).toBeLessThanOrEqual(firstInside);
            expect(enc.length - right.length).toBeGreaterThanOrEqual(endInside);
          }
        }
      }
    }
  });

  it('Basic auth header (user:secret in base64)', () => {
    const masker = new SecretMasker(['hunter2-xyz']);
    const header = `Authorization: Basic ${b64('alice:hunter2-xyz')}`;
    const out = masker.mask(header);
    expect(out).toContain('***');
    expect(out).not.toContain(b64('alice:hunter2-xyz'));
  });

  it('JSON-escaped, with quotes, backslashes, newlines and non-ASCII in the secret', () => {
    const s = 'p"w\\d\nline2\tx é';
    const masker = new SecretMasker([s]);
    expect(masker.mask(JSON.stringify({ k: s }))).toBe('{"k":"***"}');
    expect(masker.mask(JSON.stringify({ k: `pre ${s} post` }))).toBe('{"k":"pre *** post"}');
    // A JSON document inside a JSON string (an agent's tool result).
    expect(masker.mask(JSON.stringify({ outer: JSON.stringify({ k: s }) }))).toBe(
      JSON.stringify({ outer: '{"k":"***"}' }),
    );
    expect(masker.mask(JSON.stringify({ outer: JSON.stringify({ k: s }) }))).not.toContain('line2');
    // Python's json.dumps (ensure_ascii): non-ASCII as \uXXXX.
    const py = JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    expect(masker.mask(`{"k": ${py}}`)).toBe('{"k": "***"}');
    // And the raw form, printed as is.
    expect(masker.mask(`>${s}<`)).toBe('>***<');
  });

  it('percent-encoded, as the usual encoders write it', () => {
    const s = "p@ss w/rd+!*~'(é)";
    const masker = new SecretMasker([s]);
    expect(masker.mask(`https://h/?q=${encodeURIComponent(s)}&x=1`)).toBe('https://h/?q=***&x=1');
    expect(masker.mask(new URLSearchParams({ q: s, x: '1' }).toString())).toBe('q=***&x=1');
    const rfc3986 = encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    expect(masker.mask(`q=${rfc3986}`)).toBe('q=***');
    expect(masker.mask(`q=${rfc3986.replace(/%2F/g, '/')}`)).toBe('q=***'); // Python's quote()
    expect(masker.mask(`q=${encodeURIComponent(s).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())}`)).toBe('q=***');
  });

  it('uses the given mask', () => {
    const masker = new SecretMasker(['topsecret'], '[redacted]');
    expect(masker.mask('a topsecret b')).toBe('a [redacted] b');
    expect(masker.maskBuffer(Buffer.from('a topsecret b')).toString()).toBe('a [redacted] b');
  });
});

describe('SecretMasker: overlapping and nested secrets', () => {
  it('masks a secret that contains another whole, and the inner one alone', () => {
    const m = new SecretMasker(['word12', 'password1234']);
    expect(m.mask('a password1234 b word12 c')).toBe('a *** b *** c');
    const n = new SecretMasker(['password1234', 'word12']); // order of values does not matter
    expect(n.mask('a password1234 b word12 c')).toBe('a *** b *** c');
  });

  it('masks overlapping secrets as one run, leaving no part of either', () => {
    const m = new SecretMasker(['abcdef12', 'ef12ghij']);
    expect(m.mask('xx abcdef12ghij yy')).toBe('xx *** yy');
    expect(m.mask('xx ef12ghij abcdef12 yy')).toBe('xx *** *** yy');
    // A chain of overlapping occurrences of one secret.
    const a = new SecretMasker(['aaaa']);
    expect(a.mask(`x${'a'.repeat(50)}y`)).toBe('x***y');
    expect(a.mask('aaa')).toBe('aaa');
  });

  it('touching (not overlapping) occurrences give one mask each', () => {
    const m = new SecretMasker(['abcd1234', 'zzzz9999']);
    expect(m.mask('abcd1234zzzz9999')).toBe('******');
  });

  it('a secret whose base64 contains another secret', () => {
    const inner = 'c2VjcmV0';
    const m = new SecretMasker(['secret-value', inner]);
    expect(m.mask(`${b64('secret')} ${b64('secret-value')}`)).toBe('*** ***');
  });
});

/** The reference: every occurrence of every form, merged where they overlap, one mask per run. */
function naiveMask(text: string, values: string[], mask = '***'): string {
  const spans: [number, number][] = [];
  for (const form of new Set(values.flatMap(secretForms))) {
    for (let i = text.indexOf(form); i >= 0; i = text.indexOf(form, i + 1)) spans.push([i, i + form.length]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  let out = '';
  let last = 0;
  let cur: [number, number] | null = null;
  for (const [s, e] of spans) {
    if (cur && s < cur[1]) cur[1] = Math.max(cur[1], e);
    else {
      if (cur) {
        out += text.slice(last, cur[0]) + mask;
        last = cur[1];
      }
      cur = [s, e];
    }
  }
  if (cur) {
    out += text.slice(last, cur[0]) + mask;
    last = cur[1];
  }
  return out + text.slice(last);
}

describe('SecretMasker: against a naive reference', () => {
  it('property: several secrets over a small alphabet (many overlaps) mask as the reference does', () => {
    const small = fc.string({ unit: fc.constantFrom('a', 'b', 'c', '=', 'Y', 'W', 'J', 'i', '%'), maxLength: 80 });
    fc.assert(
      fc.property(small, fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c'), minLength: 4, maxLength: 7 }), { minLength: 1, maxLength: 4 }), (text, values) => {
        const m = new SecretMasker(values);
        const expected = naiveMask(text, values);
        expect(m.mask(text)).toBe(expected);
        expect(m.maskBuffer(Buffer.from(text)).toString()).toBe(expected);
      }),
      { numRuns: 1000 },
    );
  });

  it('hundreds of secrets (beyond the dense part of the automaton)', () => {
    const values = Array.from({ length: 400 }, (_, i) => `k${i.toString(36)}-${((i + 1) * 2654435761).toString(36)}/${i % 7}x`);
    const m = new SecretMasker(values);
    const text = values.map((v, i) => `${i} ${v} ${b64(v)} ${i % 3 ? v.slice(0, -1) : ''} ;`).join('\n');
    const out = m.mask(text);
    expect(out).toBe(naiveMask(text, values));
    for (const v of values) expect(out.includes(v)).toBe(false);
    expect(m.maskBuffer(Buffer.from(text)).toString()).toBe(out);
    expect(streamed(m, Buffer.from(text), [1000, 1001, 5000, 20000]).toString()).toBe(out);
  });
});

describe('SecretMasker.maskBuffer: bytes and UTF-8', () => {
  it('does not corrupt multi-byte characters around or inside the secret', () => {
    const s = 'clé-€-😀-secret';
    const m = new SecretMasker([s]);
    const text = `é€😀${s}😀€é and ${b64(s)}漢字`;
    const out = m.maskBuffer(Buffer.from(text));
    expect(out.toString()).toBe('é€😀***😀€é and ***漢字');
    expect(out.toString()).toBe(m.mask(text));
    expect(out.includes(Buffer.from(s))).toBe(false);
  });

  it('passes invalid UTF-8 through unchanged', () => {
    const m = new SecretMasker(['topsecret']);
    const buf = Buffer.concat([Buffer.from([0xff, 0xc3]), Buffer.from('topsecret'), Buffer.from([0x80, 0xe2, 0x82])]);
    const out = m.maskBuffer(buf);
    expect(out).toEqual(Buffer.concat([Buffer.from([0xff, 0xc3]), Buffer.from('***'), Buffer.from([0x80, 0xe2, 0x82])]));
  });

  it('returns the same buffer when nothing matched', () => {
    const m = new SecretMasker(['topsecret']);
    const buf = Buffer.from('nothing here');
    expect(m.maskBuffer(buf)).toBe(buf);
  });

  it('property: for valid text, masking bytes equals masking the string', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 60 }),
        fc.string({ unit: 'binary', minLength: 4, maxLength: 12 }),
        fc.nat(),
        (text, secret, at) => {
          const m = new SecretMasker([secret]);
          const i = at % (text.length + 1);
          const input = text.slice(0, i) + secret + text.slice(i);
          if (!Buffer.from(input).toString().includes(input)) return; // split surrogate pair
          expect(m.maskBuffer(Buffer.from(input)).toString()).toBe(m.mask(input));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('StreamMasker', () => {
  it('masks a secret split at every point, into two and three chunks', () => {
    const s = 'sk-ÄBC-123😀xyz';
    const m = new SecretMasker([s]);
    const buf = Buffer.from(`héllo ${s} wörld ${b64(s)} ${encodeURIComponent(s)} end`);
    const expected = m.maskBuffer(buf);
    expect(expected.toString()).toBe('héllo *** wörld *** *** end');
    for (let i = 0; i <= buf.length; i++) {
      expect(streamed(m, buf, [i]).equals(expected), `split at ${i}`).toBe(true);
    }
    for (let i = 0; i <= buf.length; i += 3) {
      for (let j = i; j <= buf.length; j++) {
        expect(streamed(m, buf, [i, j]).equals(expected), `split at ${i},${j}`).toBe(true);
      }
    }
    // One byte at a time.
    expect(streamed(m, buf, Array.from({ length: buf.length }, (_, k) => k)).toString()).toBe(expected.toString());
  });

  it('holds back less than the longest form', () => {
    const m = new SecretMasker(['topsecret-value']);
    const stream = new StreamMasker(m);
    const big = Buffer.alloc(1 << 20, 'x');
    const out = stream.push(big);
    expect(out.length).toBe(big.length - (m.maxFormBytes - 1));
    expect(stream.flush().length).toBe(m.maxFormBytes - 1);
  });

  it('a run of overlapping occurrences across many chunks gives one mask', () => {
    const m = new SecretMasker(['aaaa']);
    const buf = Buffer.from(`x${'a'.repeat(1000)}y`);
    expect(streamed(m, buf, Array.from({ length: buf.length }, (_, k) => k)).toString()).toBe('x***y');
    expect(streamed(m, buf, [3, 500, 998]).toString()).toBe('x***y');
  });

  it('passes chunks through when there are no secrets', () => {
    const stream = new StreamMasker(new SecretMasker([]));
    const chunk = Buffer.from('abc');
    expect(stream.push(chunk)).toBe(chunk);
    expect(stream.flush().length).toBe(0);
  });

  it('property: random text, secret form and chunking ⇒ stream equals one-shot, and no form is left', () => {
    const secretArb = fc
      .string({ unit: 'binary', minLength: 4, maxLength: 16 })
      .filter((s) => !s.includes('*') && !/\p{Cs}/u.test(s));
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 200 }),
        secretArb,
        fc.nat(),
        fc.nat({ max: 8 }),
        fc.uint8Array({ maxLength: 4 }),
        fc.uint8Array({ maxLength: 4 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (text, secret, at, how, pre, post, cuts) => {
          const both = Buffer.concat([Buffer.from(pre), Buffer.from(secret), Buffer.from(post)]);
          const embedded = [
            secret,
            b64(secret),
            url(unpad(b64(secret))),
            JSON.stringify(secret),
            encodeURIComponent(secret),
            new URLSearchParams({ q: secret }).toString(),
            both.toString('base64'),
            both.toString('base64url'),
            `${secret}${secret}`,
          ][how]!;
          const i = at % (text.length + 1);
          const buf = Buffer.from(text.slice(0, i) + embedded + text.slice(i));
          const m = new SecretMasker([secret]);
          const once = m.maskBuffer(buf);
          const splits = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
          const stream = streamed(m, buf, splits);
          expect(stream.equals(once)).toBe(true);
          for (const form of secretForms(secret)) expect(once.includes(Buffer.from(form))).toBe(false);
          expect(once.includes(Buffer.from('***'))).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('maskDeep', () => {
  it('masks strings in objects and arrays, recursively, keys untouched, without mutating', () => {
    const m = new SecretMasker(['topsecret']);
    const payload = {
      topsecret: 'value topsecret',
      list: ['a', 'topsecret', { deep: [b64('topsecret')] }],
      n: 42,
      ok: true,
      nothing: null,
      missing: undefined,
    };
    const copy = structuredClone(payload);
    const out = maskDeep(payload, m);
    expect(out).toEqual({
      topsecret: 'value ***',
      list: ['a', '***', { deep: ['***'] }],
      n: 42,
      ok: true,
      nothing: null,
      missing: undefined,
    });
    expect(payload).toEqual(copy);
    expect(maskDeep('topsecret!', m)).toBe('***!');
    expect(maskDeep(7, m)).toBe(7);
    expect(maskDeep(null, m)).toBe(null);
  });

  it('returns the value itself when there are no secrets', () => {
    const v = { a: 'x' };
    expect(maskDeep(v, new SecretMasker([]))).toBe(v);
  });
});

describe('isSecretName / secretValues', () => {
  it('recognises secret names by convention', () => {
    for (const name of [
      'OPENAI_API_KEY',
      'ANTHROPIC_API_KEY',
      'GEMINI_APIKEY',
      'GH_TOKEN',
      'GITHUB_TOKEN',
      'CLAUDE_CODE_OAUTH_TOKEN',
      'ANTHROPIC_AUTH_TOKEN',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_ACCESS_KEY_ID',
      'DB_PASSWORD',
      'MYSQL_PASSWD',
      'SSH_PRIVATE_KEY',
      'token',
      'Secret',
      'BASIC_AUTH',
      'AUTH',
      'API_KEY',
    ]) {
      expect(isSecretName(name), name).toBe(true);
    }
    for (const name of ['PATH', 'HOME', 'GIT_AUTHOR_NAME', 'TOKENIZERS_PARALLELISM', 'SECRETARY', 'MY_TOKENS', 'AUTHOR', 'CODEX_HOME']) {
      expect(isSecretName(name), name).toBe(false);
    }
    expect(isSecretName('CODEX_HOME', ['CODEX_HOME', 'CLAUDE_CONFIG_DIR'])).toBe(true);
    expect(isSecretName('claude_config_dir', ['CLAUDE_CONFIG_DIR'])).toBe(true);
  });

  it('collects the secret values of an environment', () => {
    const env = {
      PATH: '/usr/bin:/bin',
      OPENAI_API_KEY: 'sk-openai-123',
      GH_TOKEN: 'ghp_abc',
      SHORT_TOKEN: 'abc',
      EMPTY_SECRET: '',
      UNSET_PASSWORD: undefined,
      DISABLE_AUTH: 'true',
      DEPLOY_KEY: 'deploy-key-value',
      PADDED_SECRET: '  padded-value\n',
      DUP_TOKEN: 'sk-openai-123',
      FLAG: 'false',
    };
    expect(secretValues(env)).toEqual(['sk-openai-123', 'ghp_abc', '  padded-value\n', 'padded-value']);
    expect(secretValues(env, ['DEPLOY_KEY', 'FLAG'])).toEqual([
      'sk-openai-123',
      'ghp_abc',
      'deploy-key-value',
      '  padded-value\n',
      'padded-value',
      'false',
    ]);
  });
});

describe('performance', () => {
  it('masks 50 MB with 20 secrets quickly, and linearly', () => {
    const secrets = Array.from({ length: 20 }, (_, i) => `sk-${i}-${(i * 7919).toString(36)}-Zq/+token`);
    const m = new SecretMasker(secrets);
    const block = Array.from({ length: 2000 }, (_, i) => `line ${i} lorem ipsum dolor sit amet, é ${(i * 104729).toString(36)} sk-x\n`).join('');
    const make = (mb: number) => {
      const parts: string[] = [];
      let n = 0;
      for (let k = 0; n < mb * 1e6; k++) {
        parts.push(block);
        n += block.length;
        if (k % 5 === 0) {
          const s = secrets[k % secrets.length]!;
          parts.push(s, ' ', b64(s), '\n');
          n += 2 * s.length;
        }
      }
      return parts.join('');
    };
    const time = (text: string) => {
      let best = Infinity;
      let out = '';
      for (let r = 0; r < 2; r++) {
        const t = performance.now();
        out = m.mask(text);
        best = Math.min(best, performance.now() - t);
      }
      return { best, out };
    };
    const small = make(10);
    const large = make(50);
    const a = time(small);
    const b = time(large);
    for (const s of secrets) {
      expect(b.out.includes(s)).toBe(false);
      expect(b.out.includes(b64(s))).toBe(false);
    }
    expect(b.out.length).toBeLessThan(large.length);
    expect(b.best).toBeLessThan(10_000); // generous: typically well under a second
    expect(b.best / Math.max(a.best, 1)).toBeLessThan(8);

    const buf = Buffer.from(large);
    const t = performance.now();
    const masked = m.maskBuffer(buf);
    expect(performance.now() - t).toBeLessThan(10_000);
    expect(masked.toString()).toBe(b.out);
  }, 60_000);
});
