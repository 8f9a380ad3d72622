/**
 * The expression language of workflow steps: conditions (`if:`) and output templates
 * (`${{ … }}`), like GitHub Actions' expressions but smaller. Expressions are parsed and evaluated
 * by loops itself, never by a shell, so a value is always data and never code.
 *
 * This module is pure: no dependencies, no clock, no I/O. Over 500 lines on purpose: one small
 * language — lexer, parser, evaluator and templates share its AST and its error positions.
 *
 * ## Grammar (lowest precedence first)
 *
 * ```text
 * expr     := or
 * or       := and ( "||" and )*
 * and      := equality ( "&&" equality )*
 * equality := relation ( ( "==" | "!=" ) relation )*
 * relation := unary ( ( "<" | "<=" | ">" | ">=" ) unary )*
 * unary    := "!" unary | primary
 * primary  := string | number | true | false | null | "(" expr ")" | call | reference
 * call     := name "(" [ expr ( "," expr )* ] ")"
 * reference:= steps SEG ( "status" | "exitCode" | "exit_code" | "outputs" SEG )   (as segments)
 *           | inputs SEG
 * SEG      := "." name | "[" string "]"
 * name     := /[A-Za-z_][A-Za-z0-9_-]*\/
 * string   := '…' | "…"   (escapes \\ \' \" \n \t)
 * number   := /-?[0-9]+(\.[0-9]+)?/
 * ```
 *
 * Binary operators are left-associative. Whitespace (spaces, tabs, newlines) between tokens is
 * ignored. There is no arithmetic. Function names are matched case-insensitively (`Contains(…)`
 * works, as on GitHub); everything else — literals, `steps`, `inputs`, property names — is
 * case-sensitive.
 *
 * Limits: one expression is at most {@link EXPR_MAX_LENGTH} characters and nests at most
 * {@link EXPR_MAX_DEPTH} levels (each `(`, `!` and function call is a level).
 *
 * @module
 */
import { ValidationError } from '../events/errors.js';

/** A value an expression evaluates to. */
export type ExprValue = string | number | boolean | null;

/** Functions that read the run's status; only allowed in conditions, never in templates. */
export type StatusFunctionName = 'success' | 'failure' | 'always' | 'cancelled';

/** Functions on strings (case-insensitive, like GitHub's). */
export type StringFunctionName = 'contains' | 'startsWith' | 'endsWith';

/** Every function the language knows, in its canonical spelling. */
export type FunctionName = StatusFunctionName | StringFunctionName;

/** The comparison operators. */
export type ComparisonOperator = '==' | '!=' | '<' | '<=' | '>' | '>=';

/** Every binary operator. */
export type BinaryOperator = ComparisonOperator | '&&' | '||';

/**
 * A parsed expression. Parentheses leave no node; function names are canonical (`startsWith`,
 * even when written `startswith`).
 */
export type Expr =
  | { readonly kind: 'literal'; readonly value: ExprValue }
  | { readonly kind: 'ref'; readonly ref: ExprRef }
  | { readonly kind: 'call'; readonly name: FunctionName; readonly args: readonly Expr[] }
  | { readonly kind: 'not'; readonly operand: Expr }
  | { readonly kind: 'binary'; readonly op: BinaryOperator; readonly left: Expr; readonly right: Expr };

/** A reference found in an expression or template. */
export type ExprRef =
  | { kind: 'step'; step: string; property: 'status' | 'exitCode' | 'outputs'; key: string | null } // key only for outputs
  | { kind: 'input'; name: string };

/** What an expression sees of one step. */
export interface StepView {
  status: string;
  exitCode: number | null;
  outputs: Record<string, string>;
}

/** Everything a condition may read. */
export interface ConditionContext {
  /** success(): every dependency of this step succeeded and the workflow is not cancelled (computed by the caller). */
  success: boolean;
  /** failure(): some ancestor step failed (computed by the caller). */
  failure: boolean;
  /** cancelled(): the workflow run was cancelled. */
  cancelled: boolean;
  steps: Record<string, StepView>;
  inputs: Record<string, string>;
}

/** Everything a template may read (templates cannot use status functions). */
export interface TemplateContext {
  steps: Record<string, StepView>;
  inputs: Record<string, string>;
}

/** Parts of a text with `${{ expr }}` placeholders. */
export type TemplatePart = { kind: 'text'; text: string } | { kind: 'expr'; source: string; expr: Expr };

/** The longest expression accepted, in characters (per condition, or per placeholder of a template). */
export const EXPR_MAX_LENGTH = 4096;

