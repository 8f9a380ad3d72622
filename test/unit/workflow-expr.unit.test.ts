import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ValidationError } from '../../src/events/errors.js';
import {
  EXPR_MAX_DEPTH,
  EXPR_MAX_LENGTH,
  conditionReferences,
  evaluateCondition,
  formatExprValue,
  hasStatusFunction,
  hasTemplate,
  parseCondition,
  parseTemplate,
  renderTemplate,
  templateReferences,
  type ConditionContext,
  type Expr,
  type StepView,
} from '../../src/workflow/expr.js';

function ctx(over: Partial<ConditionContext> = {}): ConditionContext {
  return { success: true, failure: false, cancelled: false, steps: {}, inputs: {}, ...over };
}

function step(status: string, exitCode: number | null = null, outputs: Record<string, string> = {}): StepView {
  return { status, exitCode, outputs };
}

/** Evaluates with success() true, so implicit success() does not mask the value. */
function ev(source: string, over: Partial<ConditionContext> = {}): boolean {
  return evaluateCondition(parseCondition(source), ctx(over));
}

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const lit = (value: string | number | boolean | null): Expr => ({ kind: 'literal', value });

describe('parseCondition: literals and references', () => {
  it('parses strings with both quotes and escapes', () => {
    expect(parseCondition(`'it\\'s'`)).toEqual(lit("it's"));
    expect(parseCondition(`"a \\"b\\" \\\\ \\n\\t"`)).toEqual(lit('a "b" \\ \n\t'));
    expect(parseCondition(`"it's"`)).toEqual(lit("it's"));
    expect(parseCondition(`''`)).toEqual(lit(''));
  });

  it('parses integers, decimals and negative numbers', () => {
    expect(parseCondition('42')).toEqual(lit(42));
    expect(parseCondition('2.5')).toEqual(lit(2.5));
    expect(parseCondition('-1')).toEqual(lit(-1));
    expect(parseCondition('-0.25')).toEqual(lit(-0.25));
  });

  it('parses true, false and null', () => {
    expect(parseCondition('true')).toEqual(lit(true));
    expect(parseCondition('false')).toEqual(lit(false));
    expect(parseCondition('null')).toEqual(lit(null));
  });

  it('parses step and input references, with exit_code as an alias', () => {
    expect(parseCondition('steps.build.status')).toEqual({ kind: 'ref', ref: { kind: 'step', step: 'build', property: 'status', key: null } });
    expect(parseCondition('steps.build.exitCode')).toEqual({ kind: 'ref', ref: { kind: 'step', step: 'build', property: 'exitCode', key: null } });
    expect(parseCondition('steps.build.exit_code')).toEqual(parseCondition('steps.build.exitCode'));
    expect(parseCondition('steps.my-step_2.outputs.the_key-1')).toEqual({
      kind: 'ref',
      ref: { kind: 'step', step: 'my-step_2', property: 'outputs', key: 'the_key-1' },
    });
    expect(parseCondition('inputs.branch')).toEqual({ kind: 'ref', ref: { kind: 'input', name: 'branch' } });
  });

  it('parses the bracket form', () => {
    expect(parseCondition(`steps['my step'].outputs['a.b']`)).toEqual({
      kind: 'ref',
      ref: { kind: 'step', step: 'my step', property: 'outputs', key: 'a.b' },
    });
    expect(parseCondition(`steps["x"]['status']`)).toEqual(parseCondition('steps.x.status'));
    expect(parseCondition(`inputs['dry-run']`)).toEqual({ kind: 'ref', ref: { kind: 'input', name: 'dry-run' } });
  });

  it('accepts a condition wrapped in ${{ }} like GitHub', () => {
    expect(parseCondition('${{ success() }}')).toEqual(parseCondition('success()'));
    expect(parseCondition('  ${{ steps.a.exitCode == 0 }} ')).toEqual(parseCondition('steps.a.exitCode == 0'));
  });

  it('ignores whitespace including newlines', () => {
    expect(parseCondition('\n  success()\n    && steps.a.exitCode == 0\n')).toEqual(parseCondition('success() && steps.a.exitCode == 0'));
  });

  it('accepts function names in any case and stores them canonically', () => {
    expect(parseCondition(`StartsWith('ab', 'a')`)).toEqual({ kind: 'call', name: 'startsWith', args: [lit('ab'), lit('a')] });
    expect(parseCondition('SUCCESS()')).toEqual({ kind: 'call', name: 'success', args: [] });
  });
});

