import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { ExecutionStatus } from '../../machines/execution-types.js';
import type { AnyReactorDefinition, ModeOf, ReactorDefinition, RunMode } from '../definition/compiled.js';
import { AwaitTimeoutError, DefinitionError, DeserializationError, RedisUnavailableError, ExecutionAbortedError, ExecutionNotFoundError, InvalidStateError, StaleRevisionError, XreactorError } from '../errors/index.js';
import type { ExecutionId, IdGenerator } from '../internal/ids.js';
import { createInProcessQueue } from '../queue/in-process-queue.js';
import type { Consumer, Queue } from '../queue/queue.js';
import { createMemoryStore } from '../store/memory-store.js';
import type { LoadOptions, SettledNotice, Store } from '../store/store.js';
import type { Engine, EngineOptions } from './engine.js';
import { createEngine } from './engine.js';
import { checkBackendOptions } from './backend.js';
import { mapIdOf } from './map.js';
import { isMapResultsRef, mapResultsOf } from './map-results.js';
import type { Backend } from './backend.js';
import { markStale } from './actor-host.js';
import { newCall } from './call.js';
import { statusOf } from './host.js';
import type { CancelledResult, DispatchedResult, ExecutionView, FailedResult, MapProgress, RunResult } from './results.js';
import { buildResult, returnsOf } from './results.js';
import { unitView } from './async-units.js';
import { createJobHandler } from './worker.js';
import type { ContinueRequest, PausedResult } from './interrupts.js';
import { cancelTree, prepareResume, readyInterrupts } from './interrupts.js';
import { executionTagsOf } from '../../machines/execution.js';
import { jobId } from '../queue/job-ids.js';
import { correlationKey } from './lineage.js';
import type { HeldExecution } from './host.js';
import type { HeldLease } from './lease.js';
import type { ExecutionContext, ExecutionEvent } from '../../machines/execution-types.js';
import { isDeepStrictEqual } from 'node:util';
import { validateWith } from '../internal/standard-schema.js';
import { decode, encode } from '../serialization/index.js';

/** Options of {@link createRuntime}. All optional: the default is fully embedded. */
export interface RuntimeOptions extends Omit<EngineOptions, 'store' | 'queue'> {
  /**
   * Where execution actors live.
   * @defaultValue an in-memory store
   */
  readonly store?: Store;
  /**
   * Where hand-offs and worker timers go.
   * @defaultValue an in-process queue in auto mode, consumed by this runtime
   */
  readonly queue?: Queue;
  /**
   * A store and queue the runtime takes over (`connectRedis()` from `xreactor/redis`): `close()`
   * closes them. Instead of `store` and `queue`, which stay the caller's to close.
   */
  readonly backend?: Backend;
  /**
   * Whether this runtime also consumes its queue (an embedded worker).
   * @defaultValue true when neither `queue` nor `backend` is given, false otherwise
   */
  readonly worker?: boolean | { readonly concurrency?: number };
  /**
   * Execution id generator.
   * @defaultValue `crypto.randomUUID`
   */
  readonly generateId?: IdGenerator;
}

/** How often `awaitResult` looks again at a pause that was continued but not yet taken up above. */
const RESUMING_POLL_MS = 20;

/** Options of a single run. */
export interface RunOptions {
  /** Interrupts the run: no rollback runs, the execution is stored `aborted` and `run` rejects with ExecutionAbortedError. */
  readonly signal?: AbortSignal;
  /**
   * Use this id instead of a generated one: non-empty, without `.` (a composed child's id is
   * `<root>.<step>`, and on Redis the part before the first `.` is the hash tag of a whole run).
   * A retried start is safe: when the id exists, with the same reactor and the same input (as
   * validated), `run` returns that execution's current outcome and runs nothing again (its
   * result, `failed`, `paused`, or `dispatched` while it is handed off or another process runs
   * it, `run_busy`); a run whose first call gave up (a Redis timeout, a dead process) is taken
   * up by the retry from its stored state. With another input or reactor it throws
   * `execution_exists` naming both.
   */
  readonly executionId?: string;
}