/** The deepest nesting accepted; each `(`, `!` and function call adds one level. */
export const EXPR_MAX_DEPTH = 64;

// ---------------------------------------------------------------------------------------------
// Functions

const ARITY: Readonly<Record<FunctionName, number>> = {
  success: 0,
  failure: 0,
  always: 0,
  cancelled: 0,
  contains: 2,
  startsWith: 2,
  endsWith: 2,
};

const STATUS_FUNCTIONS: ReadonlySet<string> = new Set<StatusFunctionName>(['success', 'failure', 'always', 'cancelled']);

const FUNCTION_BY_LOWER: ReadonlyMap<string, FunctionName> = new Map(
  (Object.keys(ARITY) as FunctionName[]).map((name) => [name.toLowerCase(), name]),
);

const KNOWN_FUNCTIONS = 'success(), failure(), always(), cancelled(), contains(a, b), startsWith(a, b), endsWith(a, b)';

const HINT_REFERENCES =
  'An expression can reference steps.<id>.status, steps.<id>.exitCode, steps.<id>.outputs.<key> and inputs.<name> ' +
  "(or the bracket form steps['my-step'].outputs['key']), use 'strings', numbers, true, false and null, " +
  `and call ${KNOWN_FUNCTIONS}.`;

const HINT_VALUE =
  "Expected a value: a 'string', a number, true, false, null, steps.<id>.status|exitCode|outputs.<key>, " +
  'inputs.<name>, a function call, "!" or "(".';

const OPERATORS = '==, !=, <, <=, >, >=, &&, ||';

// ---------------------------------------------------------------------------------------------
// Errors

/** Where an expression lives, for error messages. */
interface Where {
  readonly mode: 'if' | 'template';
  /** The whole text: the condition, or the whole template. */
  readonly text: string;
  /** For templates: the placeholder `${{ … }}` being parsed (offsets into `text`). */
  readonly placeholder?: { readonly start: number; readonly end: number };
}

const SNIPPET_WIDTH = 80;

function snippet(source: string, offset: number): string {
  const flat = source.replace(/[\r\n\t]/g, ' ');
  if (flat.length <= SNIPPET_WIDTH) return flat;
  const from = Math.max(0, Math.min(offset - SNIPPET_WIDTH / 2, flat.length - SNIPPET_WIDTH));
  const to = from + SNIPPET_WIDTH;
  return `${from > 0 ? '…' : ''}${flat.slice(from, to)}${to < flat.length ? '…' : ''}`;
}

function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let column = 1;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      column = 1;
    } else {
      column++;
    }
  }
  return { line, column };
}

function fail(where: Where, offset: number, what: string, hint: string): never {
  const { line, column } = lineColumn(where.text, offset);
  const at = where.text.includes('\n') ? `line ${line}, column ${column}` : `column ${column}`;
  let message: string;
  const details: Record<string, unknown> = { offset, line, column };
  if (where.placeholder === undefined) {
    message = `if: ${what} at ${at} in "${snippet(where.text, offset)}"`;
    details.source = where.text;
  } else {
    const { start, end } = where.placeholder;
    const placeholder = where.text.slice(start, end);
    message = `template: ${what} at ${at} in placeholder "${snippet(placeholder, offset - start)}"`;
    details.placeholder = placeholder;
  }
  throw new ValidationError(message, { hint, details });
}

// ---------------------------------------------------------------------------------------------
// Lexer

type Token =
  | { type: 'string'; value: string; start: number; end: number }
  | { type: 'number'; value: number; start: number; end: number }
  | { type: 'name'; value: string; start: number; end: number }
  | { type: 'punct'; value: string; start: number; end: number }
  | { type: 'end'; value: ''; start: number; end: number };

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
const isNameStart = (c: string | undefined): boolean => c !== undefined && /[A-Za-z_]/.test(c);
const isNamePart = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9_-]/.test(c);
const NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;

const TWO_CHAR = new Set(['==', '!=', '<=', '>=', '&&', '||']);
const ONE_CHAR = new Set(['(', ')', '[', ']', '.', ',', '!', '<', '>']);
const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\', "'": "'", '"': '"', n: '\n', t: '\t' };

