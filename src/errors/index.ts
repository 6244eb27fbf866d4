/**
 * The xreactor error hierarchy. Every error carries a stable `code`; whether a
 * failure may be retried is data (`retryable`), never a check on message text.
 */

/** Field-level problems reported by a Standard Schema validator. */
export interface FieldIssue {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** Options shared by every xreactor error. */
export interface XreactorErrorOptions {
  readonly cause?: unknown;
  readonly step?: string;
  readonly reactor?: string;
  readonly retryable?: boolean;
}

/** Base class of every error xreactor raises or returns. */
export class XreactorError extends Error {
  /** Stable machine-readable code. */
  readonly code: string;
  /** Step the error is attributed to, when there is one. */
  readonly step: string | undefined;
  /** Reactor the error is attributed to, when there is one. */
  readonly reactor: string | undefined;
  /** Whether a retry policy may run the step again after this error. */
  readonly retryable: boolean;

  constructor(code: string, message: string, options: XreactorErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.step = options.step;
    this.reactor = options.reactor;
    this.retryable = options.retryable ?? false;
  }
}

/** A reactor or step definition is invalid. Thrown when the reactor is defined. */
export class DefinitionError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('definition_invalid', message, options);
  }
}

/** A removed option was used in a definition; the message names its replacement. */
export class DeprecatedOptionError extends DefinitionError {}

/** The step graph has a cycle or an unresolved dependency. */
export class DependencyError extends DefinitionError {}

/** Reactor input or a step's input/output contract was violated. Never retried. */
export class InputValidationError extends XreactorError {
  readonly issues: readonly FieldIssue[];
  /** `issues` grouped by dotted path (`''` for the root). */
  readonly fieldErrors: Readonly<Record<string, string[]>>;

  constructor(message: string, issues: readonly FieldIssue[], options: XreactorErrorOptions = {}) {
    super('input_invalid', message, { ...options, retryable: false });
    this.issues = issues;
    const fieldErrors: Record<string, string[]> = {};
    for (const issue of issues) {
      const key = issue.path.join('.');
      // Field names such as "constructor" or "__proto__" must not hit Object.prototype.
      if (!Object.hasOwn(fieldErrors, key)) {
        Object.defineProperty(fieldErrors, key, { value: [], enumerable: true, writable: true, configurable: true });
      }
      fieldErrors[key]!.push(issue.message);
    }
    this.fieldErrors = fieldErrors;
  }
}

/** A step's returned value failed its output contract. The body ran, so the step is compensated. */
export class OutputValidationError extends InputValidationError {}

/** An argument source, path or transform could not be resolved. The body never started. */
export class ArgumentResolutionError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('argument_unresolved', message, { ...options, retryable: false });
  }
}

/** A step's `compensate` failed; the rollback continued. Names the step. */
export class CompensationError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('compensation_failed', message, options);
  }
}

/** An `undo` failed; the rollback continued. */
export class UndoError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('undo_failed', message, options);
  }
}

/** A user `fail(...)` outcome, or a thrown non-Error value, normalised to an Error. */
export class StepFailure extends XreactorError {
  /** The value the step failed with, when it was not an Error. */
  readonly detail: unknown;
  constructor(message: string, options: XreactorErrorOptions & { detail?: unknown } = {}) {
    super('step_failed', message, { retryable: true, ...options });
    this.detail = options.detail;
  }
}

/** A commit was refused because another writer advanced the execution first. */
export class StaleRevisionError extends XreactorError {
  /** The execution whose commit was refused. */
  readonly executionId: string;

  constructor(executionId: string, expected: number, actual: number, refusal?: { readonly code: string; readonly message: string }) {
    super(
      refusal?.code ?? 'stale_revision',
      refusal !== undefined
        ? refusal.message
        : actual === expected
        ? `execution ${executionId} is at revision ${actual}, but its stored snapshot is not the one this commit was computed from (an id reused after its retention expired, or another writer); reload and retry`
        : `execution ${executionId} is at revision ${actual}, not ${expected}: another writer advanced it; reload and retry`,
    );
    this.executionId = executionId;
  }
}

