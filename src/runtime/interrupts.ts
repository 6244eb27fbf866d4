import type { ExecutionContext, ExecutionEvent } from '../../machines/execution-types.js';
import { ExecutionNotFoundError, InputValidationError, InterruptTimeoutError, InvalidStateError, StaleRevisionError } from '../errors/index.js';
import type { ExecutionId } from '../internal/ids.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import { serializeError } from '../serialization/index.js';
import type { Engine } from './engine.js';
import { newCall } from './call.js';
import { jobId } from '../queue/job-ids.js';
import { statusOf } from './host.js';
import { CORRELATION_TTL_MS, descendantId, interruptKey } from './lineage.js';

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

/** Interrupts ready to be continued in a paused execution, as names or paths (as its children reported them). */
export function readyInterrupts(context: Pick<ExecutionContext, 'interrupts'>): (string | string[])[] {
  const paused = context.interrupts.paused;
  if (paused === null) return [];
  const nested = paused.nested.map((p) => [paused.child!, ...(typeof p === 'string' ? [p] : p)]);
  return [...paused.ready.map((r) => r.step), ...(paused.child === null ? [] : nested)];
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

/** A checked resume: the signal to deliver to the execution that owns the interrupt. */
export interface PreparedResume {
  readonly path: readonly string[];
  /** The execution the interrupt belongs to: the root, or a composed child `<root>.<step>...`. */
  readonly owner: string;
  /** `xreactor.interrupt.resume`, or `xreactor.interrupt.fail` (attempts exhausted, timed out). */
  readonly event: ExecutionEvent;
  /** The interrupt's dedupe key: whichever of a continue and a timeout lands first is the only one. */
  readonly dedupeKey: string;
}

/**
 * Check a resume in the caller, without the lease: refusals are clear errors
 * (finished, cancelled, aborted, rolling back, unknown or not-ready interrupt,
 * already resumed); the payload is validated here, and an invalid one throws
 * InputValidationError storing nothing but the attempt count, until
 * `maxAttempts` turns it into a failure of the interrupt.
 */
export async function prepareResume(engine: Engine, id: string, request: ContinueRequest): Promise<PreparedResume> {
  const path = typeof request.step === 'string' ? [request.step] : [...request.step];
  const name = path[path.length - 1];
  if (name === undefined) throw new InvalidStateError('continue needs the interrupt to continue: { step: name } or { step: [composeStep, ..., name] }');
  const root = await engine.load(id);
  const owner = descendantId(id, path.slice(0, -1));
  const target = path.length === 1 ? root : await engine.load(owner).catch((error: unknown) => {
    if (!(error instanceof ExecutionNotFoundError)) throw error;
    return undefined;
  });
  // A resume that races the winning one may find the run already moving on: say why.
  if (target?.held.snapshot.context.interrupts.resumed.includes(name) === true) throw new InvalidStateError(`cannot resume interrupt "${path.join('.')}": it was already resumed`);
  refuseUnlessPaused(id, statusOf(root.held.snapshot.value));
  const pending = JSON.stringify(readyInterrupts(root.held.snapshot.context));
  if (target === undefined || statusOf(target.held.snapshot.value) !== 'paused') {
    throw new InvalidStateError(`cannot continue ${JSON.stringify(path)}: ${owner} is not a paused composed child; ready interrupts: ${pending}`);
  }
  const step = target.definition.steps.find((s) => s.name === name);
  const ready = target.held.snapshot.context.interrupts.paused?.ready ?? [];
  if (step?.kind !== 'interrupt') throw new InvalidStateError(`"${path.join('.')}" is not an interrupt of reactor "${target.definition.name}"; ready interrupts: ${pending}`);
  const entry = ready.find((r) => r.step === name);
  if (entry === undefined) throw new InvalidStateError(`interrupt "${path.join('.')}" is not ready (its dependencies have not completed); ready interrupts: ${pending}`);
  const { store, clock } = engine;
  const interrupt = step.interrupt!;
  const fail = (error: Error): PreparedResume => ({ path, owner, dedupeKey: interruptKey(name), event: { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error) } });
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
  return { path, owner, dedupeKey: interruptKey(name), event: { type: 'xreactor.interrupt.resume', at: clock.now(), step: name, payload } };
}

/**
 * Cancel a run: one signal from the root, cascading to every actor it awaits (the composed child it
 * runs or is paused on, and theirs), in one atomic step; refused, with nothing delivered, while
 * any of them rolls back. From then on no commit of the tree computed without the cancel can land,
 * so no further step starts. The cancel is then applied to each of them here, fenced by revision
 * (a process advancing one of them has its next commit refused and finds it cancelled).
 */
export async function cancelTree(engine: Engine, id: string, reason: string, signal: AbortSignal): Promise<void> {
  const { held } = await engine.load(id);
  const status = statusOf(held.snapshot.value);
  if (status === 'rolling_back') throw new InvalidStateError(`cannot cancel execution ${id}: it is rolling back; wait for the rollback to finish`);
  if (status !== 'paused' && status !== 'running') throw new InvalidStateError(`cannot cancel execution ${id}: it is ${status}; only running or paused runs can be cancelled`);
  const event: ExecutionEvent = { type: 'xreactor.operator.cancel', at: engine.clock.now(), reason };
  const receipt = await engine.store.signal({ to: id, event: event, dedupeKey: 'operator.cancel', cascade: true }, { refuseIn: ['rolling_back'] });
  if (receipt.refusedBy !== undefined) {
    const who = receipt.refusedBy.id === id ? 'it is rolling back; wait for the rollback to finish' : `its composed child ${receipt.refusedBy.id} is rolling back`;
    throw new InvalidStateError(`cannot cancel execution ${id}: ${who}`);
  }
  for (const actor of receipt.landed) await applyInbox(engine, actor, signal);
}

/**
 * Apply an actor's inbox here, without its lease, fenced by its revision: another process that
 * commits first (or applies the same entries) wins, and this looks again. An actor of another
 * kind than execution (a map operation the cancel cascaded to) is applied by its kind's host.
 */
export async function applyInbox(engine: Engine, id: string, signal: AbortSignal): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const stored = await engine.store.load(id);
      if (stored === undefined) return;
      if (stored.snapshot.kind !== 'execution') return await applyKindInbox(engine, id, stored.snapshot.kind, signal);
      // The execution as just read (one read, not two): its host loads the input beside it.
      const host = engine.register(engine.definitionOf(stored.snapshot.context as { reactor: string }));
      const held = await host.load(id, stored);
      if (held === undefined) return;
      await host.resume(held, [], signal, 'caller');
      return;
    } catch (error) {
      if (error instanceof ExecutionNotFoundError) return;
      if (!(error instanceof StaleRevisionError) || attempt >= 5) throw error;
    }
  }
}

/**
 * Apply the inbox of an actor of another kind under its lease, with its kind's host. One another
 * process holds meets the signal at its next commit; a wake job covers that process being gone.
 */
async function applyKindInbox(engine: Engine, id: string, kind: string, signal: AbortSignal): Promise<void> {
  const lease = engine.lease(id);
  try {
    const found = await engine.loadLeased(lease);
    if (found === 'missing') return;
    if (found === 'busy') {
      await engine.queue?.enqueue([{ id: jobId(id, 'wake', engine.clock.now()), kind: 'advance', actor: { kind, id } }]);
      return;
    }
    await found.loop.resume(found.held as never, [], newCall(signal, 'caller'));
  } finally {
    await lease.end();
  }
}