function lexString(where: Where, start: number, end: number): { value: string; next: number } {
  const text = where.text;
  const quote = text[start]!;
  let value = '';
  let i = start + 1;
  while (i < end) {
    const c = text[i]!;
    if (c === quote) return { value, next: i + 1 };
    if (c === '\\') {
      if (i + 1 >= end) break;
      const escaped = ESCAPES[text[i + 1]!];
      if (escaped === undefined) {
        fail(where, i, `unknown escape "\\${text[i + 1]}" in a string`, 'Strings allow the escapes \\\\ \\\' \\" \\n and \\t.');
      }
      value += escaped;
      i += 2;
      continue;
    }
    value += c;
    i++;
  }
  return fail(where, start, 'unterminated string', `Close the string with ${quote}.`);
}

function lex(where: Where, start: number, end: number): Token[] {
  const text = where.text;
  const tokens: Token[] = [];
  let i = start;
  while (i < end) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if (c === "'" || c === '"') {
      const { value, next } = lexString(where, i, end);
      tokens.push({ type: 'string', value, start: i, end: next });
      i = next;
      continue;
    }
    if (isDigit(c) || (c === '-' && isDigit(text[i + 1]))) {
      let j = c === '-' ? i + 1 : i;
      while (j < end && isDigit(text[j])) j++;
      if (j < end && text[j] === '.' && isDigit(text[j + 1])) {
        j++;
        while (j < end && isDigit(text[j])) j++;
      }
      let bad = j;
      while (bad < end && (isNamePart(text[bad]) || text[bad] === '.')) bad++;
      if (bad > j) {
        fail(
          where,
          i,
          `invalid number "${text.slice(i, bad)}"`,
          "A number is digits with an optional fraction, e.g. 3, -1 or 2.5. A name cannot start with a digit; use the bracket form for such names, e.g. steps['1st'].status.",
        );
      }
      const value = Number(text.slice(i, j));
      if (!Number.isFinite(value)) fail(where, i, `number "${text.slice(i, j)}" is too large`, 'Use a smaller number.');
      tokens.push({ type: 'number', value, start: i, end: j });
      i = j;
      continue;
    }
    if (isNameStart(c)) {
      let j = i + 1;
      while (j < end && isNamePart(text[j])) j++;
      tokens.push({ type: 'name', value: text.slice(i, j), start: i, end: j });
      i = j;
      continue;
    }
    const two = text.slice(i, i + 2);
    if (i + 2 <= end && TWO_CHAR.has(two)) {
      tokens.push({ type: 'punct', value: two, start: i, end: i + 2 });
      i += 2;
      continue;
    }
    if (ONE_CHAR.has(c)) {
      tokens.push({ type: 'punct', value: c, start: i, end: i + 1 });
      i++;
      continue;
    }
    const hints: Record<string, string> = {
      '=': 'Use "==" to compare.',
      '&': 'Use "&&" for "and".',
      '|': 'Use "||" for "or".',
      '-': 'There is no arithmetic; a negative number is written -1.',
      '+': 'There is no arithmetic.',
      '$':
        where.mode === 'if'
          ? 'Write the condition without ${{ }}, or wrap the whole condition in a single ${{ }}.'
          : 'Placeholders cannot be nested.',
      '{': where.mode === 'if' ? 'Write the condition without ${{ }}, or wrap the whole condition in a single ${{ }}.' : 'Placeholders cannot be nested.',
      '}': where.mode === 'if' ? 'Write the condition without ${{ }}, or wrap the whole condition in a single ${{ }}.' : 'A placeholder ends with "}}".',
    };
    fail(where, i, `unexpected "${c}"`, hints[c] ?? `Operators are ${OPERATORS} and "!". ${HINT_REFERENCES}`);
  }
  tokens.push({ type: 'end', value: '', start: end, end });
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// Parser

