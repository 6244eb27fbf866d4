import { createHash } from 'node:crypto';
import type { AnyReactorDefinition, CompiledStep } from './compiled.js';

/** The parts of a definition its plan fingerprint is computed from. */
export type PlanParts = Pick<AnyReactorDefinition, 'name' | 'plan' | 'returns' | 'handoff'>;

/**
 * Names the canonical encoding below. Change it (and the `p<n>-` prefix) whenever the encoding
 * changes, so fingerprints of different encodings never compare equal by accident.
 */
const ENCODING = 'xreactor.plan/1';
const PREFIX = 'p1-';
const HEX_LENGTH = 16;

/**
 * The interrupts ready together with the one at plan index `index`: consecutive interrupts
 * whose dependencies all complete before `index`. The execution machine pauses on the whole
 * group at once.
 */
export function interruptGroup(plan: readonly CompiledStep[], index: number): string[] {
  const before = new Set(plan.slice(0, index).map((s) => s.name));
  const group: string[] = [];
  for (let j = index; j < plan.length; j += 1) {
    const step = plan[j]!;
    if (step.kind !== 'interrupt' || ![...step.reads, ...step.waitFor].every((d) => before.has(d))) break;
    group.push(step.name);
  }
  return group;
}

/**
 * The plan as nested arrays of strings, integers, booleans and null: no object keys, so the
 * JSON text depends only on the values and their positions. Each step is
 * `[name, kind, reads, waitFor, maxAttempts, tracked, interrupt, child]`, in plan order; `child`
 * is a compose step's child's or a map step's element reactor's fingerprint.
 */
function encodePlan(parts: PlanParts): unknown[] {
  return [
    ENCODING,
    parts.name,
    parts.returns ?? null,
    parts.handoff?.index ?? null,
    parts.plan.map((step, index) => [
      step.name,
      step.kind,
      [...step.reads],
      [...step.waitFor],
      step.retry.maxAttempts,
      step.tracked,
      step.kind === 'interrupt' ? [interruptGroup(parts.plan, index), step.interrupt?.timeout !== undefined] : null,
      step.child === undefined ? null : planFingerprint(step.child),
    ]),
  ];
}

/** Fingerprint of the plan parts of a definition being built. */
export function fingerprintPlan(parts: PlanParts): string {
  const digest = createHash('sha256').update(JSON.stringify(encodePlan(parts)), 'utf8').digest('hex');
  return `${PREFIX}${digest.slice(0, HEX_LENGTH)}`;
}

/**
 * A stable fingerprint of a reactor's plan: what a stored execution's state means. Two builds
 * whose definitions have the same fingerprint can advance each other's executions.
 *
 * It covers the reactor name; the steps in plan order with, for each, its name, kind, result
 * dependencies and `waitFor` (in declared order), retry `maxAttempts`, whether it is pushed on
 * the undo stack, for an interrupt the group it pauses with and whether it has a timeout, and
 * for a compose step its child's plan fingerprint (for a map step its element reactor's); the
 * hand-off point's plan index; and the `returns` step. It leaves out everything a stored state
 * does not depend on: step bodies (`run`, `compensate`, `undo`, a map's `collect` and
 * `undoAll`), argument wiring other than which results are read, transforms, schemas, retry
 * backoff and delays, interrupt timeout lengths and strategies, interrupt payload attempts, a
 * map's `fanOut`, `batchSize` and `atomic` (stored with each map when it starts), and the
 * reactor's `version` (stored beside the fingerprint).
 *
 * The value is `p1-` and 16 hex digits of a SHA-256 over a canonical encoding: the same in every
 * process and Node version. A built definition carries it as `definition.fingerprint`.
 * @example
 * planFingerprint(checkout) === checkout.fingerprint; // 'p1-…'
 */
export function planFingerprint(definition: AnyReactorDefinition): string {
  return fingerprintPlan(definition);
}

/**
 * The message for an execution whose stored plan fingerprint is not the one this build has for
 * its reactor and version: names both, says the execution stays recoverable and how to advance it.
 * @example
 * describePlanMismatch('checkout', 2, 'p1-0123456789abcdef', 'p1-fedcba9876543210');
 * // 'an execution of reactor "checkout" version 2 was started with plan p1-0123456789abcdef, but
 * //  this build's reactor "checkout" version 2 has plan p1-fedcba9876543210; …'
 */
export function describePlanMismatch(reactor: string, version: number, storedFingerprint: string, ourFingerprint: string): string {
  const which = `reactor "${reactor}" version ${version}`;
  return (
    `an execution of ${which} was started with plan ${storedFingerprint}, but this build's ${which} has plan ${ourFingerprint}; ` +
    'the execution is left as stored and stays recoverable. ' +
    `To advance it, run a build whose ${which} has plan ${storedFingerprint}, ` +
    `or register the old definition (plan ${storedFingerprint}) as version ${version} and declare the changed one with a new version, ` +
    `e.g. defineReactor({ name: "${reactor}", version: ${version + 1} })`
  );
}
