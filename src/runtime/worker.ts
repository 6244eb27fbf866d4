import type { Logger } from 'pino';
import { DeserializationError, ExecutionNotFoundError, PlanMismatchError, StaleRevisionError, UnknownReactorError, XreactorError } from '../errors/index.js';
import { decode } from '../serialization/index.js';
import { decodeSnapshot } from '../store/snapshot-codec.js';
import type { ExecutionHost, HeldExecution } from './host.js';
import type { HeldLease } from './lease.js';
import type { Consumer, JobHandler, JobSpec } from '../queue/queue.js';
import type { ExecutionEvent } from '../../machines/execution-types.js';
import type { Engine, EngineOptions } from './engine.js';
import { createEngine } from './engine.js';

/** Options of {@link createWorker}. */
export interface WorkerOptions extends Omit<EngineOptions, 'queue'> {
  readonly queue: NonNullable<EngineOptions['queue']>;
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

/** The job handler that advances executions; shared by workers and the embedded runtime. */
export function createJobHandler(engine: Engine): JobHandler {
  const log: Logger = engine.logger;
  return async (delivered: JobSpec, signal: AbortSignal) => {
    let job = delivered;
    if (job.kind === 'sweep') {
      await engine.sweepOnce(SWEEP_LIMIT);
      return;
    }
    if (job.dedupeKey !== undefined && job.event !== undefined) {
      // A signal crossing processes (an interrupt timeout, a continue left to a worker): it lands
      // in the actor's inbox at most once per key; then the job applies the inbox like any wake.
      await engine.store.signal({ to: job.executionId, event: job.event, dedupeKey: job.dedupeKey });
      job = { ...job, event: undefined };
    }
    const lease = engine.lease(job.executionId);
    try {
      // A hand-off job carries the run's state: one fenced commit instead of a read and a commit.
      if (job.handoff !== undefined && (await advanceFromCarriedState(engine, lease, job, signal))) return;
      // The lease and the execution come in one store call. The process that enqueued this job
      // (a hand-off) sends it together with the commit that hands the run off and releases the
      // lease, so the job can arrive before that commit lands: the execution is then missing (a
      // new run) or still leased by the caller. Wait a moment before handing the job back.
      let loaded: Awaited<ReturnType<Engine['loadLeased']>>;
      try {
        loaded = await engine.loadLeased(lease);
        for (const pauseMs of LEASE_RETRY_MS) {
          if (typeof loaded !== 'string' || signal.aborted) break;
          await engine.clock.sleep(pauseMs, signal).catch(() => undefined);
          loaded = await engine.loadLeased(lease);
        }
      } catch (error) {
        if (error instanceof UnknownReactorError || error instanceof PlanMismatchError || (error instanceof DeserializationError && error.retryable)) {
          // This build cannot advance it (a reactor it was not given, or a version a newer build
          // wrote): the run and the job are left for a worker that can (a rolling deploy, or
          // worker pools with different reactors on one queue). The job is retried after its
          // backoff, and the run stays listed for the sweeper; if no worker that can advance it
          // takes a job of it within their attempts, it waits for the next revision's sweep job.
          log.warn({ event: 'xreactor.execution.not_here', executionId: job.executionId, reactor: job.reactor, err: error }, error.message);
          throw new XreactorError('execution_not_here', `this worker cannot advance execution ${job.executionId}: ${error.message}; the job is retried`, {
            retryable: true,
            cause: error,
          });
        }
        if (error instanceof DeserializationError) {
          // Unreadable data: retrying cannot help. Report it and keep the worker running.
          log.error({ event: 'xreactor.execution.unreadable', executionId: job.executionId, err: error }, error.message);
          await engine.store.markActive(job.executionId, false);
          return;
        }
        throw error;
      }
      if (loaded === 'missing') throw new ExecutionNotFoundError(job.executionId);
      if (loaded === 'busy') {
        throw new XreactorError('execution_busy', `execution ${job.executionId} is being advanced by another live process; the job is retried later`, {
          retryable: true,
        });
      }
      const { host, held } = loaded;
      const outbox = held.outbox;
      held.lease = lease;
      if (job.event !== undefined && (await host.drive(held, job.event as unknown as ExecutionEvent, signal, 'worker'))) return;
      await host.resume(held, outbox, signal, 'worker');
    } finally {
      await lease.end();
    }
  };
}

/** A refusal of the first, fenced commit: the carried state is not (or no longer, or not yet) the stored one. */
function isRefusal(error: unknown): boolean {
  return error instanceof StaleRevisionError || error instanceof ExecutionNotFoundError || (error instanceof XreactorError && error.code === 'execution_busy');
}

/**
 * Advance a handed-off run from the state its job carries: the resume transition's commit takes
 * the lease and applies only if the stored snapshot is still exactly the carried one. Returns
 * false, having performed nothing, when that cannot be used (an unknown reactor, unreadable
 * bytes, or a refused first commit); the caller then reads the store as for any job.
 */
async function advanceFromCarriedState(engine: Engine, lease: HeldLease, job: JobSpec, signal: AbortSignal): Promise<boolean> {
  const carried = job.handoff!;
  const event = job.event as unknown as ExecutionEvent | undefined;
  if (event === undefined) return false;
  let held: HeldExecution | undefined;
  let host: ExecutionHost;
  try {
    const snapshot = decodeSnapshot(carried.snapshot);
    host = engine.register(engine.definitionOf(snapshot.context as { reactor: string }));
    held = await host.load(job.executionId, { snapshot, revision: carried.revision, outbox: [], inbox: { entries: [], seq: 0 } }, { value: decode(carried.input) });
  } catch (error) {
    if (!(error instanceof XreactorError)) throw error;
    engine.logger.debug({ event: 'xreactor.handoff.carried_unusable', executionId: job.executionId, err: error }, 'hand-off job state unusable; reading the store');
    return false;
  }
  if (held === undefined) return false;
  held.lease = lease;
  held.fromJob = { ifSnapshot: carried.snapshot };
  try {
    return await host.drive(held, event, signal, 'worker');
  } catch (error) {
    // Refused before anything was performed (the lease is taken only by a first commit that lands).
    if (!lease.held && isRefusal(error)) {
      engine.logger.debug({ event: 'xreactor.handoff.carried_refused', executionId: job.executionId, err: error }, 'hand-off job state is not the stored one; reading the store');
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
  const engine = createEngine(options);
  const consumer: Consumer = options.queue.consume(createJobHandler(engine), { concurrency: options.concurrency ?? 1 });
  const sweepIntervalMs = options.sweepIntervalMs ?? 30_000;
  if (sweepIntervalMs > 0) {
    options.queue.schedule(SWEEPER_SCHEDULE_ID, sweepIntervalMs, { kind: 'sweep', executionId: '', reactor: '' }).catch((error: unknown) => {
      engine.logger.error({ event: 'xreactor.sweeper.schedule_failed', err: error }, 'could not schedule the sweeper');
    });
  }
  return {
    // Not held back by the sweeper's schedule call: one still waiting (Redis unreachable) must not
    // stall a shutdown, forced or not. The schedule is shared by every worker and outlives this one.
    close: (closeOptions) => consumer.close(closeOptions),
  };
}