/** `.name` or `['name']`, for messages. */
function segmentText(name: string): string {
  return NAME.test(name) ? `.${name}` : `['${name.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}']`;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(
    private readonly where: Where,
    private readonly tokens: readonly Token[],
    private readonly allowStatus: boolean,
  ) {}

  parse(): Expr {
    const first = this.peek();
    if (first.type === 'end') {
      fail(
        this.where,
        first.start,
        'empty expression',
        this.where.mode === 'if'
          ? 'Write a condition such as success(), always() or steps.build.exitCode == 0, or leave out if:.'
          : 'Put an expression between ${{ and }}, e.g. ${{ steps.build.outputs.version }}.',
      );
    }
    const expr = this.parseOr();
    const after = this.peek();
    if (after.type !== 'end') this.unexpected(after, `Expected an operator (${OPERATORS}) or the end of the expression.`);
    return expr;
  }

  private peek(): Token {
    return this.tokens[this.index]!;
  }

  private next(): Token {
    const token = this.tokens[this.index]!;
    if (token.type !== 'end') this.index++;
    return token;
  }

  private isPunct(value: string): boolean {
    const token = this.peek();
    return token.type === 'punct' && token.value === value;
  }

  private describe(token: Token): string {
    if (token.type === 'end') return 'end of expression';
    let raw = this.where.text.slice(token.start, token.end);
    if (raw.length > 30) raw = `${raw.slice(0, 30)}…`;
    return token.type === 'string' ? `string ${raw}` : `"${raw}"`;
  }

  private unexpected(token: Token, hint: string): never {
    return fail(this.where, token.start, `unexpected ${this.describe(token)}`, hint);
  }

  private enter(token: Token): void {
    this.depth++;
    if (this.depth > EXPR_MAX_DEPTH) {
      fail(
        this.where,
        token.start,
        `expression nests more than ${EXPR_MAX_DEPTH} levels deep`,
        'Simplify the expression; each "(", "!" and function call adds a level.',
      );
    }
  }

  private leave(): void {
    this.depth--;
  }

  /** The hint for a token that should have been an operator or a closing bracket. */
  private afterValueHint(closer: string): string {
    return `Expected an operator (${OPERATORS}) or ${closer}.`;
  }

  private parseOr(): Expr {
    let left = this.parseAnd();
    while (this.isPunct('||')) {
      this.next();
      left = { kind: 'binary', op: '||', left, right: this.parseAnd() };
    }
    return left;
  }

  private parseAnd(): Expr {
    let left = this.parseEquality();
    while (this.isPunct('&&')) {
      this.next();
      left = { kind: 'binary', op: '&&', left, right: this.parseEquality() };
    }
    return left;
  }

  private parseEquality(): Expr {
    let left = this.parseRelation();
    while (this.isPunct('==') || this.isPunct('!=')) {
      const op = this.next().value as BinaryOperator;
      left = { kind: 'binary', op, left, right: this.parseRelation() };
    }
    return left;
  }

  private parseRelation(): Expr {
    let left = this.parseUnary();
    while (this.isPunct('<') || this.isPunct('<=') || this.isPunct('>') || this.isPunct('>=')) {
      const op = this.next().value as BinaryOperator;
      left = { kind: 'binary', op, left, right: this.parseUnary() };
    }
    return left;
  }

  private parseUnary(): Expr {
    if (this.isPunct('!')) {
      const bang = this.next();
      this.enter(bang);
      const operand = this.parseUnary();
      this.leave();
      return { kind: 'not', operand };
    }
    return this.parsePrimary();
  }

  private parsePrimary(): Expr {
    const token = this.next();
    switch (token.type) {
      case 'string':
      case 'number':
        return { kind: 'literal', value: token.value };
      case 'name':
        return this.parseName(token);
      case 'punct':
        if (token.value === '(') {
          this.enter(token);
          const inner = this.parseOr();
          const close = this.next();
          if (close.type !== 'punct' || close.value !== ')') {
            const { column } = lineColumn(this.where.text, token.start);
            this.unexpected(close, this.afterValueHint(`")" to close the "(" at column ${column}`));
          }
          this.leave();
          return inner;
        }
        return this.unexpected(token, HINT_VALUE);
      case 'end':
        return this.unexpected(token, HINT_VALUE);
    }
  }

  private parseName(token: Token & { type: 'name' }): Expr {
    if (this.isPunct('(')) return this.parseCall(token);
    switch (token.value) {
      case 'true':
        return { kind: 'literal', value: true };
      case 'false':
        return { kind: 'literal', value: false };
      case 'null':
        return { kind: 'literal', value: null };
      case 'steps':
        return this.parseStepRef();
      case 'inputs':
        return this.parseInputRef();
      default: {
        const lower = token.value.toLowerCase();
        const hint =
          lower === 'true' || lower === 'false' || lower === 'null'
            ? `Literals are lowercase: write ${lower}.`
            : FUNCTION_BY_LOWER.has(lower)
              ? `${FUNCTION_BY_LOWER.get(lower)} is a function: write ${FUNCTION_BY_LOWER.get(lower)}(${ARITY[FUNCTION_BY_LOWER.get(lower)!] ? 'a, b' : ''}).`
              : HINT_REFERENCES;
        return fail(this.where, token.start, `unknown name "${token.value}"`, hint);
      }
    }
  }

  /** Reads `.name` or `['name']`. */
  private segment(after: string, what: string, hint: string, article = 'a '): { name: string; start: number } {
    const token = this.next();
    if (token.type === 'punct' && token.value === '.') {
      const name = this.next();
      if (name.type === 'name') return { name: name.value, start: name.start };
      return fail(this.where, name.start, `expected ${article}${what} after "${after}."`, hint);
    }
    if (token.type === 'punct' && token.value === '[') {
      const name = this.next();
      if (name.type !== 'string') return fail(this.where, name.start, `expected a quoted ${what} inside "${after}[ ]"`, hint);
      if (name.value === '') return fail(this.where, name.start, `empty ${what} inside "${after}[ ]"`, hint);
      const close = this.next();
      if (close.type !== 'punct' || close.value !== ']') return this.unexpected(close, `Close the bracket with "]".`);
      return { name: name.value, start: name.start };
    }
    return fail(this.where, token.start, `expected "." or "[" after "${after}"`, hint);
  }

  private endOfReference(path: string): void {
    if (this.isPunct('.') || this.isPunct('[')) {
      fail(
        this.where,
        this.peek().start,
        `unexpected "${this.peek().value}" after "${path}"`,
        `A reference ends after status, exitCode, outputs.<key> or inputs.<name>; use the bracket form for a key with other characters, e.g. outputs['a.b'].`,
      );
    }
  }

  private parseStepRef(): Expr {
    const hintProperty = 'A step has status, exitCode (or exit_code) and outputs.<key>, e.g. steps.build.outputs.version.';
    const step = this.segment('steps', 'step id', "Reference a step as steps.<id>.status, steps.<id>.exitCode or steps.<id>.outputs.<key> (or steps['my-step']…).");
    const base = `steps${segmentText(step.name)}`;
    const property = this.segment(base, 'status, exitCode or outputs', hintProperty, '');
    let ref: ExprRef;
    switch (property.name) {
      case 'status':
        ref = { kind: 'step', step: step.name, property: 'status', key: null };
        break;
      case 'exitCode':
      case 'exit_code':
        ref = { kind: 'step', step: step.name, property: 'exitCode', key: null };
        break;
      case 'outputs': {
        if (!this.isPunct('.') && !this.isPunct('[')) {
          fail(this.where, this.peek().start, `"${base}.outputs" needs a key`, `Write ${base}.outputs.<key>, e.g. ${base}.outputs.version.`);
        }
        const key = this.segment(`${base}.outputs`, 'output key', `Write ${base}.outputs.<key>, or ${base}.outputs['key'] for other characters.`, 'an ');
        ref = { kind: 'step', step: step.name, property: 'outputs', key: key.name };
        break;
      }
      default:
        return fail(this.where, property.start, `unknown step property "${property.name}"`, hintProperty);
    }
    this.endOfReference(`${base}${segmentText(property.name)}${ref.key === null ? '' : segmentText(ref.key)}`);
    return { kind: 'ref', ref };
  }

  private parseInputRef(): Expr {
    const name = this.segment('inputs', 'input name', "Reference an input as inputs.<name> (or inputs['my input']).", 'an ');
    this.endOfReference(`inputs${segmentText(name.name)}`);
    return { kind: 'ref', ref: { kind: 'input', name: name.name } };
  }

  private parseCall(token: Token & { type: 'name' }): Expr {
    const name = FUNCTION_BY_LOWER.get(token.value.toLowerCase());
    if (name === undefined) {
      return fail(this.where, token.start, `unknown function "${token.value}()"`, `Known functions: ${KNOWN_FUNCTIONS}.`);
    }
    if (!this.allowStatus && STATUS_FUNCTIONS.has(name)) {
      fail(
        this.where,
        token.start,
        `${name}() is not allowed in a template`,
        'success(), failure(), always() and cancelled() only work in a step\'s if: condition; a template can use references, literals, operators and contains/startsWith/endsWith.',
      );
    }
    const open = this.next(); // "("
    this.enter(open);
    const args: Expr[] = [];
    if (!this.isPunct(')')) {
      for (;;) {
        args.push(this.parseOr());
        if (!this.isPunct(',')) break;
        this.next();
      }
    }
    const close = this.next();
    if (close.type !== 'punct' || close.value !== ')') {
      this.unexpected(close, this.afterValueHint(`"," or ")" to close ${name}(`));
    }
    this.leave();
    const arity = ARITY[name];
    if (args.length !== arity) {
      fail(
        this.where,
        token.start,
        `${name}() takes ${arity === 0 ? 'no arguments' : `${arity} arguments`}, got ${args.length}`,
        arity === 0 ? `Write ${name}().` : `Write ${name}(a, b), e.g. ${name}(steps.build.outputs.log, 'warning').`,
      );
    }
    return { kind: 'call', name, args };
  }
}