describe('parseCondition: precedence', () => {
  const a: Expr = { kind: 'ref', ref: { kind: 'input', name: 'a' } };
  const b: Expr = { kind: 'ref', ref: { kind: 'input', name: 'b' } };
  const c: Expr = { kind: 'ref', ref: { kind: 'input', name: 'c' } };

  it('&& binds tighter than ||', () => {
    expect(parseCondition('inputs.a || inputs.b && inputs.c')).toEqual({
      kind: 'binary',
      op: '||',
      left: a,
      right: { kind: 'binary', op: '&&', left: b, right: c },
    });
  });

  it('== binds tighter than &&, and < tighter than ==', () => {
    expect(parseCondition('inputs.a == 1 && inputs.b')).toEqual({
      kind: 'binary',
      op: '&&',
      left: { kind: 'binary', op: '==', left: a, right: lit(1) },
      right: b,
    });
    expect(parseCondition('inputs.a < 1 == true')).toEqual({
      kind: 'binary',
      op: '==',
      left: { kind: 'binary', op: '<', left: a, right: lit(1) },
      right: lit(true),
    });
  });

  it('! binds tightest', () => {
    expect(parseCondition('!inputs.a == inputs.b')).toEqual({
      kind: 'binary',
      op: '==',
      left: { kind: 'not', operand: a },
      right: b,
    });
  });

  it('parentheses override precedence and operators are left-associative', () => {
    expect(parseCondition('(inputs.a || inputs.b) && inputs.c')).toEqual({
      kind: 'binary',
      op: '&&',
      left: { kind: 'binary', op: '||', left: a, right: b },
      right: c,
    });
    expect(parseCondition('inputs.a || inputs.b || inputs.c')).toEqual({
      kind: 'binary',
      op: '||',
      left: { kind: 'binary', op: '||', left: a, right: b },
      right: c,
    });
  });

  it('evaluates with the expected precedence', () => {
    expect(ev('true || false && false')).toBe(true);
    expect(ev('(true || false) && false')).toBe(false);
    expect(ev('!false && false')).toBe(false);
    expect(ev('!(false && false)')).toBe(true);
    expect(ev('1 < 2 == true')).toBe(true);
  });
});

describe('functions', () => {
  it('contains is case-insensitive and converts values to text', () => {
    expect(ev(`contains('Hello World', 'WORLD')`)).toBe(true);
    expect(ev(`contains('Hello', 'bye')`)).toBe(false);
    expect(ev(`contains('abc', '')`)).toBe(true);
    expect(ev(`contains('exit 127', 127)`)).toBe(true);
    expect(ev(`contains('is true', true)`)).toBe(true);
    expect(ev(`contains(inputs.missing, 'x')`)).toBe(false);
    expect(ev(`contains(steps.a.outputs.log, 'warning')`, { steps: { a: step('succeeded', 0, { log: 'A WARNING here' }) } })).toBe(true);
  });

  it('startsWith and endsWith are case-insensitive', () => {
    expect(ev(`startsWith('Release-1.2', 'release-')`)).toBe(true);
    expect(ev(`startsWith('Release-1.2', '1.2')`)).toBe(false);
    expect(ev(`endsWith('report.PDF', '.pdf')`)).toBe(true);
    expect(ev(`endsWith('report.pdf', 'report')`)).toBe(false);
  });

  it('success(), failure(), cancelled() read the context and always() is true', () => {
    expect(ev('success()', { success: true })).toBe(true);
    expect(ev('success()', { success: false })).toBe(false);
    expect(ev('failure()', { success: false, failure: true })).toBe(true);
    expect(ev('failure()', { failure: false })).toBe(false);
    expect(ev('cancelled()', { success: false, cancelled: true })).toBe(true);
    expect(ev('cancelled()', { cancelled: false })).toBe(false);
    expect(ev('always()', { success: false, failure: true, cancelled: true })).toBe(true);
    expect(ev('!cancelled()', { success: false, failure: true })).toBe(true);
  });

  it('hasStatusFunction finds status functions anywhere', () => {
    expect(hasStatusFunction(parseCondition('success()'))).toBe(true);
    expect(hasStatusFunction(parseCondition(`inputs.a == 'x' || !(always())`))).toBe(true);
    expect(hasStatusFunction(parseCondition(`contains(inputs.a, 'x')`))).toBe(false);
    expect(hasStatusFunction(parseCondition('steps.a.status == "failed"'))).toBe(false);
  });

  it('rejects wrong arities', () => {
    expect(errorOf(() => parseCondition('success(1)')).message).toBe('if: success() takes no arguments, got 1 at column 1 in "success(1)"');
    expect(errorOf(() => parseCondition(`contains('a')`)).message).toBe(`if: contains() takes 2 arguments, got 1 at column 1 in "contains('a')"`);
    expect(errorOf(() => parseCondition(`endsWith('a', 'b', 'c')`)).message).toContain('endsWith() takes 2 arguments, got 3');
  });
});

