import { randomUUID } from 'node:crypto';
import type { ExecutionEvent } from '../../machines/execution-types.js';
import { ExecutionNotFoundError, InputValidationError, InterruptTimeoutError, InvalidStateError, StaleRevisionError } from '../errors/index.js';
import type { ExecutionId } from '../internal/ids.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import { serializeError } from '../serialization/index.js';
import type { Engine } from './engine.js';
import type { ExecutionHost, HeldExecution, Place } from './host.js';
import type { HeldLease } from './lease.js';
import { statusOf } from './host.js';
import { CORRELATION_TTL_MS, descendantId } from './lineage.js';
import type { AnyReactorDefinition } from '../definition/compiled.js';

/** The run is paused at interrupts; continue it with `continue(id, { step, payload })`. */
export interface PausedResult {
  readonly status: 'paused';
  readonly executionId: ExecutionId;
  /** Interrupts that may be continued: a name, or a path through compose steps (`['approval', 'manager']`). */
  readonly readyInterrupts: readonly (string | readonly string[])[];
}

/** Which interrupt to continue, and with what. */
export interface ContinueRequest {
  /** The interrupt's name, or its path through compose steps. */
  readonly step: string | readonly string[];
  readonly payload: unknown;
}

/** The claim a valid resume of interrupt `name` of execution `executionId` takes. */
const claimKey = (executionId: string, name: string) => `interrupt:${executionId}:${name}`;

interface Loaded {
  readonly definition: AnyReactorDefinition;
  readonly host: ExecutionHost;
  readonly held: HeldExecution;
}

/** Interrupts ready to be continued in a paused execution, as names or paths. */
export async function readyInterrupts(engine: Engine, held: HeldExecution): Promise<(string | string[])[]> {
  const paused = held.snapshot.context.paused;
  if (paused === null) return [];
  if (paused.child === null) return paused.ready.map((r) => r.step);
  const child = await engine.load(descendantId(held.id, [paused.child]));
  const nested = await readyInterrupts(engine, child.held);
  return nested.map((p) => [paused.child!, ...(typeof p === 'string' ? [p] : p)]);
}

function refuseUnlessPaused(id: string, status: string): void {
  const why: Record<string, string> = {
    completed: 'it finished (completed); there is nothing to continue',
    failed: 'it finished (failed); there is nothing to continue',
    halted: 'it finished (halted); there is nothing to continue',
    cancelled: 'it was cancelled; resumption is refused after a cancel',
    aborted: 'it was interrupted (aborted); undo it with undo(id) or start a new run',
    rolling_back: 'it is rolling back',
    running: 'it is running, not paused at an interrupt',
    pending: 'it has not started',
  };
  if (status !== 'paused') throw new InvalidStateError(`cannot continue execution ${id}: ${why[status] ?? status}`);
}

/**
 * Walk from the root through the paused compose steps of `composePath`. `broken` is the step the
 * last link of `chain` is not paused on (it waits on something else, or has moved on); undefined
 * when the walk reached the execution that owns the interrupt.
 */
async function descend(engine: Engine, root: Loaded, composePath: readonly string[]): Promise<{ chain: Loaded[]; broken: string | undefined }> {
  const chain: Loaded[] = [root];
  for (const step of composePath) {
    const current = chain[chain.length - 1]!;
    if (current.held.snapshot.context.paused?.child !== step) return { chain, broken: step };
    chain.push(await engine.load(descendantId(current.held.id, [step])));
  }
  return { chain, broken: undefined };
}

/**
 * Apply a validated resume (or an interrupt failure) to the execution at the
 * end of `chain`, then let every parent pick up its child's new state, up to
 * the root. Runs under the root's lease.
 */
async function applyAndPropagate(chain: readonly Loaded[], event: ExecutionEvent, signal: AbortSignal, place: Place): Promise<void> {
  const target = chain[chain.length - 1]!;
  const accepted = await target.host.drive(target.held, event, signal, place);
  // Refused by a child that was cancelled, aborted or undone meanwhile, or that still waits:
  // its parents have nothing to pick up; resuming them would find the child unfinished and fail
  // the compose step, rolling back a run nobody asked to roll back. Refused by one that moved on
  // (a redelivery after the process that applied the event died): they pick up its new state.
  if (!accepted && !movedOn(target)) return;
  await propagate(chain.slice(0, -1), event.at, signal, place);
}

/** Let each parent in `parents` (root first) pick up its child's new state, innermost first. */
async function propagate(parents: readonly Loaded[], at: number, signal: AbortSignal, place: Place): Promise<void> {
  for (let i = parents.length - 1; i >= 0; i -= 1) {
    const parent = parents[i]!;
    await parent.host.drive(parent.held, { type: 'xreactor.execution.resume', at }, signal, place);
  }
}

