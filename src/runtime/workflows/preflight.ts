/**
 * `loops workflows validate --preflight`: beyond the spec's own validity, will its steps start on
 * this machine? Each command step's executable is looked up on the effective PATH (a shell step
 * needs /bin/sh and the first word of its text when it is known statically — preflight.ts), each
 * working directory must exist, and each agent step's CLI must be found. Values that come from
 * templates (`${{ … }}`) are only known at run time and are not checked. The PATH is the one runs
 * get: the inherited one plus the user bin directories (env.ts); a step (or workflow) env that sets
 * PATH replaces the inherited one.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { hasTemplate } from '../../workflow/expr.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { extendPath } from '../execution/env.js';
import { resolveExecutable } from '../execution/which.js';
import { checkCommand } from '../execution/preflight.js';

export interface PreflightProblem {
  step: string;
  field: string;
  message: string;
}

/** The binary each agent provider runs. */
const AGENT_BINARIES: Record<string, string> = { cursor: 'cursor-agent' };

export function preflightWorkflow(spec: WorkflowSpec, file: string | null, path = extendPath(process.env.PATH)): PreflightProblem[] {
  const base = file === null ? process.cwd() : dirname(resolve(file));
  const problems: PreflightProblem[] = [];
  for (const step of spec.steps) {
    const target = step.target;
    let cwd: string | null = null;
    if (target.cwd !== null && !hasTemplate(target.cwd)) {
      cwd = isAbsolute(target.cwd) ? target.cwd : resolve(base, target.cwd);
      if (!existsSync(cwd) || !statSync(cwd).isDirectory()) {
        problems.push({ step: step.id, field: 'cwd', message: `working directory ${cwd} does not exist` });
        cwd = null;
      }
    }
    if (target.type === 'command') {
      if (!target.shell && hasTemplate(target.command)) continue;
      const ownPath = target.env.PATH ?? spec.env.PATH;
      // A PATH given by a template is only known when the step runs.
      if (ownPath !== undefined && hasTemplate(ownPath)) continue;
      const stepPath = ownPath === undefined ? path : extendPath(ownPath);
      const problem = checkCommand({ command: target.command, args: target.args, shell: target.shell, cwd }, stepPath, base);
      if (problem !== null) problems.push({ step: step.id, field: problem.field, message: problem.message });
    } else {
      const binary = AGENT_BINARIES[target.provider] ?? target.provider;
      if (resolveExecutable(binary, path, cwd ?? base) === null) {
        problems.push({ step: step.id, field: 'agent.provider', message: `the ${target.provider} CLI (${binary}) is not installed: not found on PATH=${path}` });
      }
    }
  }
  return problems;
}
