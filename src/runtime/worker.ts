import type { Logger } from 'pino';
import { DefinitionError, DeserializationError, ExecutionNotFoundError, JobRejectedError, PlanMismatchError, StaleRevisionError, UnknownReactorError, XreactorError } from '../errors/index.js';
import { jobId } from '../queue/job-ids.js';
import { decode } from '../serialization/index.js';
import { decodeSnapshot } from '../store/snapshot-codec.js';
import type { ExecutionHost, HeldExecution } from './host.js';
import type { HeldLease } from './lease.js';
import type { HeldActor } from './actor-host.js';
import type { ActorAddress, Consumer, JobHandler, JobSpec } from '../queue/queue.js';
import type { ExecutionEvent } from '../../machines/execution-types.js';
import { newCall } from './call.js';
import type { Engine, EngineOptions } from './engine.js';
import { createEngine } from './engine.js';
import { checkBackendOptions } from './backend.js';
import { decodeElementStart } from './element-start.js';
import type { ElementStart } from './element-start.js';
import type { Backend } from './backend.js';

/** Options of {@link createWorker}. */
interface WorkerBaseOptions extends Omit<EngineOptions, 'queue' | 'store'> {
  /**
   * Jobs handled at once.
   * @defaultValue 1
   */
  readonly concurrency?: number;
  /**
   * How often a sweep job looks for executions whose process died (a queue
   * schedule shared by all workers: one sweep per interval, whichever worker
   * takes it); 0 disables.
   * @defaultValue 30000
   */
  readonly sweepIntervalMs?: number;
}

/**
 * Options of {@link createWorker}: the queue to consume and the store (each stays the caller's
 * to close), or a `backend` (`connectRedis()`) that the worker takes over and closes.
 */
export type WorkerOptions = WorkerBaseOptions &
  (
    | { readonly queue: NonNullable<EngineOptions['queue']>; readonly store: EngineOptions['store']; readonly backend?: undefined }
    | { readonly backend: Backend; readonly queue?: undefined; readonly store?: undefined }
  );

/** A running worker. */
export interface Worker {
  /**
   * Stop taking jobs. Graceful (default): finish the jobs in progress. `force`:
   * interrupt them; nothing is committed for an interrupted step, which runs
   * again on redelivery.
   */
  close(options?: { readonly force?: boolean }): Promise<void>;
}

/** Pauses between attempts to take a busy lease (or find a run not created yet) before the job goes back to the queue. */
const LEASE_RETRY_MS = [1, 2, 5, 10, 20, 40];

/** Executions one scheduled sweep looks at. */
const SWEEP_LIMIT = 1_000;

/** The id of the one sweeper schedule every worker upserts. */
export const SWEEPER_SCHEDULE_ID = 'xreactor-sweeper';

/** Handles the jobs addressed to actors of one kind. */
type ActorJobHandler = (job: JobSpec & { readonly actor: ActorAddress }, signal: AbortSignal) => Promise<void>;

/**
 * The job handler of workers and the embedded runtime: a table by actor kind, built from the
 * kinds the engine advances (`Engine.kinds`): executions have their own handler (hand-offs
 * carrying state, unreadable data failing the parent), every other kind the generic actor
 * handler. A job that addresses no actor (malformed) is rejected at once; one for a kind this
 * build does not know is retried, its actor untouched (a newer build may be deployed beside this one).
 */