function parseRange(where: Where, start: number, end: number, allowStatus: boolean): Expr {
  if (end - start > EXPR_MAX_LENGTH) {
    fail(where, start, `expression is ${end - start} characters long, more than the limit of ${EXPR_MAX_LENGTH}`, 'Shorten the expression.');
  }
  return new Parser(where, lex(where, start, end), allowStatus).parse();
}

// ---------------------------------------------------------------------------------------------
// Public API: conditions

/**
 * Parses a step condition (`if:`). The whole condition may also be wrapped in one `${{ … }}`, as on
 * GitHub. Throws a {@link ValidationError} whose message names the column (and line, for multi-line
 * sources), e.g. `if: unexpected ")" at column 14 in "success() && )"`, for a syntax error, an
 * unknown name, property or function, a wrong number of arguments, an empty condition, or a
 * condition over the length or depth limits.
 */
/**
 * Parsed conditions by source text. A workflow run evaluates its pending steps' conditions on every
 * event (and replay on every replayed event); an expression is parsed once. The AST is never
 * mutated, so one is shared. A source that fails to parse is not kept (it throws each time).
 */
const parsedConditions = new Map<string, Expr>();
const PARSED_CONDITIONS_MAX = 4096;

export function parseCondition(source: string): Expr {
  let expr = parsedConditions.get(source);
  if (expr === undefined) {
    expr = parseConditionText(source);
    if (parsedConditions.size >= PARSED_CONDITIONS_MAX) parsedConditions.clear();
    parsedConditions.set(source, expr);
  }
  return expr;
}

