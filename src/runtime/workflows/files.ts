/**
 * Workflow spec files: read a `.yaml`/`.yml` (or any other name: YAML) or `.json` file, parse it,
 * normalise it with {@link normalizeWorkflowSpec}, and give every problem a `file:line:column`.
 *
 * YAML files may use anchors, aliases and `<<` merge keys. Positions come from the yaml package's
 * Document API (JSON is YAML 1.2, so JSON files are parsed a second time with it, after `JSON.parse`
 * has accepted them, only to locate problems).
 *
 * Over 500 lines on purpose: one concern — a spec file's text to a spec or a list of located
 * problems — with its guards against hostile files (depth, alias and key counts) beside the parsing
 * they guard.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { extname } from 'node:path';
import { Composer, isAlias, isMap, isScalar, isSeq, LineCounter, Parser, visit, YAMLParseError, type CST, type Document, type Pair, type YAMLError, type YAMLMap } from 'yaml';
import { ValidationError } from '../../events/errors.js';
import { hasTemplate } from '../../workflow/expr.js';
import { normalizeWorkflowSpec, type SpecProblem, type WorkflowSpec } from '../../workflow/spec.js';
import { buildInvocation, isProviderId } from '../agents/providers.js';

/** Spec files larger than this are refused (a spec is a few kilobytes; this is a typo guard). */
export const MAX_WORKFLOW_FILE_BYTES = 1024 * 1024;

/**
 * Deeper than any spec nests (a handful of levels): refused before the YAML document is built, whose
 * recursion a file nested thousands of levels deep overflows — and an overflow there can leave the
 * process unable to compile a regular expression again (it aborted on the next such file).
 */
export const MAX_SPEC_NESTING = 200;

/**
 * More anchors and aliases than a spec uses (a few dozen): refused, since resolving each alias
 * looks through all of them (a 1 MiB file of aliases took minutes).
 */
export const MAX_SPEC_ALIASES = 1000;

/** A spec file, loaded and normalised. */
export interface LoadedWorkflow {
  spec: WorkflowSpec;
  /** Non-fatal findings (ignored predecessor fields, unknown YAML tags, …), each prefixed with the file. */
  warnings: string[];
  /** `legacy` when the file uses the predecessor's step shape. */
  format: 'native' | 'legacy';
  /** The file name as given. */
  file: string;
  /** SHA-256 (hex) of the file's text, for "has the spec changed?". */
  sha256: string;
}

/** A problem of a spec file: a {@link SpecProblem} (message prefixed `file:line:col: `) with its position when known. */
export interface WorkflowFileProblem extends SpecProblem {
  /** 1-based. */
  line?: number;
  /** 1-based. */
  column?: number;
}

interface Position {
  line: number;
  column: number;
  offset: number;
}

type Located = WorkflowFileProblem & { offset?: number };

function prefix(file: string, position: Position | null): string {
  return position ? `${file}:${position.line}:${position.column}: ` : `${file}: `;
}

function located(file: string, problem: SpecProblem, position: Position | null): Located {
  return {
    ...problem,
    message: `${prefix(file, position)}${problem.message}`,
    ...(position ? { line: position.line, column: position.column, offset: position.offset } : {}),
  };
}

/** One ValidationError for all problems: the first one's message (+ "and N more"), every problem in details. */
function problemsError(file: string, problems: Located[]): ValidationError {
  // Document order; problems without a position first (they concern the file as a whole).
  const sorted = problems
    .map((problem, i) => ({ problem, i }))
    .sort((a, b) => (a.problem.offset ?? -1) - (b.problem.offset ?? -1) || a.i - b.i)
    .map(({ problem }) => {
      const { offset: _offset, ...rest } = problem;
      return rest as WorkflowFileProblem;
    });
  const first = sorted[0]!;
  const more = sorted.length - 1;
  return new ValidationError(`${first.message}${more > 0 ? ` (and ${more} more problem${more === 1 ? '' : 's'})` : ''}`, {
    hint: first.hint,
    details: { file, problems: sorted },
  });
}

function fileProblem(file: string, message: string, hint?: string, position: Position | null = null): Located {
  return located(file, { path: [], step: null, field: null, message, ...(hint ? { hint } : {}) }, position);
}

function positionAt(lineCounter: LineCounter, offset: number): Position {
  const { line, col } = lineCounter.linePos(offset);
  return { line, column: col, offset };
}

/** A map's own pairs by key text (the first of each), and its `<<` merge pairs: built once per map. */
interface MapIndex {
  own: Map<string, Pair>;
  merges: Pair[];
}
const mapIndexes = new WeakMap<YAMLMap, MapIndex>();