describe('comparison semantics', () => {
  it('compares same types directly', () => {
    expect(ev('1 == 1')).toBe(true);
    expect(ev('1 < 2.5')).toBe(true);
    expect(ev('-1 < 0')).toBe(true);
    expect(ev(`'abc' == 'abc'`)).toBe(true);
    expect(ev('true == true')).toBe(true);
    expect(ev('true != false')).toBe(true);
  });

  it('string equality is case-sensitive', () => {
    expect(ev(`'OK' == 'ok'`)).toBe(false);
    expect(ev(`'OK' != 'ok'`)).toBe(true);
  });

  it('compares a number and a numeric string as numbers', () => {
    expect(ev(`'1.0' == 1`)).toBe(true);
    expect(ev(`2 == ' 2 '`)).toBe(true);
    expect(ev(`'10' > 9`)).toBe(true);
    expect(ev(`steps.a.outputs.count >= 3`, { steps: { a: step('succeeded', 0, { count: '12' }) } })).toBe(true);
    expect(ev(`steps.a.outputs.count < 3`, { steps: { a: step('succeeded', 0, { count: '12' }) } })).toBe(false);
  });

  it('orders two strings as strings, even numeric ones', () => {
    expect(ev(`'10' < '9'`)).toBe(true);
    expect(ev(`'a' < 'b'`)).toBe(true);
    expect(ev(`'B' < 'a'`)).toBe(true);
  });

  it('never equates different types other than number/numeric string', () => {
    expect(ev(`true == 'true'`)).toBe(false);
    expect(ev(`'' == 0`)).toBe(false);
    expect(ev(`1 == true`)).toBe(false);
    expect(ev(`'abc' == 0`)).toBe(false);
    expect(ev(`'abc' != 0`)).toBe(true);
  });

  it('orders mixed non-numeric values by their text', () => {
    expect(ev(`10 < 'abc'`)).toBe(true);
    expect(ev(`false < true`)).toBe(true);
  });

  it('null equals only null and never orders', () => {
    expect(ev('null == null')).toBe(true);
    expect(ev(`null == ''`)).toBe(false);
    expect(ev('null == 0')).toBe(false);
    expect(ev('null == false')).toBe(false);
    expect(ev('null != 0')).toBe(true);
    expect(ev('null < 1')).toBe(false);
    expect(ev('null >= 1')).toBe(false);
    expect(ev('null <= null')).toBe(false);
    expect(ev('steps.missing.exitCode > 0')).toBe(false);
    expect(ev('steps.missing.exitCode <= 0')).toBe(false);
  });

  it('uses truthiness for &&, || and ! and returns booleans', () => {
    expect(ev(`'x' && 1`)).toBe(true);
    expect(ev(`'' || 0`)).toBe(false);
    expect(ev('!0')).toBe(true);
    expect(ev(`!''`)).toBe(true);
    expect(ev('!null')).toBe(true);
    expect(ev(`'false'`)).toBe(true); // a non-empty string is true
    expect(ev(`'0'`)).toBe(true);
    expect(ev('inputs.missing')).toBe(false);
  });
});