/** A checked resume: the event to deliver to the interrupt at `path` under the root. */
export interface PreparedResume {
  readonly path: readonly string[];
  /** `xreactor.interrupt.resume`, or `xreactor.interrupt.fail` (attempts exhausted, timed out). */
  readonly event: ExecutionEvent;
}

/**
 * Check a resume in the caller, without the lease: refusals are clear errors
 * (finished, cancelled, aborted, rolling back, unknown or not-ready interrupt,
 * already resumed); the payload is validated here, and an invalid one throws
 * InputValidationError storing nothing but the attempt count, until
 * `maxAttempts` turns it into a failure of the interrupt. A valid payload
 * claims the interrupt: a second resume of it is refused.
 */
export async function prepareResume(engine: Engine, id: string, request: ContinueRequest): Promise<PreparedResume> {
  const path = typeof request.step === 'string' ? [request.step] : [...request.step];
  const name = path[path.length - 1];
  if (name === undefined) throw new InvalidStateError('continue needs the interrupt to continue: { step: name } or { step: [composeStep, ..., name] }');
  const root = await engine.load(id);
  // A resume that races the winning one may find the run already moving on: the claim says why.
  if ((await engine.store.readClaim(claimKey(descendantId(id, path.slice(0, -1)), name))) !== undefined) {
    throw new InvalidStateError(`cannot resume interrupt "${path.join('.')}": it was already resumed`);
  }
  refuseUnlessPaused(id, statusOf(root.held.snapshot.value));
  const { chain, broken } = await descend(engine, root, path.slice(0, -1));
  if (broken !== undefined) {
    const pending = await readyInterrupts(engine, root.held);
    throw new InvalidStateError(`cannot continue ${JSON.stringify(path)}: "${broken}" is not a paused composed child; ready interrupts: ${JSON.stringify(pending)}`);
  }
  const target = chain[chain.length - 1]!;
  const step = target.definition.steps.find((s) => s.name === name);
  const ready = target.held.snapshot.context.paused?.ready ?? [];
  const pending = JSON.stringify(await readyInterrupts(engine, root.held));
  if (step?.kind !== 'interrupt') throw new InvalidStateError(`"${path.join('.')}" is not an interrupt of reactor "${target.definition.name}"; ready interrupts: ${pending}`);
  const entry = ready.find((r) => r.step === name);
  if (entry === undefined) {
    if (target.held.snapshot.context.resumed.includes(name)) throw new InvalidStateError(`cannot resume interrupt "${path.join('.')}": it was already resumed`);
    throw new InvalidStateError(`interrupt "${path.join('.')}" is not ready (its dependencies have not completed); ready interrupts: ${pending}`);
  }
  const { store, clock } = engine;
  const interrupt = step.interrupt!;
  const fail = (error: Error): PreparedResume => ({ path, event: { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error) } });
  if (entry.timeoutAt !== null && clock.now() > entry.timeoutAt) return fail(new InterruptTimeoutError(target.held.id, name, interrupt.timeout!.ms));
  let payload = request.payload;
  if (interrupt.payload !== undefined) {
    const checked = await validateWith(interrupt.payload, payload);
    if (!checked.ok) {
      const attempts = await store.increment(`attempts:${target.held.id}:${name}`, CORRELATION_TTL_MS);
      if (attempts >= interrupt.maxAttempts) {
        return fail(new InputValidationError(`interrupt "${name}": payload invalid after ${attempts} attempt(s): ${describeIssues(checked.issues)}`, checked.issues, { step: name }));
      }
      throw new InputValidationError(
        `interrupt "${name}": payload is invalid (${attempts} of ${interrupt.maxAttempts} attempts used): ${describeIssues(checked.issues)}`,
        checked.issues,
        { step: name },
      );
    }
    payload = checked.value;
  }
  const token = randomUUID();
  if ((await store.claim(claimKey(target.held.id, name), token, CORRELATION_TTL_MS)) !== token) {
    throw new InvalidStateError(`cannot resume interrupt "${path.join('.')}": it was already resumed`);
  }
  return { path, event: { type: 'xreactor.interrupt.resume', at: clock.now(), step: name, payload } };
}

/**
 * Deliver an interrupt event (a resume a worker applies, or an active timeout)
 * to the interrupt at `path` under the root, then let the parents pick it up.
 * Ignored when that interrupt is no longer waiting. Must run under the root's lease.
 * Returns false when the root is not paused at all (it moved on: the event was delivered
 * before, by a process that may have died since), true otherwise. `lease` is the root's lease
 * the caller holds: the root's commit that hands the run off or ends it releases it.
 */