function indexOf(map: YAMLMap): MapIndex {
  let index = mapIndexes.get(map);
  if (index) return index;
  index = { own: new Map(), merges: [] };
  for (const item of map.items) {
    if (!isScalar(item.key)) continue;
    if (item.key.source === '<<') index.merges.push(item);
    if (typeof item.key.value !== 'symbol' && !index.own.has(String(item.key.value))) index.own.set(String(item.key.value), item);
  }
  mapIndexes.set(map, index);
  return index;
}

/**
 * The pair with key `key` in a map, also looking through `<<` merge keys (as `toJS` merges them).
 * Indexed, so that locating every problem of a file with thousands of them stays linear.
 */
function findPair(doc: Document.Parsed, map: YAMLMap, key: string, depth: number): Pair | null {
  const index = indexOf(map);
  const own = index.own.get(key);
  if (own || depth > 10) return own ?? null;
  for (const item of index.merges) {
    const sources = isSeq(item.value) ? item.value.items : [item.value];
    for (const source of sources) {
      const target = isAlias(source) ? source.resolve(doc) : source;
      if (isMap(target)) {
        const found = findPair(doc, target, key, depth + 1);
        if (found) return found;
      }
    }
  }
  return null;
}

/**
 * The position of `path` in the document: the key for a mapping field (where the field is written),
 * the item for a list item. Null when the path does not map to a node.
 */
function locate(doc: Document.Parsed, lineCounter: LineCounter, path: ReadonlyArray<string | number>): Position | null {
  let node: unknown = doc.contents;
  let keyNode: unknown = null;
  for (const segment of path) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = findPair(doc, node, String(segment), 0);
      if (!pair) return null;
      keyNode = pair.key;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
      keyNode = null;
      if (node === undefined) return null;
    } else {
      return null;
    }
  }
  const target = keyNode ?? node;
  const range = (target as { range?: [number, number, number] | null } | null)?.range;
  return range ? positionAt(lineCounter, range[0]) : null;
}

class JsonSyntax {
  constructor(
    readonly offset: number,
    readonly message: string,
  ) {}
}

/**
 * Finds the first syntax error of a text `JSON.parse` rejected: its offset and a message. `JSON.parse`
 * itself does not always say where (Node 20: "Unexpected token ']', … is not valid JSON").
 */
function jsonSyntaxError(text: string): JsonSyntax | null {
  let i = 0;
  const fail = (message: string, at = i): never => {
    throw new JsonSyntax(at, message);
  };
  const show = (): string => (i >= text.length ? 'end of input' : JSON.stringify(text[i]));
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const string = () => {
    const start = i++;
    for (;;) {
      if (i >= text.length) fail('unterminated string', start);
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return;
      }
      if (c < 0x20) fail('control character in a string (write it escaped, e.g. \\n)');
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail('bad \\u escape in a string');
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
          i += 2;
        } else {
          fail('bad escape in a string');
        }
      } else {
        i++;
      }
    }
  };
  const value = (depth: number): void => {
    if (depth > 10_000) fail('nesting too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail(text[i] === '}' ? 'trailing comma before "}"' : `expected a double-quoted property name, got ${show()}`);
        string();
        ws();
        if (text[i] !== ':') fail(`expected ":" after the property name, got ${show()}`);
        i++;
        value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail(`expected "," or "}" after a property value, got ${show()}`);
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] === ']') fail('trailing comma before "]"');
        value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail(`expected "," or "]" after a list item, got ${show()}`);
      }
    }
    if (c === '"') return string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      const re = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
      re.lastIndex = i;
      const m = re.exec(text);
      if (!m || m[0] === '-') fail('invalid number');
      i = re.lastIndex;
      if (text[i] !== undefined && /[0-9.eE]/.test(text[i]!)) fail('invalid number (no leading zeros; digits on both sides of ".")');
      return;
    }
    for (const word of ['true', 'false', 'null']) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return;
      }
    }
    const token = /[A-Za-z_][A-Za-z0-9_]*/y;
    token.lastIndex = i;
    const m = token.exec(text);
    if (m) fail(`unexpected ${JSON.stringify(m[0])} (strings need double quotes)`);
    fail(`unexpected ${show()}`);
  };
  try {
    value(0);
    ws();
    if (i < text.length) fail('unexpected text after the JSON value');
    return null;
  } catch (error) {
    if (error instanceof JsonSyntax) return error;
    return null; // e.g. a stack overflow on absurd nesting: no position then
  }
}