/** Options of {@link Runtime.awaitResult}. */
export interface AwaitOptions {
  /**
   * Give up after this long with an AwaitTimeoutError.
   * @defaultValue 30000
   */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** The caller's input type of a reactor definition. */
export type RunInput<R> = R extends ReactorDefinition<string, infer I, any, any, RunMode> ? I : never;
/** The completed value type of a reactor definition. */
export type RunOutput<R> = R extends ReactorDefinition<string, any, any, infer O, RunMode> ? O : never;
/** What `run` returns for a reactor: its outcome, or `dispatched` for a background reactor. */
export type RunReturn<R> =
  | RunResult<RunOutput<R>>
  | ('background' extends ModeOf<R> ? DispatchedResult : never)
  | ('pause' extends ModeOf<R> ? PausedResult : never);

/**
 * What `continue` returns: the run's new outcome (paused again, finished, or failed), or
 * `cancelled` when an operator's cancel reached it first and this call applied it.
 */
export type ContinueResult = RunResult<unknown> | PausedResult | CancelledResult;

/** A runtime: runs reactors, finds executions, undoes them, waits for dispatched ones. */
export interface Runtime {
  /**
   * Run a reactor. Inline reactors run to their end in this process; a
   * background reactor runs up to its hand-off point and returns `dispatched`.
   * @example
   * const result = await runtime.run(checkout, { sku: 'A1', cents: 1200 });
   * if (result.status === 'completed') console.log(result.value);
   */
  run<R extends AnyReactorDefinition>(reactor: R, input: RunInput<R>, options?: RunOptions): Promise<RunReturn<R>>;
  /** Wait until a (dispatched) execution settles and return its outcome. Works from any process sharing the store. */
  awaitResult<TOutput = unknown>(id: string, options?: AwaitOptions): Promise<RunResult<TOutput> | CancelledResult | PausedResult>;
  /** Status, outcome, undo stack and trace of an execution. */
  find(id: string): Promise<ExecutionView>;
  /**
   * Continue a paused run at an interrupt with a payload (validated here, in the
   * caller). Returns the run's new outcome. Nested interrupts are addressed by
   * path: `{ step: ['approval', 'managerSignOff'] }`.
   * @example
   * await runtime.continue(id, { step: 'approval', payload: { approved: true } });
   */
  continue(id: string, request: ContinueRequest, options?: { readonly signal?: AbortSignal }): Promise<ContinueResult | DispatchedResult>;
  /** Continue the run whose interrupt declared this correlation id. */
  continueByCorrelationId(correlationId: string, request: { readonly payload: unknown }, options?: { readonly signal?: AbortSignal }): Promise<ContinueResult | DispatchedResult>;
  /** Cancel a running or paused run: no rollback; it ends `cancelled` and cannot be resumed. Refused while rolling back. */
  cancel(id: string, reason: string): Promise<CancelledResult>;
  /**
   * Roll back a completed, halted, paused or aborted execution (re-running a cut-off compensate
   * first); it ends `cancelled`. When part of the rollback runs in workers (the elements of a
   * fan-out map), the call returns `dispatched` (reason `awaiting`) once the rest is theirs:
   * `awaitResult(id)` gives the `cancelled` outcome. Refused while the execution rolls back.
   * @example
   * const undone = await runtime.undo(id);
   * const outcome = undone.status === 'dispatched' ? await runtime.awaitResult(id) : undone;
   */
  undo(id: string, options?: { readonly signal?: AbortSignal }): Promise<CancelledResult | DispatchedResult>;
  /**
   * Re-enqueue executions that are running or rolling back with no live lease
   * (their process died). Never touches aborted runs. Returns how many were re-enqueued.
   * Each call looks at the next `limit` entries of the index (default 1,000) after those the
   * previous call looked at, starting over from the oldest after the last.
   */
  sweepOnce(options?: { readonly limit?: number }): Promise<number>;
  /**
   * Interrupt every run in progress (as on SIGTERM): runs this runtime's callers are advancing are
   * stored `aborted` (no rollback runs); jobs its embedded worker is handling stop without
   * committing and are delivered again.
   */
  shutdown(reason?: string): void;
  /** Stop the embedded worker (if any) and release the store and queue this runtime created. */
  close(): Promise<void>;
}

const SETTLED: readonly ExecutionStatus[] = ['completed', 'failed', 'halted', 'cancelled'];

/** What a stored execution waits for (see ExecutionView.waiting), from its state's tags. */
function waitingOf(value: unknown, context: { readonly awaiting: ExecutionContext['awaiting']; readonly cursor: number; readonly reactor: string }, plan?: AnyReactorDefinition): ExecutionView['waiting'] {
  const tags = executionTagsOf(value);
  if (tags.has('awaiting') && context.awaiting !== null) return { on: 'actors', step: context.awaiting.step, actors: [context.awaiting.child] };
  if (tags.has('parked')) return { on: 'time', step: plan?.plan[context.cursor]?.name ?? `#${context.cursor}` };
  // Handed off, and no worker has taken it up yet.
  if (typeof value === 'object' && value !== null && (value as { running?: unknown }).running === 'handedOff') return { on: 'worker' };
  return undefined;
}

/** Stored data that cannot be read is reported as a failed execution whose error says what was wrong. */
function unreadable(id: string, error: DeserializationError): FailedResult {
  return { status: 'failed', executionId: id as ExecutionId, error, step: undefined, message: error.message, rollbackFailures: [], validationErrors: undefined };
}

/** A read whose DeserializationError becomes its value instead of an exception. */
async function orUnreadable<T>(read: Promise<T>): Promise<T | DeserializationError> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof DeserializationError) return error;
    throw error;
  }
}

