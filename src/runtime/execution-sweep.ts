/**
 * What a sweep does for an execution actor: the execution kind's answer to
 * `ActorBehaviour.sweep`. It reads only the stored snapshot (tags and context), never the
 * reactor, so a sweeper that does not know the reactor still recovers the execution (its job goes
 * to a worker that does).
 */
import { ArgumentResolutionError, XreactorError } from '../errors/index.js';
import { unitGoneError, unitTimeoutError } from './async-units.js';
import { serializeError } from '../serialization/index.js';
import type { ExecutionContext } from '../../machines/execution-types.js';
import { statusOf, tagsOf, undoSettledOf } from '../../machines/registry.js';
import type { LoadedExecution } from '../store/store.js';
import type { SweepLook, SweepVerdict } from './actor-host.js';

/**
 * The sweep verdict of execution `id`, stored as `found`, at time `now`: unconsumed signals or a
 * recoverable state → a job; parked past its backoff → deliver the timer itself (its delayed job
 * was lost or failed for good); awaiting an actor that settled for what it waits for (any end for
 * a run; the end of its undo for an undo, `undoSettledOf`) → deliver its end; awaiting one that is
 * gone → deliver its loss (an undo) or the compose step's failure (a run); else keep or drop.
 */
export async function sweepExecution(id: string, found: LoadedExecution, look: SweepLook, now: number): Promise<SweepVerdict> {
  const tags = tagsOf(found.snapshot.kind, found.snapshot.value);
  const context = found.snapshot.context as ExecutionContext;
  if (found.inbox.entries.length > 0) return { action: 'job' };
  if (tags.has('parked') && context.parkedUntil != null) {
    // Its delayed wake is the timer job; should that job be lost or failed for good, a sweep
    // delivers the timer itself once the backoff is over (never early; a duplicate is ignored).
    if (now < context.parkedUntil) return { action: 'keep' };
    return { action: 'deliver', event: { type: 'xreactor.timer.fired', at: now, index: context.cursor, attempt: context.attempt } };
  }
  if (tags.has('recoverable')) return { action: 'job' };
  if (tags.has('awaiting')) {
    const awaiting = context.awaiting;
    if (awaiting === null) return { action: 'job' };
    if (awaiting.kind === 'unit') return sweepUnitWait(id, context, awaiting, look, now);
    const child = await look(awaiting.child);
    if (child === 'not_here') return { action: 'keep' };
    if (child === undefined) {
      if (awaiting.purpose === 'undo') return { action: 'deliver', event: { type: 'xreactor.child.lost', at: now, child: awaiting.child } };
      const error = new XreactorError('context_unavailable', `composed execution ${awaiting.child} is gone (its retention expired, or its data is unreadable) while ${id} awaited it`);
      return { action: 'deliver', event: { type: 'xreactor.step.failed', at: now, index: awaiting.index, attempt: awaiting.attempt, error: serializeError(error), started: false, retryable: false, args: awaiting.args } };
    }
    // Settled for what the parent waits for: any end for a run; for an undo, only the end of
    // the undo (a child still completed, halted or aborted has the undo in its inbox: it is swept itself).
    const { kind, value } = child.snapshot;
    const done = awaiting.purpose === 'run' ? tagsOf(kind, value).has('settled') : undoSettledOf(kind, value);
    if (done) return { action: 'deliver', event: { type: 'xreactor.child.settled', at: now, child: awaiting.child, status: statusOf(kind, value) } };
    return { action: 'keep' };
  }
  return { action: 'drop' };
}

/**
 * An execution whose step waits for an async unit, with no live lease: the unit's settle signal
 * lands in its inbox atomically (a sweep of that is a job, above), so what can be lost is the
 * delayed job timing the wait out, or the unit itself: past its `until` → the reader's timeout;
 * the unit gone → the reader's failure; else keep.
 */
async function sweepUnitWait(id: string, context: ExecutionContext, awaiting: NonNullable<ExecutionContext['awaiting']>, look: SweepLook, now: number): Promise<SweepVerdict> {
  const unit = await look(awaiting.child);
  if (unit === 'not_here') return { action: 'keep' };
  const source = awaiting.child.slice(id.length + 1);
  const fail = (cause: Error): SweepVerdict => ({ action: 'deliver', event: readerFailureEvent(now, context.reactor, awaiting, source, cause) });
  if (unit === undefined) return fail(unitGoneError(awaiting.child));
  if (tagsOf(unit.snapshot.kind, unit.snapshot.value).has('settled')) return { action: 'deliver', event: { type: 'xreactor.unit.settled', at: now, child: awaiting.child } };
  if (awaiting.until != null && now >= awaiting.until) {
    // The wait's length: from the unit's dispatch (its creation) to `until`.
    const unitContext = unit.snapshot.context as { readonly dispatchedAt?: number; readonly origin?: { readonly createdAt: number } };
    const dispatchedAt = unitContext.dispatchedAt ?? unitContext.origin?.createdAt ?? awaiting.until;
    const failed = readerFailureEvent(now, context.reactor, awaiting, source, unitTimeoutError(awaiting.child, awaiting.step, awaiting.until - dispatchedAt, 'asyncParkTimeoutMs'));
    return { action: 'deliver', event: { ...failed, type: 'xreactor.unit.timedOut', unit: awaiting.child } };
  }
  return { action: 'keep' };
}

function readerFailureEvent(at: number, reactor: string, awaiting: NonNullable<ExecutionContext['awaiting']>, source: string, cause: Error) {
  const error = new ArgumentResolutionError(`reactor "${reactor}" step "${awaiting.step}": argument from result("${source}") cannot be resolved: ${cause.message}`, { step: awaiting.step, reactor, cause });
  return { type: 'xreactor.step.failed', at, index: awaiting.index, attempt: awaiting.attempt, error: serializeError(error), started: false, retryable: false, args: undefined };
}