function parseConditionText(source: string): Expr {
  const where: Where = { mode: 'if', text: source };
  let start = 0;
  let end = source.length;
  const open = source.length - source.trimStart().length;
  const close = source.trimEnd().length;
  if (source.startsWith('${{', open) && close - open >= 5 && source.slice(close - 2, close) === '}}') {
    start = open + 3;
    end = close - 2;
  }
  return parseRange(where, start, end, true);
}

function collectReferences(expr: Expr, out: ExprRef[], seen: Set<string>): void {
  switch (expr.kind) {
    case 'literal':
      return;
    case 'ref': {
      const ref = expr.ref;
      const id = ref.kind === 'input' ? JSON.stringify(['input', ref.name]) : JSON.stringify(['step', ref.step, ref.property, ref.key]);
      if (!seen.has(id)) {
        seen.add(id);
        out.push(ref.kind === 'input' ? { kind: 'input', name: ref.name } : { ...ref });
      }
      return;
    }
    case 'call':
      for (const arg of expr.args) collectReferences(arg, out, seen);
      return;
    case 'not':
      collectReferences(expr.operand, out, seen);
      return;
    case 'binary':
      collectReferences(expr.left, out, seen);
      collectReferences(expr.right, out, seen);
      return;
  }
}

/**
 * The step and input references of an expression, in source order, each listed once (`exit_code`
 * is reported as `exitCode`). Use it to check that referenced steps exist and are ancestors.
 */
export function conditionReferences(expr: Expr): ExprRef[] {
  const out: ExprRef[] = [];
  collectReferences(expr, out, new Set());
  return out;
}