/**
 * Whether a settle notice answers `awaitResult` without a load: written after the state the
 * last look read (a notice published before it, still on its way, is stale: the run may have
 * been undone since), of an execution that ended (settled or aborted) and, when it completed,
 * with every result its outcome reads (`results`, as the last look said; `'all'`, or not known:
 * a notice never carries them all).
 */
function answeredBy(notice: SettledNotice, last: { readonly revision?: number; readonly results?: readonly string[] | 'all' }): boolean {
  if (notice.snapshot.kind !== 'execution' || last.revision === undefined || notice.revision <= last.revision) return false;
  const status = statusOf(notice.snapshot.value);
  const asked = last.results;
  if (status === 'completed') return asked !== undefined && asked !== 'all' && asked.every((step) => notice.results.has(step));
  return hasOutcome(status);
}

/** Whether an execution in `status` has its outcome: settled, or aborted. */
function hasOutcome(status: ExecutionStatus): boolean {
  return SETTLED.includes(status) || status === 'aborted';
}

/**
 * Load, turning unreadable stored data into a value instead of an exception. An actor marked
 * unreadable in the store (`Store.markUnreadable`) is unreadable with the recorded error, also
 * when its snapshot still decodes (it was its input or outbox that did not): it is failed.
 */
async function loadOrUnreadable(store: Store, id: string, options?: LoadOptions) {
  const loaded = await orUnreadable(store.load(id, options));
  // Read and not marked (the load says so): the common case, one read. Marked, or not readable:
  // the record says why.
  if (loaded !== undefined && !(loaded instanceof DeserializationError) && !loaded.marked) return loaded;
  const marked = await orUnreadable(store.readUnreadable(id));
  if (marked === undefined) return loaded;
  if (marked instanceof DeserializationError) return loaded instanceof DeserializationError ? loaded : marked;
  return new DeserializationError(marked.message);
}

/**
 * Create a runtime. With no options it is fully embedded: memory store,
 * in-process queue and worker, system clock; no server needed.
 * @example
 * const runtime = createRuntime();
 * process.once('SIGTERM', () => runtime.shutdown('SIGTERM'));
 */