describe('evaluation of references', () => {
  const steps = { build: step('succeeded', 0, { version: '1.2.3' }), test: step('failed', 2) };

  it('reads status, exitCode and outputs', () => {
    expect(ev(`steps.build.status == 'succeeded'`, { steps })).toBe(true);
    expect(ev('steps.test.exitCode == 2', { steps })).toBe(true);
    expect(ev('steps.test.exit_code != 0', { steps })).toBe(true);
    expect(ev(`steps.build.outputs.version == '1.2.3'`, { steps })).toBe(true);
    expect(ev(`steps['build'].outputs['version'] == "1.2.3"`, { steps })).toBe(true);
  });

  it('a missing step is pending with null exit code and outputs', () => {
    expect(ev(`steps.nope.status == 'pending'`, { steps })).toBe(true);
    expect(ev('steps.nope.exitCode == null', { steps })).toBe(true);
    expect(ev('steps.nope.outputs.x == null', { steps })).toBe(true);
  });

  it('a missing output or input is null', () => {
    expect(ev('steps.build.outputs.other == null', { steps })).toBe(true);
    expect(ev('inputs.nope == null', { inputs: { other: 'x' } })).toBe(true);
    expect(ev(`inputs.branch == 'main'`, { inputs: { branch: 'main' } })).toBe(true);
  });

  it('does not see inherited properties', () => {
    expect(ev('inputs.constructor == null')).toBe(true);
    expect(ev(`steps['__proto__'].status == 'pending'`)).toBe(true);
    expect(ev('steps.build.outputs.toString == null', { steps })).toBe(true);
  });
});

describe('implicit success()', () => {
  it('a condition without a status function also needs success', () => {
    expect(evaluateCondition(parseCondition('true'), ctx({ success: true }))).toBe(true);
    expect(evaluateCondition(parseCondition('true'), ctx({ success: false, failure: true }))).toBe(false);
    expect(evaluateCondition(parseCondition(`inputs.x == 'y'`), ctx({ success: false, cancelled: true, inputs: { x: 'y' } }))).toBe(false);
    expect(evaluateCondition(parseCondition(`inputs.x == 'y'`), ctx({ success: true, inputs: { x: 'n' } }))).toBe(false);
  });

  it('a condition with a status function decides alone', () => {
    expect(evaluateCondition(parseCondition('always()'), ctx({ success: false, cancelled: true }))).toBe(true);
    expect(evaluateCondition(parseCondition('failure()'), ctx({ success: false, failure: true }))).toBe(true);
    expect(evaluateCondition(parseCondition('failure()'), ctx({ success: true }))).toBe(false);
    expect(
      evaluateCondition(parseCondition(`failure() && steps.a.exitCode == 3`), ctx({ success: false, failure: true, steps: { a: step('failed', 3) } })),
    ).toBe(true);
    expect(evaluateCondition(parseCondition('!cancelled()'), ctx({ success: false, failure: true }))).toBe(true);
    expect(evaluateCondition(parseCondition('!cancelled()'), ctx({ success: false, cancelled: true }))).toBe(false);
  });
});