/**
 * The CST's nesting depth, measured without recursion (the parser that builds it keeps its own
 * stack): the offset of the first node deeper than `limit`, or null.
 */
function tooDeep(tokens: readonly CST.Token[], limit: number): number | null {
  const stack: Array<[CST.Token | undefined, number]> = tokens.map((t) => [t, 0]);
  while (stack.length > 0) {
    const [token, depth] = stack.pop()!;
    if (token === undefined) continue;
    if (depth > limit) return token.offset;
    if (token.type === 'document') stack.push([token.value, depth]);
    else if (token.type === 'block-map' || token.type === 'block-seq' || token.type === 'flow-collection') {
      for (const item of token.items) {
        if ('key' in item) stack.push([item.key ?? undefined, depth + 1]);
        stack.push([item.value, depth + 1]);
      }
    }
  }
  return null;
}

/**
 * What `parseDocument` does — one document, a second one an error — with two guards first: a file
 * nested deeper than {@link MAX_SPEC_NESTING} is refused before the document is built (see there),
 * and duplicate keys are found here, in one pass, rather than by the YAML parser (which compares
 * each key with every earlier one of its mapping: a mapping of 45,000 keys took 40 s).
 */
function parseYaml(file: string, body: string, lineCounter: LineCounter, merge: boolean): Document.Parsed {
  const tokens = Array.from(new Parser(lineCounter.addNewLine).parse(body));
  const deep = tooDeep(tokens, MAX_SPEC_NESTING);
  if (deep !== null) {
    throw problemsError(file, [
      fileProblem(file, `nested more than ${MAX_SPEC_NESTING} levels deep`, 'a workflow spec nests a few levels: is this the right file?', positionAt(lineCounter, deep)),
    ]);
  }
  let doc: Document.Parsed | null = null;
  for (const next of new Composer({ uniqueKeys: false, prettyErrors: false, merge }).compose(tokens, true, body.length)) {
    if (doc === null) {
      doc = next;
    } else {
      doc.errors.push(new YAMLParseError([next.range[0], next.range[1]], 'MULTIPLE_DOCS', 'Source contains multiple documents'));
      break;
    }
  }
  const parsed = doc!;
  let aliases = 0;
  let firstAlias: number | null = null;
  visit(parsed, {
    Node(_, node) {
      if (isAlias(node) || node.anchor !== undefined) {
        aliases++;
        if (firstAlias === null && aliases > MAX_SPEC_ALIASES) firstAlias = node.range?.[0] ?? 0;
      }
      if (!isMap(node)) return;
      const seen = new Set<unknown>();
      for (const { key } of node.items) {
        if (!isScalar(key)) continue;
        if (seen.has(key.value)) {
          parsed.errors.push(Object.assign(new YAMLParseError([key.range?.[0] ?? 0, key.range?.[1] ?? 0], 'DUPLICATE_KEY', 'Map keys must be unique'), { key: String(key.value) }));
        }
        seen.add(key.value);
      }
    },
  });
  if (firstAlias !== null) {
    throw problemsError(file, [
      fileProblem(file, `${aliases} anchors and aliases, more than the ${MAX_SPEC_ALIASES} a workflow spec may use`, 'write the repeated parts out, or share them through fewer anchors', positionAt(lineCounter, firstAlias)),
    ]);
  }
  return parsed;
}

/**
 * The YAML errors worth showing: every duplicate key, and the first syntax error (the parser's
 * recovery after one makes the later ones guesswork). Errors come in the order they were found:
 * sorted by position with the problems.
 */
function yamlProblems(file: string, lineCounter: LineCounter, errors: readonly YAMLError[]): Located[] {
  const duplicates = errors.filter((e) => e.code === 'DUPLICATE_KEY');
  const syntax = errors.find((e) => e.code !== 'DUPLICATE_KEY');
  return [...duplicates, ...(syntax ? [syntax] : [])].map((e) => {
    const { message, hint } = yamlMessage(e, (e as YAMLError & { key?: string }).key ?? null);
    return fileProblem(file, message, hint, positionAt(lineCounter, e.pos[0]));
  });
}

function yamlMessage(error: YAMLError, key: string | null): { message: string; hint?: string } {
  const { code, message } = error;
  switch (code) {
    case 'DUPLICATE_KEY':
      return { message: `duplicate key${key === null ? '' : ` ${JSON.stringify(key)}`}`, hint: 'a key may appear only once in a mapping: remove or rename one' };
    case 'MULTIPLE_DOCS':
      return { message: 'more than one YAML document (a second one starts here)', hint: 'a workflow file holds one document: remove the "---" line' };
    case 'TAB_AS_INDENT':
      return { message: `invalid YAML: ${message}`, hint: 'indent with spaces, not tabs' };
    default:
      if (/Maximum call stack size exceeded/.test(message)) return { message: 'invalid YAML: nested too deeply', hint: 'a workflow spec nests a few levels: is this the right file?' };
      return { message: `invalid YAML: ${message}` };
  }
}