export async function deliverAtPath(
  engine: Engine,
  rootId: string,
  path: readonly string[],
  event: ExecutionEvent,
  signal: AbortSignal,
  place: Place,
  lease?: HeldLease,
  again = true,
): Promise<boolean> {
  const root = await engine.load(rootId);
  if (statusOf(root.held.snapshot.value) !== 'paused') return false;
  if (lease !== undefined) root.held.lease = lease;
  // Down through the paused compose steps to the interrupt's execution. A link that is no longer
  // paused on the next one and has moved on (this is a redelivery after the process that applied
  // the event died): the links above it pick up its new state, as they would have then.
  const { chain, broken } = await descend(engine, root, path.slice(0, -1));
  if (broken === undefined) {
    await applyAndPropagate(chain, event, signal, place);
    return true;
  }
  const link = chain[chain.length - 1]!;
  if (chain.length > 1 && movedOn(link)) {
    await propagate(chain.slice(0, -1), event.at, signal, place);
    // A link running only to pick up another interrupt of the same execution re-pauses on this
    // one: the event was never applied. Look once more.
    if (again) await deliverAtPath(engine, rootId, path, event, signal, place, lease, false);
  }
  return true;
}

/**
 * Statuses of a composed child whose parents must pick up its state: it runs, it ended by itself,
 * or it rolls back by itself (see childMovedOn). Not a child that was cancelled, aborted or is being
 * undone by an operator, or that still waits.
 */
const MOVED_ON: readonly string[] = ['running', 'completed', 'failed', 'halted'];

function movedOn(link: Loaded): boolean {
  return childMovedOn(statusOf(link.held.snapshot.value), link.held.snapshot.context);
}

/** Whether a composed child in `status` has moved on (see MOVED_ON); its parent must pick it up. */
export function childMovedOn(status: string, context: { readonly rollbackReason?: string | null }): boolean {
  // A rollback it began by itself (an interrupt failure, a failed step) is an end in progress.
  if (status === 'rolling_back') return context.rollbackReason !== 'operator';
  return MOVED_ON.includes(status);
}

/**
 * Cancel a run and the composed child it waits on (paused there, or running its steps): no
 * rollback; resumption is refused afterwards. The child is cancelled first, so the process
 * advancing it has its next commit refused and runs none of the child's remaining steps.
 */
export async function cancelUnderLease(engine: Engine, id: string, reason: string, signal: AbortSignal): Promise<void> {
  const loaded = await engine.load(id);
  const status = statusOf(loaded.held.snapshot.value);
  if (status === 'rolling_back') throw new InvalidStateError(`cannot cancel execution ${id}: a rollback is in progress`);
  if (status !== 'paused' && status !== 'running') throw new InvalidStateError(`cannot cancel execution ${id}: it is ${status}; only running or paused runs can be cancelled`);
  const child = childInFlight(loaded);
  const childId = child === undefined ? undefined : descendantId(id, [child]);
  if (childId !== undefined) await cancelChild(engine, id, childId, reason, signal, 'refuse_rollback');
  await loaded.host.drive(loaded.held, { type: 'xreactor.operator.cancel', at: engine.clock.now(), reason }, signal, 'caller');
  // A child created while this cancel was under way (its parent had just moved into the compose
  // step): cancel it too. One created after this look sees its parent cancelled and stops itself.
  if (childId !== undefined) await cancelChild(engine, id, childId, reason, signal, 'leave_rollback');
}

/**
 * Cancel the composed child `childId` of `parentId` if it is running or paused; nothing to do for
 * one not created yet or ended. A child rolling back refuses the parent's cancel (before the
 * parent is cancelled) or is left to finish (after). A refusal from further down (a grandchild
 * rolling back) is passed on; the child's process committing first is retried.
 */
async function cancelChild(engine: Engine, parentId: string, childId: string, reason: string, signal: AbortSignal, rollingBack: 'refuse_rollback' | 'leave_rollback'): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const stored = await engine.store.load(childId);
    const now = stored === undefined ? undefined : statusOf(stored.snapshot.value);
    if (now === 'rolling_back' && rollingBack === 'refuse_rollback') {
      throw new InvalidStateError(`cannot cancel execution ${parentId}: its composed child ${childId} is rolling back`);
    }
    if (now !== 'running' && now !== 'paused') return;
    try {
      await cancelUnderLease(engine, childId, reason, signal);
      return;
    } catch (error) {
      // Refused although the child is still running or paused: the refusal came from further down.
      const moved = error instanceof StaleRevisionError || error instanceof ExecutionNotFoundError || error instanceof InvalidStateError;
      if (!moved || attempt >= 5) throw error;
      const after = await engine.store.load(childId);
      if (error instanceof InvalidStateError && after !== undefined && ['running', 'paused'].includes(statusOf(after.snapshot.value))) throw error;
    }
  }
}

/** The compose step whose child this run waits on: paused there, or running at the cursor. */
function childInFlight(loaded: Loaded): string | undefined {
  const { context } = loaded.held.snapshot;
  if (context.paused?.child != null) return context.paused.child;
  if (statusOf(loaded.held.snapshot.value) !== 'running') return undefined;
  const step = loaded.definition.plan[context.cursor];
  return step?.kind === 'compose' ? step.name : undefined;
}