describe('references', () => {
  it('lists references in source order without duplicates', () => {
    const expr = parseCondition(
      `inputs.mode == 'x' && steps.b.status == 'succeeded' || steps.a.outputs.v == inputs.mode && steps.b.status != 'failed' && steps.a.exit_code == 0 && steps.a.exitCode < 3`,
    );
    expect(conditionReferences(expr)).toEqual([
      { kind: 'input', name: 'mode' },
      { kind: 'step', step: 'b', property: 'status', key: null },
      { kind: 'step', step: 'a', property: 'outputs', key: 'v' },
      { kind: 'step', step: 'a', property: 'exitCode', key: null },
    ]);
  });

  it('treats dot and bracket forms as the same reference, and keys as distinct', () => {
    const expr = parseCondition(`steps['my-step'].outputs['k'] == steps.my-step.outputs.k || steps.my-step.outputs.j`);
    expect(conditionReferences(expr)).toEqual([
      { kind: 'step', step: 'my-step', property: 'outputs', key: 'k' },
      { kind: 'step', step: 'my-step', property: 'outputs', key: 'j' },
    ]);
  });

  it('finds references inside function arguments and negations', () => {
    expect(conditionReferences(parseCondition(`!contains(steps.a.outputs.log, inputs.word)`))).toEqual([
      { kind: 'step', step: 'a', property: 'outputs', key: 'log' },
      { kind: 'input', name: 'word' },
    ]);
    expect(conditionReferences(parseCondition('success()'))).toEqual([]);
  });

  it('templateReferences collects across placeholders', () => {
    expect(templateReferences('v=${{ steps.a.outputs.v }} ${{ inputs.x }} ${{ steps.a.outputs.v }}')).toEqual([
      { kind: 'step', step: 'a', property: 'outputs', key: 'v' },
      { kind: 'input', name: 'x' },
    ]);
    expect(templateReferences('no placeholders')).toEqual([]);
  });
});