/**
 * A commit refused because the actor's inbox holds a signal the commit was not computed with
 * (code `inbox_pending`): another actor or an operator signalled it since it was loaded. Nothing was
 * written; reload the actor (with its inbox), apply the entries its state accepts, and commit again.
 * A subclass of StaleRevisionError: every caller that reloads on a stale revision reloads here too.
 */
export class MapGateClosedError extends XreactorError {
  /** The map whose gate was closed. */
  readonly map: string;
  /** Why: the stop that closed it (`failed:2`), or the map's status (`cancelled`, `rolling_back`), or `gone`. */
  readonly why: string;

  constructor(executionId: string, map: string, why: string) {
    super('map_gate_closed', `element ${executionId} did not start: its map ${map} no longer dispatches (${why}); nothing was written`);
    this.map = map;
    this.why = why;
  }
}

export class InboxPendingError extends StaleRevisionError {
  /** The highest inbox sequence number the store holds for the actor. */
  readonly inboxSeq: number;

  constructor(executionId: string, revision: number, inboxSeq: number) {
    super(executionId, revision, revision, {
      code: 'inbox_pending',
      message: `actor ${executionId} has a signal in its inbox (entry ${inboxSeq}) this commit was not computed with; reload it, apply its inbox, and commit again`,
    });
    this.inboxSeq = inboxSeq;
  }
}

/**
 * A commit computed ahead of the signal it applies (`Commit.signalAhead`) was refused because that
 * signal had not landed in the actor's inbox under the seq the commit names (code
 * `signal_not_landed`): the sender's commit was refused, or another signal landed first. Nothing
 * was written; the actor applies its inbox as it finds it. A subclass of StaleRevisionError: the
 * commit was computed from a state the store does not hold.
 */
export class SignalNotLandedError extends StaleRevisionError {
  constructor(executionId: string, revision: number, seq: number) {
    super(executionId, revision, revision, {
      code: 'signal_not_landed',
      message: `actor ${executionId}: a commit applying inbox entry ${seq} was computed before that entry's signal landed, and the signal did not land under it; nothing was written`,
    });
  }
}

/** No execution with that id exists (or it expired). */
export class ExecutionNotFoundError extends XreactorError {
  constructor(executionId: string) {
    super('execution_not_found', `execution ${executionId} was not found (unknown id, or its retention expired)`);
  }
}

/** The run was interrupted (its AbortSignal fired, or the runtime is shutting down). No rollback ran. */
export class ExecutionAbortedError extends XreactorError {
  readonly executionId: string;
  constructor(executionId: string, reactor: string, options: XreactorErrorOptions = {}) {
    super(
      'execution_aborted',
      `execution ${executionId} of reactor "${reactor}" was interrupted; no rollback ran. ` +
        'Its completed steps are kept: call undo(id) to roll them back.',
      { ...options, reactor },
    );
    this.executionId = executionId;
  }
}

/** An operator action is not allowed in the execution's current status. */
export class InvalidStateError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('invalid_state', message, options);
  }
}

/** Stored data could not be read: truncated, foreign or of an unknown machine version. */
export class DeserializationError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('deserialization_failed', message, options);
  }
}

/** A reactor name is not registered with the runtime that was asked to run or resume it. */
export class UnknownReactorError extends XreactorError {
  /**
   * @param where who does not know it and how to give it, as the reader would: `this runtime` /
   * `pass it to createRuntime({ reactors })` by default; a worker and the CLI say their own.
   */
  constructor(reactor: string, version?: number, known: readonly number[] = [], where: { readonly who: string; readonly fix: string } = { who: 'this runtime', fix: 'pass it to createRuntime({ reactors })' }) {
    super(
      'reactor_unknown',
      version === undefined || known.length === 0
        ? `reactor "${reactor}" is not registered with ${where.who}; ${where.fix}`
        : `reactor "${reactor}" version ${version} is not registered with ${where.who} (it has version ${known.join(', ')}); register that version's definition too: an execution resumes on the version it started with`,
      { reactor },
    );
  }
}