export function createJobHandler(engine: Engine): JobHandler {
  const kinds = new Map<string, ActorJobHandler>();
  // Kinds are looked up per job: an engine registers the map kinds with its first reactor that has a map step.
  const handlerOf = (kind: string): ActorJobHandler | undefined => {
    let handler = kinds.get(kind);
    if (handler === undefined && engine.kinds().includes(kind)) {
      handler = actorJobHandler(engine, kind === 'execution' ? EXECUTION_JOBS : { noun: `${kind} actor`, started: advanceActorFromStart });
      kinds.set(kind, handler);
    }
    return handler;
  };
  return async (job: JobSpec, signal: AbortSignal) => {
    if (job.kind === 'sweep') {
      await engine.sweepOnce(SWEEP_LIMIT);
      return;
    }
    const actor = job.actor as Partial<ActorAddress> | undefined;
    if (job.kind !== 'advance' || typeof actor?.kind !== 'string' || typeof actor.id !== 'string' || actor.id === '') {
      throw new JobRejectedError(
        `job ${JSON.stringify(job.id)} is malformed: kind ${JSON.stringify(job.kind)}, actor ${JSON.stringify(job.actor)}; an advance job names its actor as { kind, id }. It is failed, not retried`,
      );
    }
    const handle = handlerOf(actor.kind);
    if (handle === undefined) {
      engine.logger.warn({ event: 'xreactor.actor.kind_unknown', actor, job: job.id }, `no handler for actor kind "${actor.kind}"`);
      throw new XreactorError('actor_kind_unknown', `this worker knows actor kinds ${engine.kinds().join(', ')}, not "${actor.kind}" (job ${job.id}, actor ${actor.id}); the job is retried for a build that knows it, and the actor is left as it is`, {
        retryable: true,
      });
    }
    await handle(job as JobSpec & { readonly actor: ActorAddress }, signal);
  };
}

/** What the jobs of one kind do beyond the generic actor handler's. */
interface KindJobs {
  /** What messages call an actor of the kind. */
  readonly noun: string;
  /** Advance from the state a job carries (a hand-off); false when it cannot be used (then the store is read). */
  readonly carried?: (engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal) => Promise<boolean>;
  /** Create and advance a fan-out element from its start job (`JobSpec.start`); false when it exists already (then the store is read). */
  readonly started?: (engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal) => Promise<boolean>;
  /** After the actor's unreadable data was marked failed in the store: tell whoever waits for it. */
  readonly unreadable?: (engine: Engine, id: string) => Promise<void>;
}

/** The execution kind's jobs: hand-offs carry the run's state; an unreadable composed child fails its parent. */
const EXECUTION_JOBS: KindJobs = { noun: 'execution', carried: advanceFromCarriedState, started: advanceFromStart, unreadable: signalParentOfUnreadable };

/** Whether a load failed because this build cannot advance the actor (another build can). */
function isNotHere(error: unknown): boolean {
  return (
    error instanceof UnknownReactorError ||
    error instanceof PlanMismatchError ||
    (error instanceof DeserializationError && error.retryable) ||
    (error instanceof XreactorError && error.code === 'actor_kind_unknown')
  );
}

/**
 * The generic actor job handler: a signal crossing processes lands first; then the actor's lease
 * and the actor in one store call, with the host of its stored kind; the job's event is delivered,
 * else the actor resumes (its inbox, else its committed outbox). Wakes, timers, signals crossing
 * processes and sweeps' recoveries of every kind go through it.
 */