/** How a spec file is read. */
export interface ParseOptions {
  /** The workflow's name, instead of the file's `name:` (which may then be absent): the predecessor's `--name`. */
  name?: string;
}

/**
 * Parses and normalises the text of a spec file. `.json` files (by extension, any case) are read with
 * `JSON.parse`; anything else as YAML 1.2 (duplicate keys rejected in both).
 *
 * @throws ValidationError with `details.problems` ({@link WorkflowFileProblem}[]) and `details.file`;
 *   every message is prefixed `file:line:col: ` when the position is known, else `file: `.
 */
export function parseWorkflowText(text: string, file: string, options: ParseOptions = {}): LoadedWorkflow {
  const sha256 = createHash('sha256').update(text, 'utf8').digest('hex');
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const lineCounter = new LineCounter();
  const warnings: string[] = [];
  let value: unknown;
  let doc: Document.Parsed | null;

  if (extname(file).toLowerCase() === '.json') {
    try {
      value = JSON.parse(body);
    } catch (error) {
      const found = jsonSyntaxError(body);
      if (found === null) throw problemsError(file, [fileProblem(file, `invalid JSON: ${error instanceof Error ? error.message : String(error)}`)]);
      const counter = new LineCounter();
      counter.addNewLine(0);
      for (let i = body.indexOf('\n'); i >= 0; i = body.indexOf('\n', i + 1)) counter.addNewLine(i + 1);
      throw problemsError(file, [fileProblem(file, `invalid JSON: ${found.message}`, 'JSON has no comments and no trailing commas; strings and keys need double quotes', positionAt(counter, found.offset))]);
    }
    const parsed = parseYaml(file, body, lineCounter, false);
    const duplicates = parsed.errors.filter((e) => e.code === 'DUPLICATE_KEY');
    if (duplicates.length > 0) throw problemsError(file, yamlProblems(file, lineCounter, duplicates));
    // Valid JSON the YAML parser reads differently (rare) only costs the positions.
    doc = parsed.errors.length === 0 ? parsed : null;
  } else {
    doc = parseYaml(file, body, lineCounter, true);
    if (doc.errors.length > 0) throw problemsError(file, yamlProblems(file, lineCounter, doc.errors));
    for (const w of doc.warnings) warnings.push(`${prefix(file, positionAt(lineCounter, w.pos[0]))}${w.message}`);
    if (doc.contents === null) {
      throw problemsError(file, [fileProblem(file, 'the file is empty', 'a workflow needs at least name: and steps:')]);
    }
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (error) {
      const parsed = doc;
      let at: Position | null = null;
      visit(parsed, {
        Alias(_, alias) {
          if (alias.resolve(parsed) === undefined && alias.range) {
            at = positionAt(lineCounter, alias.range[0]);
            return visit.BREAK;
          }
          return undefined;
        },
      });
      throw problemsError(file, [fileProblem(file, `invalid YAML: ${error instanceof Error ? error.message : String(error)}`, undefined, at)]);
    }
  }

  if (options.name !== undefined && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    value = { ...(value as Record<string, unknown>), name: options.name };
  }
  try {
    const result = normalizeWorkflowSpec(value);
    // What an agent step's CLI cannot do (a budget it has no flag for and does not report, a
    // permission mode it does not know, …) is a problem of the spec, found now rather than at run.
    // The predecessor's files set limits its CLIs never enforced: such a limit is dropped with a
    // warning (the file loads as it did there); a native spec is refused.
    const legacyWarnings: string[] = [];
    const refused = agentStepProblems(result.spec, result.format === 'legacy' ? legacyWarnings : null);
    if (refused.length > 0) throw new ValidationError(refused[0]!.message, { details: { problems: refused } });
    return {
      spec: result.spec,
      warnings: [...warnings, ...[...result.warnings, ...legacyWarnings].map((w) => `${file}: ${w}`)],
      format: result.format,
      file,
      sha256,
    };
  } catch (error) {
    const problems = error instanceof ValidationError ? (error.details?.problems as SpecProblem[] | undefined) : undefined;
    if (!problems || problems.length === 0) throw error;
    throw problemsError(
      file,
      problems.map((problem) => located(file, problem, doc ? locate(doc, lineCounter, problem.path) : null)),
    );
  }
}