describe('errors', () => {
  it('names the unexpected token and its column', () => {
    const error = errorOf(() => parseCondition('success() && )'));
    expect(error.message).toBe('if: unexpected ")" at column 14 in "success() && )"');
    expect(error.hint).toMatch(/Expected a value/);
    expect(error.details).toMatchObject({ column: 14, line: 1, offset: 13 });
    expect(error.code).toBe('validation');
  });

  it('reports an unexpected end', () => {
    expect(errorOf(() => parseCondition('success() &&')).message).toBe('if: unexpected end of expression at column 13 in "success() &&"');
    const open = errorOf(() => parseCondition('(success() && true'));
    expect(open.message).toBe('if: unexpected end of expression at column 19 in "(success() && true"');
    expect(open.hint).toContain('")" to close the "(" at column 1');
  });

  it('reports a trailing token', () => {
    const error = errorOf(() => parseCondition(`success() 'x'`));
    expect(error.message).toBe(`if: unexpected string 'x' at column 11 in "success() 'x'"`);
    expect(error.hint).toContain('Expected an operator');
  });

  it('reports lines for multi-line conditions', () => {
    expect(errorOf(() => parseCondition('success()\n  && )')).message).toBe('if: unexpected ")" at line 2, column 6 in "success()   && )"');
  });

  it('rejects unknown names with a hint listing what can be referenced', () => {
    const env = errorOf(() => parseCondition(`env.X == '1'`));
    expect(env.message).toBe(`if: unknown name "env" at column 1 in "env.X == '1'"`);
    expect(env.hint).toContain('steps.<id>.status');
    expect(env.hint).toContain('inputs.<name>');
    expect(errorOf(() => parseCondition('github.ref')).message).toContain('unknown name "github"');
    expect(errorOf(() => parseCondition('True')).hint).toBe('Literals are lowercase: write true.');
    expect(errorOf(() => parseCondition('success')).hint).toBe('success is a function: write success().');
  });

  it('rejects unknown step properties and incomplete references', () => {
    const foo = errorOf(() => parseCondition('steps.a.foo'));
    expect(foo.message).toBe('if: unknown step property "foo" at column 9 in "steps.a.foo"');
    expect(foo.hint).toContain('status, exitCode (or exit_code) and outputs.<key>');
    expect(errorOf(() => parseCondition('steps.a')).message).toBe('if: expected "." or "[" after "steps.a" at column 8 in "steps.a"');
    expect(errorOf(() => parseCondition('steps.a.outputs')).message).toBe('if: "steps.a.outputs" needs a key at column 16 in "steps.a.outputs"');
    expect(errorOf(() => parseCondition('steps')).message).toContain('expected "." or "[" after "steps"');
    expect(errorOf(() => parseCondition('inputs')).message).toContain('expected "." or "[" after "inputs"');
    expect(errorOf(() => parseCondition('steps.a.status.x')).message).toContain('unexpected "." after "steps.a.status" at column 15');
    expect(errorOf(() => parseCondition('inputs.a.b')).message).toContain('unexpected "." after "inputs.a"');
    expect(errorOf(() => parseCondition(`steps[1].status`)).message).toContain('expected a quoted step id');
    expect(errorOf(() => parseCondition(`steps[''].status`)).message).toContain('empty step id');
    expect(errorOf(() => parseCondition('steps.a.outputs[x]')).message).toContain('expected a quoted output key inside "steps.a.outputs[ ]"');
    expect(errorOf(() => parseCondition('steps.1.status')).hint).toContain("use the bracket form for such names, e.g. steps['1st'].status");
    expect(errorOf(() => parseCondition('inputs.(')).message).toContain('expected an input name after "inputs."');
    expect(errorOf(() => parseCondition('steps.a.(')).message).toContain('expected status, exitCode or outputs after "steps.a."');
  });

  it('rejects unknown functions, naming them and listing the known ones', () => {
    const error = errorOf(() => parseCondition('hashFiles("x")'));
    expect(error.message).toBe('if: unknown function "hashFiles()" at column 1 in "hashFiles("x")"');
    expect(error.hint).toBe('Known functions: success(), failure(), always(), cancelled(), contains(a, b), startsWith(a, b), endsWith(a, b).');
  });

  it('rejects bad characters with a helpful hint', () => {
    const eq = errorOf(() => parseCondition('inputs.a = 1'));
    expect(eq.message).toBe('if: unexpected "=" at column 10 in "inputs.a = 1"');
    expect(eq.hint).toBe('Use "==" to compare.');
    expect(errorOf(() => parseCondition('true & false')).hint).toBe('Use "&&" for "and".');
    expect(errorOf(() => parseCondition('true | false')).hint).toBe('Use "||" for "or".');
    expect(errorOf(() => parseCondition('1 - 2')).hint).toMatch(/no arithmetic/);
  });

  it('rejects bad strings and numbers', () => {
    expect(errorOf(() => parseCondition(`inputs.a == 'abc`)).message).toBe(`if: unterminated string at column 13 in "inputs.a == 'abc"`);
    const escape = errorOf(() => parseCondition(`'a\\qb'`));
    expect(escape.message).toBe(`if: unknown escape "\\q" in a string at column 3 in "'a\\qb'"`);
    expect(errorOf(() => parseCondition('12abc')).message).toBe('if: invalid number "12abc" at column 1 in "12abc"');
    expect(errorOf(() => parseCondition('1.')).message).toContain('invalid number "1."');
    expect(errorOf(() => parseCondition('1.2.3')).message).toContain('invalid number "1.2.3"');
  });

  it('rejects an empty condition', () => {
    expect(errorOf(() => parseCondition('')).message).toBe('if: empty expression at column 1 in ""');
    expect(errorOf(() => parseCondition('   ')).message).toContain('empty expression');
    expect(errorOf(() => parseCondition('${{ }}')).message).toContain('empty expression');
  });

  it('limits the nesting depth without overflowing the stack', () => {
    const ok = `${'('.repeat(EXPR_MAX_DEPTH)}true${')'.repeat(EXPR_MAX_DEPTH)}`;
    expect(parseCondition(ok)).toEqual(lit(true));
    const deep = errorOf(() => parseCondition(`${'('.repeat(EXPR_MAX_DEPTH + 1)}true${')'.repeat(EXPR_MAX_DEPTH + 1)}`));
    expect(deep.message).toContain(`expression nests more than ${EXPR_MAX_DEPTH} levels deep at column ${EXPR_MAX_DEPTH + 1}`);
    expect(errorOf(() => parseCondition(`${'!'.repeat(EXPR_MAX_DEPTH + 1)}true`)).message).toContain('nests more than');
    expect(errorOf(() => parseCondition(`${'('.repeat(4000)}`)).message).toContain('nests more than');
    expect(errorOf(() => parseCondition(`${'contains('.repeat(100)}`)).message).toContain('nests more than');
  });

  it('limits the source length', () => {
    const long = Array.from({ length: 1000 }, () => 'true').join(' && ');
    expect(long.length).toBeGreaterThan(EXPR_MAX_LENGTH);
    const error = errorOf(() => parseCondition(long));
    expect(error.message).toMatch(/^if: expression is \d+ characters long, more than the limit of 4096 at column 1 in "true && .*…"$/);
    const fits = Array.from({ length: 500 }, () => 'true').join(' && ');
    expect(fits.length).toBeLessThanOrEqual(EXPR_MAX_LENGTH);
    expect(ev(fits)).toBe(true);
  });

  it('abbreviates long sources around the column', () => {
    const source = `${'inputs.a == 1 && '.repeat(20)})`;
    const error = errorOf(() => parseCondition(source));
    expect(error.message).toMatch(/^if: unexpected "\)" at column 341 in "….*\)"$/);
  });
});