function actorJobHandler(engine: Engine, jobs: KindJobs): ActorJobHandler {
  const log: Logger = engine.logger;
  const noun = jobs.noun;
  return async (delivered, signal) => {
    let job = delivered;
    const id = job.actor.id;
    if (job.ifRevision !== undefined && (job.dedupeKey !== undefined || job.handoff !== undefined)) {
      // Those deliver before the revision could be checked: the fence would not hold.
      throw new JobRejectedError(`job ${job.id} for ${noun} ${id} names ifRevision with ${job.dedupeKey !== undefined ? 'dedupeKey' : 'handoff'}: an event fenced by revision is delivered directly, not through the inbox or a carried state; drop one of them`);
    }
    if (job.dedupeKey !== undefined && job.event !== undefined) {
      // A signal crossing processes (an interrupt timeout, a continue left to a worker): it lands
      // in the actor's inbox at most once per key; then the job applies the inbox like any wake.
      await engine.store.markActive(id, true);
      await engine.store.signal({ to: id, event: job.event, dedupeKey: job.dedupeKey });
      job = { ...job, event: undefined };
    }
    const lease = engine.lease(id);
    try {
      // A hand-off job carries the run's state: one fenced commit instead of a read and a commit.
      if (job.handoff !== undefined && jobs.carried !== undefined && (await jobs.carried(engine, lease, job, signal))) return;
      // A fan-out element's start creates it with its first commit.
      if (job.start !== undefined && jobs.started !== undefined && (await jobs.started(engine, lease, job, signal))) return;
      // The lease and the actor come in one store call. The process that enqueued this job (a
      // hand-off) sends it together with the commit that hands the run off and releases the
      // lease, so the job can arrive before that commit lands: the actor is then missing (a new
      // run) or still leased by the caller. Wait a moment before handing the job back.
      let loaded: Awaited<ReturnType<Engine['loadLeased']>>;
      try {
        loaded = await engine.loadLeased(lease);
        for (const pauseMs of LEASE_RETRY_MS) {
          if (typeof loaded !== 'string' || signal.aborted) break;
          await engine.clock.sleep(pauseMs, signal).catch(() => undefined);
          loaded = await engine.loadLeased(lease);
        }
      } catch (error) {
        if (isNotHere(error)) throw notHere(log, noun, id, error);
        if (error instanceof DeserializationError) {
          // Unreadable data: retrying cannot help. It is failed in the store (the data kept, the
          // actor unlisted); whoever waits for it learns that it failed (a parent's compose step
          // fails with this error); the job fails; every other actor goes on.
          log.error({ event: 'xreactor.execution.unreadable', executionId: id, err: error }, error.message);
          await engine.store.markUnreadable(id, { code: error.code, message: error.message });
          await jobs.unreadable?.(engine, id);
          throw new JobRejectedError(`${noun} ${id} cannot be advanced: ${error.message}`, { cause: error });
        }
        throw error;
      }
      if (loaded === 'missing') throw new JobRejectedError(`${noun} ${id} does not exist (unknown id, or its retention expired): job ${job.id} is failed, not retried`);
      if (loaded === 'busy') {
        throw new XreactorError('execution_busy', `${noun} ${id} is being advanced by another live process; the job is retried later`, {
          retryable: true,
        });
      }
      const { loop, held } = loaded;
      const outbox = held.outbox;
      held.lease = lease;
      // Signals that landed before this job's event come first (a unit's settle before the timeout
      // of the wait for it, a cancel before a timer): the event is delivered after them, and is
      // ignored if they moved the actor on. (The kernel applies a handed-pending inbox before the next event.)
      // An event computed from an earlier revision (a sweep's verdict) is not applied to a later state.
      const event = job.ifRevision === undefined || job.ifRevision === held.revision ? job.event : undefined;
      if (event === undefined && job.event !== undefined) log.debug({ event: 'xreactor.job.event_stale', executionId: id, type: job.event.type, ifRevision: job.ifRevision, revision: held.revision }, 'job event computed from an earlier state; not delivered');
      if (event !== undefined && held.inbox.entries.length > 0) held.handedPending = true;
      if (event !== undefined && (await loop.drive(held as never, event, newCall(signal, 'worker')))) return;
      await loop.resume(held as never, outbox, newCall(signal, 'worker'));
    } finally {
      await lease.end();
    }
  };
}

/**
 * This build cannot advance the actor (a reactor or version it was not given, another plan, or a
 * machine version or kind a newer build wrote): the actor and the job are left for a worker that
 * can (a rolling deploy, or worker pools with different reactors on one queue). The job is retried
 * after its backoff, and the actor stays listed for the sweeper.
 */
function notHere(log: Logger, noun: string, id: string, error: unknown): XreactorError {
  log.warn({ event: 'xreactor.execution.not_here', executionId: id, err: error }, (error as Error).message);
  return new XreactorError('execution_not_here', `this worker cannot advance ${noun} ${id}: ${(error as Error).message}; the job is retried`, { retryable: true, cause: error });
}