function readError(path: string, error: unknown): ValidationError {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const [message, hint] =
    code === 'ENOENT' || code === 'ENOTDIR'
      ? ['no such file', 'check the path of the workflow file']
      : code === 'EACCES' || code === 'EPERM'
        ? ['permission denied', 'make the file readable by this user']
        : [`cannot read the file: ${error instanceof Error ? error.message : String(error)}`, undefined];
  return problemsError(path, [fileProblem(path, message, hint)]);
}

/**
 * Reads a spec file and parses it with {@link parseWorkflowText}.
 * @throws ValidationError naming the path for a missing or unreadable file, a directory, a file over
 *   {@link MAX_WORKFLOW_FILE_BYTES}, or one that is not UTF-8 text; and every problem of its content.
 */
export function loadWorkflowFile(path: string, options: ParseOptions = {}): LoadedWorkflow {
  let bytes: Buffer;
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw problemsError(path, [fileProblem(path, stat.isDirectory() ? 'is a directory, not a workflow file' : 'not a regular file')]);
    if (stat.size > MAX_WORKFLOW_FILE_BYTES) {
      throw problemsError(path, [fileProblem(path, `the file is ${stat.size} bytes, over the 1 MiB limit for a workflow spec`, 'is this the right file?')]);
    }
    bytes = readFileSync(path);
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw readError(path, error);
  }
  if (bytes.length > MAX_WORKFLOW_FILE_BYTES) {
    throw problemsError(path, [fileProblem(path, `the file is ${bytes.length} bytes, over the 1 MiB limit for a workflow spec`, 'is this the right file?')]);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw problemsError(path, [fileProblem(path, 'not UTF-8 text', 'save the workflow file as UTF-8')]);
  }
  return parseWorkflowText(text, path, options);
}

/** The spec's spelling of the adapter's field names (kebab-case; camelCase is accepted too). */
const AGENT_SPEC_KEYS: Record<string, string> = {
  permissionMode: 'permission-mode',
  maxTurns: 'max-turns',
  maxCostUsd: 'max-cost-usd',
  extraArgs: 'extra-args',
  model: 'model',
  agent: 'agent',
};

/**
 * Each agent step whose fields hold no template, checked by its provider's adapter as a run would
 * build its argv: one problem per step refused, at the step's `agent:` block.
 */
function agentStepProblems(spec: WorkflowSpec, dropLimits: string[] | null): SpecProblem[] {
  const problems: SpecProblem[] = [];
  spec.steps.forEach((step, index) => {
    const t = step.target;
    if (t.type !== 'agent' || !isProviderId(t.provider)) return;
    const fields = [t.model, t.agent, t.permissionMode, ...t.extraArgs];
    if (fields.some((f) => f !== null && hasTemplate(f))) return;
    for (;;) {
      try {
        buildInvocation({ ...t, provider: t.provider, cwd: null }, { prompt: 'check', promptFile: '/dev/null', isolatedConfigDir: t.configIsolation === 'safe' ? '/dev/null' : null, cwd: null });
        return;
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        const field = error.details?.field;
        // Also `agent` on a provider without named agents (cursor): the predecessor passed `--agent`,
        // which cursor-agent has no such flag for; its files load, the field dropped with a warning.
        if (dropLimits === null || (field !== 'maxTurns' && field !== 'maxCostUsd' && field !== 'agent') || t[field] === null) {
          problems.push(agentProblem(step.id, index, t.provider, error));
          return;
        }
        dropLimits.push(`step "${step.id}": ${field} ignored: ${error.message.replace(/^[a-z]+: [A-Za-z]+ is not supported: /, '')}`);
        t[field] = null;
      }
    }
  });
  return problems;
}

/** An adapter's refusal as a problem of the step, at its `agent:` block, in the spec's spelling. */
function agentProblem(stepId: string, index: number, provider: string, error: ValidationError): SpecProblem {
  const spell = (text: string) => text.replace(/\b(permissionMode|maxTurns|maxCostUsd|extraArgs)\b/g, (f) => AGENT_SPEC_KEYS[f]!);
  const field = typeof error.details?.field === 'string' ? error.details.field : null;
  const key = field === null ? null : (AGENT_SPEC_KEYS[field] ?? field);
  return {
    path: ['steps', index, 'agent'],
    step: stepId,
    field: key === null ? 'agent' : `agent.${key}`,
    message: `step "${stepId}": agent: ${spell(error.message.replace(/^[a-z]+: /, ''))} (provider ${provider})`,
    ...(error.hint !== undefined ? { hint: spell(error.hint) } : {}),
  };
}