describe('templates', () => {
  const steps = { build: step('succeeded', 0, { version: '1.2.3', empty: '' }), test: step('failed', 2) };

  it('splits text and placeholders', () => {
    const parts = parseTemplate('v${{steps.build.outputs.version}}-${{ inputs.x }}!');
    expect(parts).toEqual([
      { kind: 'text', text: 'v' },
      { kind: 'expr', source: 'steps.build.outputs.version', expr: parseCondition('steps.build.outputs.version') },
      { kind: 'text', text: '-' },
      { kind: 'expr', source: 'inputs.x', expr: parseCondition('inputs.x') },
      { kind: 'text', text: '!' },
    ]);
    expect(parseTemplate('')).toEqual([]);
    expect(parseTemplate('plain')).toEqual([{ kind: 'text', text: 'plain' }]);
  });

  it('renders multiple and adjacent placeholders', () => {
    const c = { steps, inputs: { x: 'X' } };
    expect(renderTemplate('release ${{ steps.build.outputs.version }} (${{ inputs.x }})', c)).toBe('release 1.2.3 (X)');
    expect(renderTemplate('${{ inputs.x }}${{ inputs.x }}${{steps.test.exitCode}}', c)).toBe('XX2');
    expect(renderTemplate('${{ steps.test.exitCode == 2 }}/${{ 1.5 }}/${{ null }}/${{ steps.nope.status }}', c)).toBe('true/1.5/null'.replace('null', '') + '/pending');
    expect(renderTemplate(`${'${{'} contains(steps.build.outputs.version, '1.2') && 'yes' }}`, c)).toBe('true');
    expect(renderTemplate('[${{ inputs.missing }}][${{ steps.build.outputs.empty }}]', c)).toBe('[][]');
  });

  it('keeps text outside placeholders byte for byte, including $${{', () => {
    const c = { steps, inputs: { x: 'X' } };
    expect(renderTemplate('a\r\n\t ${ {x}} }} $$ ${{ inputs.x }} é🙂\u0000', c)).toBe('a\r\n\t ${ {x}} }} $$ X é🙂\u0000');
    expect(renderTemplate('$${{ inputs.x }}', c)).toBe('$X');
  });

  it('a }} inside a quoted string does not close the placeholder', () => {
    expect(renderTemplate(`<${'${{'} '}}' }}>`, { steps: {}, inputs: {} })).toBe('<}}>');
    expect(renderTemplate(`<${'${{'} "a\\"}}" }}>`, { steps: {}, inputs: {} })).toBe('<a"}}>');
  });

  it('inserts values verbatim, never interpreting them', () => {
    const evil = `x'; touch PWNED; echo "$(id)" \${{ inputs.other }}`;
    const out = renderTemplate('echo ${{ steps.a.outputs.v }}', { steps: { a: step('succeeded', 0, { v: evil }) }, inputs: { other: 'NO' } });
    expect(out).toBe(`echo ${evil}`);
    expect(renderTemplate('${{ inputs.v }}', { steps: {}, inputs: { v: '; touch PWNED' } })).toBe('; touch PWNED');
  });

  it('rejects an unclosed ${{', () => {
    const error = errorOf(() => parseTemplate('hello ${{ inputs.x'));
    expect(error.message).toBe('template: unclosed "${{" at column 7 in placeholder "${{ inputs.x"');
    expect(error.hint).toContain('"}}"');
    expect(errorOf(() => parseTemplate('a ${{ inputs.x }} b ${{')).message).toContain('unclosed "${{" at column 21');
    expect(errorOf(() => parseTemplate(`\${{ 'abc }}`)).message).toContain('unterminated string at column 5');
  });

  it('rejects bad expressions inside, naming line and column in the text', () => {
    const error = errorOf(() => parseTemplate('line one\nvalue: ${{ steps.a.foo }}'));
    expect(error.message).toBe('template: unknown step property "foo" at line 2, column 20 in placeholder "${{ steps.a.foo }}"');
    expect(errorOf(() => parseTemplate('${{ }}')).message).toContain('empty expression');
    expect(errorOf(() => parseTemplate('${{ a ${{ b }} }}')).message).toBe('template: unexpected "$" at column 7 in placeholder "${{ a ${{ b }}"');
    expect(errorOf(() => parseTemplate('${{ inputs.a ${{ b }} }}')).hint).toBe('Placeholders cannot be nested.');
  });

  it('rejects status functions in templates', () => {
    const error = errorOf(() => parseTemplate('ok: ${{ success() }}'));
    expect(error.message).toBe('template: success() is not allowed in a template at column 9 in placeholder "${{ success() }}"');
    expect(error.hint).toContain("if: condition");
    for (const fn of ['failure()', 'always()', 'Cancelled()', '!always()']) {
      expect(() => parseTemplate(`${'${{'} ${fn} }}`)).toThrow(ValidationError);
    }
  });

  it('limits each placeholder, not the whole text', () => {
    const big = `${'x'.repeat(10_000)}${'${{'} inputs.a }}`;
    expect(renderTemplate(big, { steps: {}, inputs: { a: 'A' } })).toBe(`${'x'.repeat(10_000)}A`);
    expect(errorOf(() => parseTemplate(`${'${{'} '${'y'.repeat(5000)}' }}`)).message).toContain('more than the limit of 4096');
  });

  it('hasTemplate detects ${{', () => {
    expect(hasTemplate('a ${{ b }}')).toBe(true);
    expect(hasTemplate('a ${{')).toBe(true);
    expect(hasTemplate('a ${ {b}} $ {{')).toBe(false);
  });

  it('formatExprValue prints values as JavaScript does, null as empty', () => {
    expect(formatExprValue(null)).toBe('');
    expect(formatExprValue('s')).toBe('s');
    expect(formatExprValue(true)).toBe('true');
    expect(formatExprValue(false)).toBe('false');
    expect(formatExprValue(0)).toBe('0');
    expect(formatExprValue(-1.5)).toBe('-1.5');
  });
});