/**
 * A fan-out element's start job (docs/design/map.md §19): the element is built from its start
 * payload (carried, or read from its map's start payloads when large) and created by the commit
 * of its first transition, its start (gated: a stopped map skips it) or its failure (a rejected
 * input). Returns false, having committed nothing, when it exists already (a duplicate start) or
 * no payload is kept (the map's forward phase ended); the caller then reads the store.
 */
async function advanceFromStart(engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal): Promise<boolean> {
  const { map, index, payload } = job.start!;
  const id = job.actor!.id;
  const bytes = payload ?? (await engine.store.readMapStarts(map, index, 1))[0];
  if (bytes === undefined) return false;
  let host: ExecutionHost;
  let start: ElementStart;
  try {
    start = decodeElementStart(id, bytes);
    host = engine.register(engine.definitionOf(start.element));
  } catch (error) {
    // Another build wrote it, or this one was not given the element's reactor (at its version).
    if (error instanceof DeserializationError || isNotHere(error)) throw notHere(engine.logger, 'element', id, error);
    throw error;
  }
  const { held, event } = await host.fromStart(id, start);
  held.lease = lease;
  try {
    return await host.drive(held, event, signal, 'worker');
  } catch (error) {
    // Refused before anything was committed: the element exists (a duplicate start) or its lease is held.
    if (!lease.held && isRefusal(error)) {
      engine.logger.debug({ event: 'xreactor.element.start_refused', executionId: id, err: error }, 'element exists already; reading the store');
      return false;
    }
    throw error;
  }
}

/** A composed child whose stored data cannot be read settles as failed for its parent: signal and wake the parent. */
async function signalParentOfUnreadable(engine: Engine, id: string): Promise<void> {
  const dot = id.lastIndexOf('.');
  if (dot < 0 || engine.queue === undefined) return;
  const parent = id.slice(0, dot);
  const event = { type: 'xreactor.child.settled', at: engine.clock.now(), child: id, status: 'failed' };
  await engine.store.markActive(parent, true);
  const receipt = await engine.store.signal({ to: parent, event, dedupeKey: `${id}.unreadable` });
  if (receipt.landed.length > 0) await engine.queue.enqueue([{ id: jobId(parent, 'wake', id, 'unreadable'), kind: 'advance', actor: { kind: 'execution', id: parent } }]);
}

/** A refusal of the first, fenced commit: the carried state is not (or no longer, or not yet) the stored one. */
function isRefusal(error: unknown): boolean {
  return error instanceof StaleRevisionError || error instanceof ExecutionNotFoundError || (error instanceof XreactorError && error.code === 'execution_busy');
}

/**
 * Advance an actor from the state its job carries instead of reading the store: `take` builds the
 * held actor from it, `advance` drives it; its first commit takes the lease and applies only if
 * the stored snapshot is still exactly the carried one. Returns false, having committed nothing,
 * when that cannot be used (an unknown reactor, unreadable bytes, or a refused first commit); the
 * caller then reads the store as for any job.
 */
async function fromCarriedState<H extends HeldActor>(
  engine: Engine,
  lease: HeldLease,
  job: JobSpec,
  take: (carried: NonNullable<JobSpec['handoff']>) => Promise<H | undefined> | H,
  advance: (held: H) => Promise<boolean>,
): Promise<boolean> {
  const carried = job.handoff!;
  const id = job.actor!.id;
  let held: H | undefined;
  try {
    held = await take(carried);
  } catch (error) {
    if (!(error instanceof XreactorError)) throw error;
    engine.logger.debug({ event: 'xreactor.handoff.carried_unusable', executionId: id, err: error }, 'job state unusable; reading the store');
    return false;
  }
  if (held === undefined) return false;
  held.lease = lease;
  held.fromJob = { ifSnapshot: carried.snapshot };
  try {
    return await advance(held);
  } catch (error) {
    // Refused before anything was committed (the lease is taken only by a first commit that lands).
    if (!lease.held && isRefusal(error)) {
      engine.logger.debug({ event: 'xreactor.handoff.carried_refused', executionId: id, err: error }, 'job state is not the stored one; reading the store');
      return false;
    }
    throw error;
  }
}