/** Whether the expression calls success(), failure(), always() or cancelled() anywhere. */
export function hasStatusFunction(expr: Expr): boolean {
  switch (expr.kind) {
    case 'literal':
    case 'ref':
      return false;
    case 'call':
      return STATUS_FUNCTIONS.has(expr.name) || expr.args.some(hasStatusFunction);
    case 'not':
      return hasStatusFunction(expr.operand);
    case 'binary':
      return hasStatusFunction(expr.left) || hasStatusFunction(expr.right);
  }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

interface EvalContext extends TemplateContext {
  status?: { success: boolean; failure: boolean; cancelled: boolean };
}

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** A string that reads as a finite decimal number, or null. */
function numericString(s: string): number | null {
  const t = s.trim();
  if (!NUMERIC.test(t)) return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : null;
}

/** Truthiness: null, false, 0 and '' are false; everything else is true. */
function truthy(v: ExprValue): boolean {
  return !(v === null || v === false || v === 0 || v === '');
}

function asNumbers(a: ExprValue, b: ExprValue): [number, number] | null {
  if (typeof a === 'number' && typeof b === 'number') return [a, b];
  if (typeof a === 'number' && typeof b === 'string') {
    const n = numericString(b);
    return n === null ? null : [a, n];
  }
  if (typeof a === 'string' && typeof b === 'number') {
    const n = numericString(a);
    return n === null ? null : [n, b];
  }
  return null;
}

function equals(a: ExprValue, b: ExprValue): boolean {
  if (a === null || b === null) return a === b;
  if (typeof a === typeof b) return a === b;
  const numbers = asNumbers(a, b);
  return numbers !== null && numbers[0] === numbers[1];
}

function compare(op: '<' | '<=' | '>' | '>=', a: ExprValue, b: ExprValue): boolean {
  if (a === null || b === null) return false;
  const numbers = asNumbers(a, b);
  const [x, y]: [number | string, number | string] = numbers ?? [formatExprValue(a), formatExprValue(b)];
  switch (op) {
    case '<':
      return x < y;
    case '<=':
      return x <= y;
    case '>':
      return x > y;
    case '>=':
      return x >= y;
  }
}

function own<T>(record: Record<string, T> | null | undefined, key: string): T | undefined {
  return record != null && Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
}

function evaluate(expr: Expr, ctx: EvalContext): ExprValue {
  switch (expr.kind) {
    case 'literal':
      return expr.value;
    case 'ref': {
      const ref = expr.ref;
      if (ref.kind === 'input') return own(ctx.inputs, ref.name) ?? null;
      const step = own(ctx.steps, ref.step);
      switch (ref.property) {
        case 'status':
          return step === undefined ? 'pending' : (step.status ?? 'pending');
        case 'exitCode':
          return step?.exitCode ?? null;
        case 'outputs':
          return step === undefined || ref.key === null ? null : (own(step.outputs, ref.key) ?? null);
      }
    }
    case 'call': {
      if (STATUS_FUNCTIONS.has(expr.name)) {
        if (ctx.status === undefined) throw new ValidationError(`${expr.name}() is not allowed in a template`);
        switch (expr.name) {
          case 'success':
            return ctx.status.success;
          case 'failure':
            return ctx.status.failure;
          case 'cancelled':
            return ctx.status.cancelled;
          default:
            return true; // always()
        }
      }
      const a = formatExprValue(evaluate(expr.args[0]!, ctx)).toLowerCase();
      const b = formatExprValue(evaluate(expr.args[1]!, ctx)).toLowerCase();
      switch (expr.name) {
        case 'contains':
          return a.includes(b);
        case 'startsWith':
          return a.startsWith(b);
        default:
          return a.endsWith(b);
      }
    }
    case 'not':
      return !truthy(evaluate(expr.operand, ctx));
    case 'binary': {
      const { op } = expr;
      if (op === '&&') return truthy(evaluate(expr.left, ctx)) && truthy(evaluate(expr.right, ctx));
      if (op === '||') return truthy(evaluate(expr.left, ctx)) || truthy(evaluate(expr.right, ctx));
      const left = evaluate(expr.left, ctx);
      const right = evaluate(expr.right, ctx);
      if (op === '==') return equals(left, right);
      if (op === '!=') return !equals(left, right);
      return compare(op, left, right);
    }
  }
}

/**
 * Evaluates a parsed condition.
 *
 * **Implicit success()**: like GitHub Actions, a condition that calls none of success(),
 * failure(), always() or cancelled() only runs the step when `ctx.success` also holds — the result
 * is `ctx.success && value`. A condition with a status function decides alone, so `always()` runs
 * after a cancel and `failure()` runs only after a failure.
 *
 * **Values**: `steps.<id>.status` is the step's status (`'pending'` for a step missing from
 * `ctx.steps`); `steps.<id>.exitCode` is a number or null (null for a missing step);
 * `steps.<id>.outputs.<key>` is a string, or null for a missing step or key; `inputs.<name>` is a
 * string, or null when missing. Lookups only see own properties (`inputs.constructor` is null).
 *
 * **Truthiness**: null, false, 0 and '' are false; every other value is true. `!`, `&&` and `||`
 * always return booleans (not the operand, unlike JavaScript).
 *
 * **Comparison semantics**:
 * - `null` equals only `null`; any ordering (`<`, `<=`, `>`, `>=`) with a null side is false.
 * - Values of the same type compare directly: numbers numerically, booleans by identity, strings
 *   case-sensitively (`'OK' == 'ok'` is false) and ordered by UTF-16 code units.
 * - A number and a numeric string (decimal, optional sign/fraction/exponent, surrounding spaces
 *   ignored) compare as numbers: `steps.a.outputs.count > 3` and `'1.0' == 1` are true when they
 *   read so. Two numeric strings are still strings: `'10' < '9'` is true — compare against a
 *   number literal for numeric order.
 * - Otherwise values of different types are never equal (`true == 'true'` is false, `'' == 0` is
 *   false), and ordering compares their text forms ({@link formatExprValue}) as strings.
 *
 * **Functions**: `contains(a, b)`, `startsWith(a, b)` and `endsWith(a, b)` compare the text forms
 * of their arguments case-insensitively (null is ''). `success()`, `failure()` and `cancelled()`
 * return the corresponding `ctx` flags; `always()` is true.
 */
export function evaluateCondition(expr: Expr, ctx: ConditionContext): boolean {
  const value = truthy(
    evaluate(expr, {
      steps: ctx.steps,
      inputs: ctx.inputs,
      status: { success: ctx.success, failure: ctx.failure, cancelled: ctx.cancelled },
    }),
  );
  return hasStatusFunction(expr) ? value : ctx.success && value;
}

// ---------------------------------------------------------------------------------------------
// Templates

/** The index of the `}}` closing the placeholder opened at `open`, skipping quoted strings. */
function findClose(text: string, open: number): number {
  const where: Where = { mode: 'template', text, placeholder: { start: open, end: text.length } };
  let i = open + 3;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== c) j += text[j] === '\\' ? 2 : 1;
      if (j >= text.length) fail(where, i, 'unterminated string', `Close the string with ${c}, and the placeholder with "}}".`);
      i = j + 1;
      continue;
    }
    if (c === '}' && text[i + 1] === '}') return i;
    i++;
  }
  return fail(where, open, 'unclosed "${{"', 'Close the placeholder with "}}", e.g. ${{ steps.build.outputs.version }}.');
}