export function createRuntime(options: RuntimeOptions = {}): Runtime {
  const backend = options.backend;
  checkBackendOptions('createRuntime', options);
  if (backend === undefined && options.store?.shared === true && options.queue === undefined) {
    throw new DefinitionError(
      'createRuntime: a shared store (Redis) with the default in-process queue would run background hand-offs in this process, not in workers: pass queue: createBullmqQueue(...) from xreactor/redis (or backend: connectRedis()); to run them here on purpose, pass queue: createInProcessQueue() from xreactor/testing and worker: true',
    );
  }
  const ownsStore = options.store === undefined && backend === undefined;
  const ownsQueue = options.queue === undefined && backend === undefined;
  const store = backend?.store ?? options.store ?? createMemoryStore(options.clock === undefined ? {} : { clock: options.clock });
  const queue = backend?.queue ?? options.queue ?? createInProcessQueue({ mode: 'auto', ...(options.clock === undefined ? {} : { clock: options.clock }) });
  const engine = createEngine({ ...options, store, queue });
  const { clock } = engine;
  const generateId = options.generateId ?? randomUUID;
  const stopping = new AbortController();
  // Every step in flight listens on this one signal; many concurrent runs are normal.
  setMaxListeners(0, stopping.signal);
  const workerOption = options.worker ?? ownsQueue;
  const consumer: Consumer | undefined =
    workerOption === false
      ? undefined
      : queue.consume(createJobHandler(engine), { concurrency: workerOption === true ? 1 : (workerOption.concurrency ?? 1) });

  /**
   * A commit refused because an operator cancelled the run (or the composed child it was in)
   * while this process ran it: an `invalid_state` error that says so. Any other error as it is.
   */
  const cancelledMeanwhile = async (id: string, error: unknown): Promise<unknown> => {
    if (!(error instanceof StaleRevisionError)) return error;
    for (const candidate of new Set([id, error.executionId])) {
      const now = await store.load(candidate).catch(() => undefined);
      if (now === undefined || statusOf(now.snapshot.value) !== 'cancelled') continue;
      const why = (now.snapshot.context as ExecutionContext).ending.cancelReason;
      return new InvalidStateError(`execution ${candidate} was cancelled while this process ran it${why ? ` (${why})` : ''}; its remaining steps did not run`, {
        cause: error,
      });
    }
    return error;
  };

  /** The definition an execution runs on, when this process has it: reading an outcome needs none. */
  /**
   * An operator's cancel or undo addressed to an async step's unit: refused with what to do
   * instead (units are independent of their owner and never undone). Only ids below a root can be units.
   */
  const refuseAsyncUnit = async (id: string, what: 'cancelled' | 'undone'): Promise<void> => {
    if (!id.includes('.')) return;
    const loaded = await store.load(id).catch(() => undefined);
    if (loaded?.snapshot.kind !== 'unit') return;
    const { step, owner } = loaded.snapshot.context as { readonly step: string; readonly owner: string };
    throw new InvalidStateError(
      `${id} is the async unit of step "${step}" of execution ${owner}; units are independent of their owner and cannot be ${what}: ${what === 'cancelled' ? 'cancel' : 'undo'} the owner instead (its other steps), and let the unit end by itself (it compensates itself after its last attempt fails)`,
    );
  };

  const knownDefinition = (context: Parameters<Engine['definitionOf']>[0]): AnyReactorDefinition | undefined => {
    try {
      return engine.definitionOf(context);
    } catch {
      return undefined;
    }
  };
  const signalFor = (signal: AbortSignal | undefined) => (signal === undefined ? stopping.signal : AbortSignal.any([signal, stopping.signal]));
  const busy = (id: string) => new XreactorError('execution_busy', `execution ${id} is being advanced by another live process; try again when it settles`);

  /**
   * The store's results of a run as its outcome shows them: a map step's stored reference becomes
   * its `MapResults` reader (as `run()` returns it), with the element reactor when the definition
   * is known.
   */
  /**
   * The results `buildResult` reads, as callers get them; `preloaded`: those a load read with the
   * snapshot (`asked`: the steps it asked for, as `buildResult` asks for them), used when it asks
   * for exactly those.
   */
  const resultsOf = (definition: AnyReactorDefinition | undefined, preloaded?: { readonly asked: readonly string[] | 'all'; readonly values: ReadonlyMap<string, unknown> }): Pick<Store, 'readResults'> => ({
    readResults: async (id, steps) => {
      const asked = steps ?? 'all';
      const read = preloaded !== undefined && isDeepStrictEqual(preloaded.asked, asked) ? new Map(preloaded.values) : await store.readResults(id, steps);
      for (const [step, value] of read) {
        if (!isMapResultsRef(value)) continue;
        const element = id.includes('.') ? undefined : definition?.steps.find((s) => s.name === step)?.map?.element;
        read.set(step, mapResultsOf(store, value, element));
      }
      return read;
    },
  });

  const outcome = async (
    definition: AnyReactorDefinition | undefined,
    id: string,
    status: ExecutionStatus,
    context: Parameters<typeof buildResult>[2],
    results: Parameters<typeof buildResult>[3] = resultsOf(definition),
  ) => {
    if (status === 'aborted') throw new ExecutionAbortedError(id, context.reactor);
    return buildResult(definition, status, context, results);
  };

  /** The outcome of a held execution: paused, dispatched, or its result. */
  const heldOutcome = async (definition: AnyReactorDefinition, held: HeldExecution): Promise<ContinueResult | DispatchedResult | CancelledResult> => {
    const status = statusOf(held.snapshot.value);
    if (status === 'paused') return { status: 'paused', executionId: held.id as ExecutionId, readyInterrupts: readyInterrupts(held.snapshot.context) };
    if (status === 'running' && held.snapshot.context.handedOff) return { status: 'dispatched', executionId: held.id as ExecutionId, reason: 'background' };
    if (!executionTagsOf(held.snapshot.value).has('settled')) return { status: 'dispatched', executionId: held.id as ExecutionId, reason: 'awaiting' };
    return (await outcome(definition, held.id, status, held.snapshot.context, engine.register(definition).resultsOf(held)))!;
  };

  /** Run `work` under the execution's lease, waiting up to `waitMs` for another holder to let go. */
  const underLease = async <T>(id: string, work: (lease: HeldLease) => Promise<T>, waitMs = 5_000): Promise<T> => {
    const deadline = clock.now() + waitMs;
    for (;;) {
      const leased = await engine.withLease(id, work);
      if (leased !== undefined) return leased.value;
      if (clock.now() >= deadline) throw busy(id);
      await clock.sleep(50);
    }
  };

  /** A value as the store keeps it (through the codec), for comparing with a stored one. */
  const asStored = (value: unknown): unknown => decode(encode(value));
  const preview = (value: unknown): string => {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  };

  /**
   * `run` with an id that exists: a retried start. With the same reactor and the same input (as
   * validated) it is answered with that execution's current outcome (idempotent start); anything
   * else is refused, naming both. `existsError` is the create's refusal, thrown when the execution
   * is gone again (its retention expired in between).
   */
  const existingRun = async (reactor: AnyReactorDefinition, id: string, input: unknown, existsError: unknown, signal: AbortSignal | undefined): Promise<unknown> => {
    const loaded = await store.load(id);
    if (loaded === undefined) throw existsError;
    const storedReactor = (loaded.snapshot.context as Partial<ExecutionContext>).reactor;
    if (storedReactor !== reactor.name) {
      throw new XreactorError('execution_exists', `execution ${id} already exists as a run of reactor "${String(storedReactor)}", not "${reactor.name}": give the new run another execution id`);
    }
    const given = reactor.input === undefined ? input : await validateWith(reactor.input, input).then((checked) => (checked.ok ? checked.value : input));
    const stored = await store.readInput(id);
    if (!isDeepStrictEqual(asStored(given), stored)) {
      throw new XreactorError(
        'execution_exists',
        `execution ${id} of reactor "${reactor.name}" already exists with another input (stored ${preview(stored)}, given ${preview(given)}): a retried run must pass the same input; give a new run another execution id`,
      );
    }
    const { definition, held } = await engine.load(id);
    const inCaller = statusOf(held.snapshot.value) === 'running' && !held.snapshot.context.handedOff && held.snapshot.context.awaiting === null;
    if (!inCaller) return heldOutcome(definition, held);
    // A run a caller was running: another process still is (its lease is held), or that call
    // gave up (Redis timed out, the process died). Then this call goes on with it, from its
    // stored state, as a worker recovering it would.
    const resumed = await engine.withLease(id, async (lease) => {
      const { host, held: again } = await engine.load(id);
      again.lease = lease;
      await host.resume(again, again.outbox, signalFor(signal), 'caller');
    });
    if (resumed === undefined) return { status: 'dispatched', executionId: id as ExecutionId, reason: 'run_busy' } satisfies DispatchedResult;
    const after = await engine.load(id);
    return heldOutcome(after.definition, after.held);
  };

  /** The progress of each map step of `definition` whose map operation exists. */
  const mapProgressOf = async (id: string, definition: AnyReactorDefinition | undefined): Promise<MapProgress[]> => {
    const steps = definition?.plan.filter((step) => step.kind === 'map') ?? [];
    const found = await Promise.all(
      steps.map(async (step) => {
        const mapId = mapIdOf(id, step.name);
        const stats = await store.readMapStats(mapId);
        if (stats === undefined) return undefined;
        const { completed, failed, halted, aborted, skipped, cancelled, rollback: rb } = stats;
        const progress: MapProgress = {
          step: step.name,
          id: mapId,
          mode: stats.mode,
          batchSize: stats.batchSize,
          atomic: stats.atomic,
          total: stats.total,
          dispatched: stats.target,
          started: stats.started,
          settled: stats.settled,
          outcomes: { completed, failed, halted, aborted, skipped, cancelled },
          ...(rb.target === null ? {} : { rollback: { total: rb.target, settled: rb.settled, undone: rb.undone, failed: rb.failed, notNeeded: rb.notNeeded, inFlight: rb.inFlight, unavailable: rb.unavailable } }),
        };
        return progress;
      }),
    );
    return found.filter((p): p is MapProgress => p !== undefined);
  };

  /**
   * Whether a stored pause still stands: no signal waits in the inbox of the paused execution nor
   * of any composed child down to the one whose interrupt it is, and that child is still paused.
   */
  const pauseIsCurrent = async (loaded: { readonly snapshot: { readonly value: unknown; readonly context: unknown }; readonly inbox: { readonly entries: readonly unknown[] } }, id?: string): Promise<boolean> => {
    if (statusOf(loaded.snapshot.value) !== 'paused' || loaded.inbox.entries.length > 0) return false;
    const context = loaded.snapshot.context as ExecutionContext;
    const child = context.interrupts.paused?.child ?? null;
    if (child === null) return true;
    const childId = `${id ?? context.executionId}.${child}`;
    const below = await store.load(childId).catch(() => undefined);
    return below === undefined ? true : pauseIsCurrent(below, childId);
  };

  const api = {
    /**
     * Check the resume here and deliver it to the interrupt's execution as a signal (the
     * interrupt is its dedupe key: a second continue lands nowhere). Apply it now when that
     * execution's lease is free: it runs on, and its parents pick up its signals in this call, up
     * to the root; or leave it to the process advancing it (`dispatched`, `run_busy`).
     */
    continue: async (id: string, request: ContinueRequest, continueOptions: { readonly signal?: AbortSignal } = {}): Promise<ContinueResult | DispatchedResult> => {
      const prepared = await prepareResume(engine, id, request);
      // Listed first: should this process die after the signal lands, a sweep applies it.
      await store.markActive(prepared.owner, true);
      const deliver = async () => {
        const receipt = await store.signal({ to: prepared.owner, event: prepared.event, dedupeKey: prepared.dedupeKey });
        if (receipt.landed.length === 0) throw new InvalidStateError(`cannot resume interrupt "${prepared.path.join('.')}": it was already resumed`);
      };
      const signal = signalFor(continueOptions.signal);
      const call = newCall(signal, 'caller');
      // The lease before the signal: a sweep that finds the signal in the inbox finds the
      // execution leased too, and leaves the resume to this call rather than to a worker.
      const applied = await engine.withLease(prepared.owner, async (lease) => {
        await deliver();
        const { host, held } = await engine.load(prepared.owner);
        held.lease = lease;
        await host.resume(held, [], signal, 'caller', call).catch(async (error: unknown) => {
          throw await cancelledMeanwhile(id, error);
        });
      });
      if (applied === undefined) {
        // Whoever holds it meets the signal at its next commit; a job applies it should that process be idle or gone.
        await deliver();
        await queue.enqueue([{ id: jobId(prepared.owner, 'resume', ...prepared.path), kind: 'advance', actor: { kind: 'execution', id: prepared.owner } }]);
      }
      const { definition, held } = await engine.load(id);
      // Left to another process: the resume (its lease was held), or a signal on the way up to the
      // root (a parent's lease was held: a worker took it up, and may be advancing it right now).
      // (Between the interrupt's owner and the execution continued: an async reactor's child
      // continued by its own id signals its owner, which is not part of this answer.)
      const leftUpward = [...call.leftToOthers].some((actor) => (actor === id || actor.startsWith(`${id}.`)) && prepared.owner.startsWith(`${actor}.`));
      const elsewhere = applied === undefined || held.inbox.entries.length > 0 || leftUpward;
      if (elsewhere) {
        engine.logger.info({ event: 'xreactor.resume.deferred', executionId: id, step: prepared.path, reason: 'run_busy' }, 'resume left to the process advancing the run');
        return { status: 'dispatched', executionId: id as ExecutionId, reason: 'run_busy' };
      }
      return (await heldOutcome(definition, held));
    },
  };

  return {
    async run(reactor, input, runOptions = {}) {
      const host = engine.register(reactor);
      const id = runOptions.executionId ?? generateId();
      if (typeof id !== 'string' || id === '' || id.includes('.')) {
        throw new XreactorError(
          'execution_id_invalid',
          `execution id ${JSON.stringify(id)} is ${typeof id !== 'string' || id === '' ? 'empty or not a string' : 'not allowed: "." separates a composed child\'s id from its root\'s'}; ` +
            'use a non-empty id without "." (a UUID, or e.g. "order-123")',
        );
      }
      // The create takes the lease; the commit that hands the run off or ends it releases it.
      const lease = engine.lease(id);
      try {
        const held = await host.start(id, input, signalFor(runOptions.signal), 'caller', lease);
        if (statusOf(held.snapshot.value) === 'cancelled') {
          // An operator's cancel reached the run while this call ran it (and this call applied it).
          const why = held.snapshot.context.ending.cancelReason;
          throw new InvalidStateError(`execution ${id} was cancelled while this process ran it${why ? ` (${why})` : ''}; its remaining steps did not run`);
        }
        return (await heldOutcome(reactor, held)) as RunReturn<typeof reactor>;
      } catch (error) {
        if (runOptions.executionId !== undefined && error instanceof XreactorError && error.code === 'execution_exists') {
          return (await existingRun(reactor, id, input, error, runOptions.signal)) as RunReturn<typeof reactor>;
        }
        if (error instanceof RedisUnavailableError) {
          // The create (or a commit) may still land once Redis is back, taking this call's lease:
          // its release goes out behind it on the same connection, so a retried run need not
          // wait out the lease's TTL.
          store.releaseLease(id, lease.request.owner).catch(() => undefined);
        }
        throw await cancelledMeanwhile(id, error);
      } finally {
        await lease.end();
      }
    },

    continue: api.continue,

    async continueByCorrelationId(correlationId, request, continueOptions = {}) {
      const claimed = await store.readClaim(correlationKey(correlationId));
      if (claimed === undefined) throw new InvalidStateError(`no paused interrupt has correlation id "${correlationId}" (unknown, or its retention expired)`);
      const { root, path } = JSON.parse(claimed) as { root: string; path: string[] };
      return api.continue(root, { step: path, payload: request.payload }, continueOptions);
    },

    async cancel(id, reason) {
      await refuseAsyncUnit(id, 'cancelled');
      await cancelTree(engine, id, reason, stopping.signal);
      const { definition, held } = await engine.load(id);
      const status = statusOf(held.snapshot.value);
      if (status !== 'cancelled') throw new InvalidStateError(`cannot cancel execution ${id}: it is ${status}; only running or paused runs can be cancelled`);
      return (await outcome(definition, id, status, held.snapshot.context)) as CancelledResult;
    },

    async awaitResult(id, awaitOptions = {}) {
      const timeoutMs = awaitOptions.timeoutMs ?? 30_000;
      const recheckMs = Math.min(5_000, Math.max(1_000, Math.floor(timeoutMs / 10)));
      const deadline = clock.now() + timeoutMs;
      /**
       * The outcome when the execution has one (settled, aborted or paused); else its status and
       * the results its outcome would read once completed (`results`, what the next look asks the
       * load for, so that it reads the outcome in the same round trip).
       */
      const look = async (
        onAnswer: () => void,
        results?: readonly string[] | 'all',
        notice?: SettledNotice,
      ): Promise<{ result: RunResult<never> | CancelledResult | PausedResult } | { status: string; revision?: number; soon?: true; results?: readonly string[] | 'all' }> => {
        // A notice that answers (see answeredBy) stands for the load: what it carries is what the settling commit wrote.
        const loaded =
          notice !== undefined
            ? { ...notice, outbox: [], inbox: { entries: [], seq: 0 }, leased: false, marked: false }
            : await loadOrUnreadable(store, id, results === undefined ? undefined : { results }).catch((error: unknown) => {
                onAnswer();
                throw error;
              });
        if (loaded === undefined || loaded instanceof DeserializationError || hasOutcome(statusOf(loaded.snapshot.value))) {
          onAnswer();
        }
        if (loaded === undefined) throw new ExecutionNotFoundError(id);
        if (loaded instanceof DeserializationError) return { result: unreadable(id, loaded) };
        if (loaded.snapshot.kind === 'unit') {
          // An async step's unit: its outcome once it settled.
          const view = await unitView(store, id, loaded);
          return view.result === undefined ? { status: view.status } : { result: view.result as RunResult<never> };
        }
        const status = statusOf(loaded.snapshot.value);
        const context = loaded.snapshot.context as Parameters<typeof buildResult>[2];
        const definition = knownDefinition(context);
        if (hasOutcome(status)) {
          const preloaded = results === undefined || loaded.results === undefined ? undefined : { asked: results, values: loaded.results };
          return { result: (await outcome(definition, id, status, context, resultsOf(definition, preloaded))) as RunResult<never> | CancelledResult };
        }
        if (status === 'paused') {
          // A pause that is still current (nothing on its way to it, down to the child whose
          // interrupt it is): read it from the snapshots alone, no definition needed. One already
          // continued, whose ancestors have not recorded it yet, is no answer: look again soon.
          if (await pauseIsCurrent(loaded)) return { result: { status: 'paused', executionId: id as ExecutionId, readyInterrupts: readyInterrupts(context) } };
          return { status: 'resuming', soon: true };
        }
        // What `buildResult` reads of a completed run: the `returns` step's result, or every step's.
        const returns = returnsOf(definition, context);
        return { status, revision: loaded.revision, results: returns === undefined ? 'all' : [returns] };
      };
      for (;;) {
        // Listen before looking: once the wait is listening, a run that settles after the look
        // still wakes us (a notification published before the SUBSCRIBE lands would be lost).
        const remainingNow = Math.max(1, deadline - clock.now());
        const wait = store.waitSettled(id, Math.min(remainingNow, recheckMs), awaitOptions.signal);
        // Listening, or given up (timeout, abort): a stuck SUBSCRIBE must not outlast timeoutMs.
        await Promise.race([wait.listening, wait.settled]);
        const first = await look(() => wait.stop?.());
        if ('result' in first) return first.result;
        if (deadline - clock.now() <= 0) {
          wait.stop?.();
          throw new AwaitTimeoutError(id, timeoutMs, first.status);
        }
        if (first.soon === true) {
          // A continued pause its ancestors are taking up: no notification marks that, so poll.
          wait.stop?.();
          await clock.sleep(RESUMING_POLL_MS, awaitOptions.signal);
          continue;
        }
        const notified = await wait.settled;
        awaitOptions.signal?.throwIfAborted();
        // Notified: the commit that published it is durable. Its notice, when it carries one that
        // answers, is the outcome; else look again at once (no new subscription), reading the
        // result it returns with it. A notification without an outcome (or a re-check) listens
        // again first.
        if (notified) {
          const notice = wait.notice?.();
          const again = await look(() => undefined, first.results, notice !== undefined && answeredBy(notice, first) ? notice : undefined);
          if ('result' in again) return again.result;
        }
      }
    },


    async find(id) {
      const loaded = await loadOrUnreadable(store, id);
      if (loaded === undefined) throw new ExecutionNotFoundError(id);
      if (loaded instanceof DeserializationError) {
        return {
          id: id as ExecutionId,
          reactor: '(unreadable)',
          status: 'failed' as const,
          revision: 0,
          result: unreadable(id, loaded),
          undoStack: [],
          trace: [],
          pendingCompensation: undefined,
          waiting: undefined,
          maps: [],
          createdAt: 0,
          updatedAt: 0,
        };
      }
      // An async step's unit: its own view (its owner's reactor, its outcome and trace).
      if (loaded.snapshot.kind === 'unit') return unitView(store, id, loaded);
      const context = loaded.snapshot.context as Parameters<typeof buildResult>[2];
      const status = statusOf(loaded.snapshot.value);
      const [undoStack, trace] = await Promise.all([store.readUndoStack(id), store.readTrace(id)]);
      const failure = context.failure;
      const definition = knownDefinition(context);
      return {
        id: id as ExecutionId,
        reactor: context.reactor,
        status,
        revision: loaded.revision,
        result: await buildResult(definition, status, context, resultsOf(definition)),
        undoStack,
        trace,
        pendingCompensation: failure?.compensationPending === true && (status === 'aborted' || status === 'halted') ? { step: failure.step } : undefined,
        waiting: waitingOf(loaded.snapshot.value, context, definition),
        maps: await mapProgressOf(id, definition),
        // An execution keeps it in `origin`; another kind's actor (a map) at the top.
        createdAt: context.origin?.createdAt ?? (context as { readonly createdAt?: number }).createdAt ?? 0,
        updatedAt: context.updatedAt,
      };
    },

    async undo(id, undoOptions = {}) {
      await refuseAsyncUnit(id, 'undone');
      return underLease(id, async (lease) => {
        const { definition, host, held } = await engine.load(id);
        const status = statusOf(held.snapshot.value);
        if (status === 'rolling_back') throw new InvalidStateError(`execution ${id} is rolling back already; wait for it to finish`);
        if (!['completed', 'halted', 'aborted', 'paused'].includes(status)) {
          throw new InvalidStateError(`execution ${id} is ${status}; only completed, halted, paused or aborted executions can be undone`);
        }
        // A signal like any other: a paused run's composed child is undone first (the run signals it and waits).
        const undo: ExecutionEvent = { type: 'xreactor.operator.undo', at: clock.now() };
        await store.signal({ to: id, event: undo, dedupeKey: `operator.undo.${held.snapshot.context.rollbackEpoch}` });
        held.lease = lease;
        markStale(held);
        await host.resume(held, [], signalFor(undoOptions.signal), 'caller');
        const after = await engine.load(id);
        const ended = statusOf(after.held.snapshot.value);
        if (ended !== 'cancelled') {
          const waiting = after.held.inbox.entries.some((e) => e.event.type === 'xreactor.operator.undo');
          // The undo was applied and the run rolls back on actors that workers advance (a fan-out map's rollback).
          if (ended === 'rolling_back' && !waiting) return { status: 'dispatched', executionId: id as ExecutionId, reason: 'awaiting' } satisfies DispatchedResult;
          throw new InvalidStateError(
            waiting
              ? `execution ${id} is ${ended}: work in progress in another process comes first (its composed child runs there); the undo waits in its inbox and is applied when the run can be undone — see find(id)`
              : `execution ${id} is ${ended}: it ended by itself before the undo reached it (the undo was discarded); there is nothing to undo`,
          );
        }
        return (await outcome(definition, id, ended, after.held.snapshot.context)) as CancelledResult;
      });
    },

    sweepOnce(sweepOptions = {}) {
      return engine.sweepOnce(sweepOptions.limit ?? 1_000);
    },

    shutdown(reason = 'runtime shutdown') {
      stopping.abort(new Error(reason));
      // The embedded worker stops too: its jobs in progress are interrupted (they commit nothing
      // and are delivered again) and it takes no new ones. close() may call this again.
      consumer?.close({ force: true }).catch((error: unknown) => {
        engine.logger.warn({ event: 'xreactor.worker.close_failed', err: error }, 'could not close the embedded worker');
      });
    },

    async close() {
      await consumer?.close();
      if (ownsQueue) await queue.close();
      if (ownsStore) await store.close();
      await backend?.close();
    },
  };
}