/** A handed-off run from the state its job carries: the job's event is its first transition. */
function advanceFromCarriedState(engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal): Promise<boolean> {
  const event = job.event as unknown as ExecutionEvent | undefined;
  if (event === undefined) return Promise.resolve(false);
  let host: ExecutionHost;
  return fromCarriedState(
    engine,
    lease,
    job,
    (carried) => {
      const snapshot = decodeSnapshot(carried.snapshot);
      host = engine.register(engine.definitionOf(snapshot.context as { reactor: string }));
      return host.load(job.actor!.id, { snapshot, revision: carried.revision, outbox: [], inbox: { entries: [], seq: 0 } }, { value: decode(carried.input) });
    },
    (held: HeldExecution) => host.drive(held, event, signal, 'worker'),
  );
}

/**
 * An actor of another kind (a fan-out element rollback) from its start job (docs/design/map.md
 * §19): built from the start payload the job carries and created by the commit its first work
 * (its creation's outbox) leads to. Returns false, having committed nothing, when it exists
 * already (a duplicate start) or its lease is held; the caller then reads the store.
 */
async function advanceActorFromStart(engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal): Promise<boolean> {
  const host = engine.kindHost(job.actor!.kind);
  const build = host?.fromStartJob?.bind(host);
  if (host === undefined || build === undefined || job.event !== undefined) return false;
  const id = job.actor!.id;
  let held: HeldActor;
  try {
    held = build(id, job.start!);
  } catch (error) {
    if (error instanceof DeserializationError) throw notHere(engine.logger, `${job.actor!.kind} actor`, id, error);
    throw error;
  }
  held.lease = lease;
  try {
    await host.loop.resume(held, held.outbox, newCall(signal, 'worker'));
    return true;
  } catch (error) {
    // Refused before anything was committed: the actor exists (a duplicate start) or its lease is held.
    if (!lease.held && isRefusal(error)) {
      engine.logger.debug({ event: 'xreactor.actor.start_refused', executionId: id, err: error }, 'actor exists already; reading the store');
      return false;
    }
    throw error;
  }
}

/**
 * Run a worker: takes jobs from the queue and advances the executions they
 * name, holding each execution's liveness lease while it works.
 * @example
 * const worker = createWorker({ store, queue, reactors: [checkout], concurrency: 10 });
 * process.once('SIGTERM', () => void worker.close());
 */
export function createWorker(options: WorkerOptions): Worker {
  checkBackendOptions('createWorker', options);
  const backend = options.backend;
  const queue = backend?.queue ?? options.queue;
  if (queue === undefined) throw new DefinitionError('createWorker: give the queue to consume (createBullmqQueue from xreactor/redis), or backend: connectRedis()');
  const store = backend?.store ?? options.store;
  if (store === undefined) throw new DefinitionError('createWorker: give the store the executions live in (createRedisStore from xreactor/redis), or backend: connectRedis()');
  const engine = createEngine({ unknownReactor: { who: 'this worker', fix: 'pass it to createWorker({ reactors })' }, ...options, queue, store });
  const consumer: Consumer = queue.consume(createJobHandler(engine), { concurrency: options.concurrency ?? 1 });
  const sweepIntervalMs = options.sweepIntervalMs ?? 30_000;
  if (sweepIntervalMs > 0) {
    queue.schedule(SWEEPER_SCHEDULE_ID, sweepIntervalMs, { kind: 'sweep' }).catch((error: unknown) => {
      engine.logger.error({ event: 'xreactor.sweeper.schedule_failed', err: error }, 'could not schedule the sweeper');
    });
  }
  return {
    // Not held back by the sweeper's schedule call: one still waiting (Redis unreachable) must not
    // stall a shutdown, forced or not. The schedule is shared by every worker and outlives this one.
    // A backend it was given is closed once the jobs in progress have finished (or were handed back).
    close: async (closeOptions) => {
      await consumer.close(closeOptions);
      await backend?.close();
    },
  };
}