describe('properties', () => {
  const anyText = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: fc.constantFrom('$', '{', '}', ' ', 'a', '\n') }));

  it('rendering a text without ${{ is the identity', () => {
    fc.assert(
      fc.property(
        anyText.filter((t) => !t.includes('${{')),
        (text) => {
          expect(hasTemplate(text)).toBe(false);
          expect(renderTemplate(text, { steps: {}, inputs: {} })).toBe(text);
          expect(parseTemplate(text).map((p) => (p.kind === 'text' ? p.text : '')).join('')).toBe(text);
        },
      ),
    );
  });

  it('a rendered input is inserted verbatim between arbitrary text', () => {
    fc.assert(
      fc.property(
        anyText.filter((t) => !t.includes('${{')),
        anyText,
        anyText.filter((t) => !t.includes('${{')),
        (before, value, after) => {
          expect(renderTemplate(`${before}\${{ inputs.v }}${after}`, { steps: {}, inputs: { v: value } })).toBe(`${before}${value}${after}`);
        },
      ),
    );
  });

  it('parsing never throws anything but a ValidationError', () => {
    const tokens = fc.constantFrom('(', ')', '!', '&&', '||', '==', '<=', ' ', 'steps', '.', 'a', "'x'", '[', ']', ',', 'success', 'contains', '1', '-', 'inputs', 'outputs', '${{', '}}');
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.array(tokens).map((t) => t.join(''))), (source) => {
        for (const fn of [() => parseCondition(source), () => parseTemplate(source)]) {
          try {
            fn();
          } catch (error) {
            expect(error).toBeInstanceOf(ValidationError);
          }
        }
      }),
    );
  });
});