/**
 * A stored execution was started with a plan this build's definition of its reactor and version
 * does not have (code `plan_mismatch`, retryable: a build with the plan may advance it). The
 * execution is left as stored and stays recoverable.
 */
export class PlanMismatchError extends XreactorError {
  constructor(message: string, reactor: string) {
    super('plan_mismatch', message, { reactor, retryable: true });
  }
}

/**
 * A job that no delivery can ever handle (code `job_rejected`): its payload is malformed, or the
 * actor it addresses does not exist (after a bounded grace), or the actor's stored data is
 * unreadable. Queues fail such a job at once instead of retrying it.
 */
export class JobRejectedError extends XreactorError {
  constructor(message: string, options: XreactorErrorOptions = {}) {
    super('job_rejected', message, { ...options, retryable: false });
  }
}

/** A worker stopped advancing an execution (shutdown or lost lease); nothing was committed, the job is redelivered. */
export class WorkInterruptedError extends XreactorError {
  constructor(executionId: string, why: string) {
    super('work_interrupted', `work on execution ${executionId} was interrupted (${why}); it resumes from its last commit on redelivery`, {
      retryable: true,
    });
  }
}

/** Waiting for a dispatched execution took longer than allowed. */
export class AwaitTimeoutError extends XreactorError {
  constructor(executionId: string, timeoutMs: number, status: string) {
    super('await_timeout', `execution ${executionId} did not settle within ${timeoutMs} ms (it is ${status}); wait longer or check its workers`, {
      retryable: true,
    });
  }
}

/**
 * Redis did not answer a call in time (code `redis_unavailable`, retryable): the server is down,
 * unreachable, or too slow. The message names the address and the call. For a call that writes
 * (a create or a commit) the outcome is unknown: it may still land when the connection comes
 * back, so `executionId` names the execution it was for, and the message says so.
 */
export class RedisUnavailableError extends XreactorError {
  readonly executionId: string | undefined;
  constructor(address: string, call: string, timeoutMs: number, connection: string, executionId?: string, writes = false) {
    const outcome =
      executionId === undefined
        ? ''
        : writes
          ? `; its outcome is unknown: execution ${executionId} may exist (or may still be written once Redis is back): look with find("${executionId}"), or retry run() with executionId "${executionId}" (a retried start with the same input is safe)`
          : ` (for execution ${executionId})`;
    super(
      'redis_unavailable',
      `Redis at ${address} did not answer ${call} within ${timeoutMs} ms (connection: ${connection}): check that the server is running and reachable from this process, and its URL, port, password and TLS settings${outcome}`,
      { retryable: true },
    );
    this.executionId = executionId;
  }
}

/** Background work needs a queue the runtime does not have. */
export class QueueRequiredError extends XreactorError {
  constructor(reactor: string) {
    super('queue_required', `reactor "${reactor}" hands work to a worker, but this runtime has no queue; pass createRuntime({ queue })`);
  }
}

/**
 * A step that reads an async unit (`result(name)` of an asyncStep or asyncReactor) waited longer
 * than allowed for it to settle: `asyncWaitTimeoutMs` in a caller, `asyncParkTimeoutMs` from the
 * unit's dispatch in a worker. The reader fails before its body (it is not compensated) with an
 * {@link ArgumentResolutionError} caused by this one, and its execution rolls back. The unit goes
 * on by itself.
 */
export class AsyncWaitTimeoutError extends XreactorError {
  constructor(unit: string, reader: string, timeoutMs: number, option: 'asyncWaitTimeoutMs' | 'asyncParkTimeoutMs') {
    super(
      'async_wait_timeout',
      `async unit ${unit} did not settle within ${timeoutMs} ms while step "${reader}" waited for it; raise ${option} (createRuntime / createWorker), or read the unit later in the plan`,
      { step: reader, retryable: false },
    );
  }
}

/** A paused interrupt was not continued in time. */
export class InterruptTimeoutError extends XreactorError {
  constructor(executionId: string, step: string, timeoutMs: number) {
    super('interrupt_timeout', `interrupt "${step}" of execution ${executionId} was not continued within ${timeoutMs} ms`, { step });
  }
}