/**
 * Splits a text into literal parts and `${{ expr }}` placeholders. An expression's `source` is the
 * text between `${{` and `}}`, trimmed. A `}}` inside a quoted string does not close a placeholder.
 * `$${{` is not an escape: the first `$` is text and the placeholder follows. Each placeholder's
 * expression has the same length and depth limits as a condition; the text itself has no limit.
 * Throws a {@link ValidationError} (message prefixed `template:`, naming the line and column in the
 * text) on an unclosed `${{`, a bad expression, or a status function (success(), failure(),
 * always(), cancelled()), which only make sense in conditions.
 */
export function parseTemplate(text: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let textStart = 0;
  for (;;) {
    const open = text.indexOf('${{', textStart);
    if (open < 0) break;
    const close = findClose(text, open);
    if (open > textStart) parts.push({ kind: 'text', text: text.slice(textStart, open) });
    const where: Where = { mode: 'template', text, placeholder: { start: open, end: close + 2 } };
    const expr = parseRange(where, open + 3, close, false);
    parts.push({ kind: 'expr', source: text.slice(open + 3, close).trim(), expr });
    textStart = close + 2;
  }
  if (textStart < text.length) parts.push({ kind: 'text', text: text.slice(textStart) });
  return parts;
}

/** Whether the text contains a `${{` (it may still be invalid; {@link parseTemplate} tells). */
export function hasTemplate(text: string): boolean {
  return text.includes('${{');
}

/**
 * The references of every placeholder of a template, in source order, each listed once. Throws
 * like {@link parseTemplate}.
 */
export function templateReferences(text: string): ExprRef[] {
  const out: ExprRef[] = [];
  const seen = new Set<string>();
  for (const part of parseTemplate(text)) if (part.kind === 'expr') collectReferences(part.expr, out, seen);
  return out;
}

/**
 * Replaces each `${{ expr }}` with {@link formatExprValue} of its value (see
 * {@link evaluateCondition} for the value rules). Text outside placeholders is kept byte for byte,
 * and values are inserted verbatim — never re-parsed, quoted or escaped. Throws like
 * {@link parseTemplate}.
 */
export function renderTemplate(text: string, ctx: TemplateContext): string {
  if (!hasTemplate(text)) return text;
  const context: EvalContext = { steps: ctx.steps, inputs: ctx.inputs };
  return parseTemplate(text)
    .map((part) => (part.kind === 'text' ? part.text : formatExprValue(evaluate(part.expr, context))))
    .join('');
}

/** The text form of a value: null → '', strings as they are, numbers and booleans as JavaScript prints them. */
export function formatExprValue(v: ExprValue): string {
  return v === null ? '' : String(v);
}
