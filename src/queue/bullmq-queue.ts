/**
 * The BullMQ adapter of the queue port: jobs live in Redis, any number of worker processes
 * consume them, and a job whose handler throws or whose worker dies is delivered again.
 *
 * Deduplication is BullMQ's: a job id that exists in the queue (waiting, delayed, active,
 * failed, or completed and not yet removed) is not added again. Completed jobs are kept for
 * `removeOnCompleteAgeS` so a re-performed effect within that window adds nothing; BullMQ
 * removes aged jobs only when a later job completes, so they may stay longer.
 *
 * The sibling jobs of one fan-out throw (`enqueue(jobs, { bundle: true })`) travel in bundles of
 * up to `bundleSize` parts, one BullMQ job each (`bullmq-bundles.ts`); a part is handled as its own
 * job, and one that fails to be handled is added again alone.
 */
import { Queue as BullQueue, UnrecoverableError, Worker } from 'bullmq';
import type { ConnectionOptions, Job } from 'bullmq';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { JobRejectedError, XreactorError } from '../errors/index.js';
import { decode, encode } from '../serialization/index.js';
import { DEFAULT_REDIS_TIMEOUT_MS, targetOf, withDeadline } from '../store/redis-deadline.js';
import type { DeadlineTarget } from '../store/redis-deadline.js';
import { bundleJobId, bundleSizes, DEFAULT_BUNDLE_SIZE, Permits } from './bullmq-bundles.js';
import type { ConsumeOptions, Consumer, EnqueueOptions, JobHandler, JobSpec, Queue } from './queue.js';

/** Worker tuning: how fast a job held by a dead worker is delivered again. */
export interface BullmqWorkerOptions {
  /**
   * How long a worker's lock on a job lasts; a live worker renews it every half of this.
   * @defaultValue 30000
   */
  readonly lockDurationMs?: number;
  /**
   * How often workers look for jobs whose lock expired (their worker died) and deliver them again.
   * @defaultValue 30000
   */
  readonly stalledIntervalMs?: number;
  /**
   * Times a job may be recovered from a dead worker before BullMQ fails it.
   * @defaultValue 25
   */
  readonly maxStalledCount?: number;
}

/** Options of {@link createBullmqQueue}. */
export interface BullmqQueueOptions {
  /**
   * ioredis connection options (the adapter's BullMQ objects open and close their own
   * connections), or an ioredis instance the caller owns and closes. An instance used by a
   * consumer must have `maxRetriesPerRequest: null`, as BullMQ workers require.
   */
  readonly connection: RedisOptions | Redis | Cluster;
  /** @defaultValue `'xreactor'` */
  readonly queueName?: string;
  /** Prefix of BullMQ's Redis keys. In a cluster, put a hash tag in it (`'{xreactor}'`). @defaultValue `'bull'` */
  readonly prefix?: string;
  /**
   * Seconds a completed job (and so its id, for deduplication) is kept.
   * @defaultValue 3600
   */
  readonly removeOnCompleteAgeS?: number;
  /**
   * Seconds a job that failed all its attempts is kept (its id stays deduplicated meanwhile).
   * @defaultValue 604800 (7 days)
   */
  readonly removeOnFailAgeS?: number;
  /**
   * Deliveries of a job whose handler keeps throwing before BullMQ fails it.
   * @defaultValue 25
   */
  readonly maxAttempts?: number;
  /**
   * First redelivery delay after a handler error; it doubles with each attempt up to `maxBackoffMs`.
   * @defaultValue 100
   */
  readonly backoffMs?: number;
  /** @defaultValue 30000 */
  readonly maxBackoffMs?: number;
  readonly worker?: BullmqWorkerOptions;
  /** Told of connection errors, handler errors (with the job) and jobs that cannot be decoded. */
  readonly onError?: (error: Error, job?: JobSpec) => void;
  /**
   * How long `enqueue` and `schedule` may wait for Redis before they reject with
   * `RedisUnavailableError` naming the server; 0 waits for as long as the connection does.
   * @defaultValue 10_000
   */
  readonly timeoutMs?: number;
  /**
   * Parts per BullMQ job for the sibling jobs of one fan-out throw (a map's element starts, its
   * rollback actors' starts): a throw of 50 is 5 BullMQ jobs of 10. Each part is still handled as
   * its own job under the consumer's concurrency, and retried alone; 1 sends one BullMQ job per part.
   * A worker holds a bundle's parts until it has handled them all: with workers of concurrency
   * below the bundle size, a throw's last bundle runs part after part in one worker while others
   * may be idle; keep it no larger than the workers' concurrency.
   * @defaultValue 10, or, while this queue consumes, the highest concurrency of its open consumers when lower
   * (the throws are sent by the workers that advance the maps)
   */
  readonly bundleSize?: number;
  /**
   * Whether a process that consumes this queue runs the first bundle of a throw it sends itself,
   * at once, instead of waiting for BullMQ to deliver it (the map's next throw is sent by the
   * worker whose element settled the last one, which is then idle), when its consumer has room
   * to start at least half of the bundle's parts now (else the bundle goes through BullMQ, to
   * whichever worker is free). The bundle is still added,
   * delayed by the worker's `lockDurationMs` (the delay renewed while its parts run, as a lock is)
   * and removed once they have been handled: if this process dies meanwhile, the bundle is
   * delivered to another worker when the delay runs out, as a dead worker's job is when its lock
   * does. Its parts run under the consumer's concurrency like any others.
   * @defaultValue true
   */
  readonly eagerBundle?: boolean;
}

/** The BullMQ queue port. */
export interface BullmqQueue extends Queue {
  /** The queue's name in Redis. */
  readonly name: string;
  /** The underlying BullMQ queue, for inspection and administration (counts, job states, dashboards). */
  readonly bullQueue: BullQueue<BullmqJobData>;
}

/** What a BullMQ job holds: readable routing fields, and the whole spec packed with the one Packr. */
export interface BullmqJobData {
  /**
   * The actor's kind and id (`execution:order-1`), or `sweep`: for reading the queue in a
   * dashboard. A bundle names its first part's actor and its count (`execution:order-1.lines.0 +4`).
   */
  readonly actor: string;
  /** Base64 msgpack of the {@link JobSpec} (events may hold Dates, bigints, errors: JSON would lose them); of a bundle, of its specs in order. */
  readonly spec: string;
  /** A bundle's part count; absent on a job of one spec. */
  readonly parts?: number;
}

const DEFAULT_QUEUE_NAME = 'xreactor';
const DEFAULT_REMOVE_ON_COMPLETE_AGE_S = 3600;
const DEFAULT_REMOVE_ON_FAIL_AGE_S = 7 * 24 * 3600;
const DEFAULT_MAX_ATTEMPTS = 25;
const DEFAULT_BACKOFF_MS = 100;
const DEFAULT_MAX_BACKOFF_MS = 30_000;
const DEFAULT_MAX_STALLED_COUNT = 25;
const BACKOFF_TYPE = 'xreactor';
/** BullMQ's own default `lockDuration`: the delay of an eagerly run bundle's job when no `lockDurationMs` is given. */
const DEFAULT_LOCK_DURATION_MS = 30_000;
/** The BullMQ job name of a bundle. */
const BUNDLE_JOB_NAME = 'bundle';

/**
 * Encodes a job id for BullMQ, which refuses custom ids that look like integers (`"42"`) and
 * ids containing `:` (except legacy three-part ids). Injective: `%` becomes `%25`, `:` becomes
 * `%3A`, and an integer-like id gets the prefix `%i` (which no escaped id can start with).
 */
export function encodeJobId(id: string): string {
  const escaped = id.replaceAll('%', '%25').replaceAll(':', '%3A');
  return String(parseInt(escaped, 10)) === escaped ? `%i${escaped}` : escaped;
}

/** Reverses {@link encodeJobId}. */
export function decodeJobId(encoded: string): string {
  const body = encoded.startsWith('%i') ? encoded.slice(2) : encoded;
  return body.replace(/%3A|%25/g, (escape) => (escape === '%3A' ? ':' : '%'));
}

/** The server a connection (an ioredis instance, or options BullMQ connects with) points at. */
function deadlineTargetOf(connection: BullmqQueueOptions['connection']): DeadlineTarget {
  if (typeof (connection as Partial<Redis>).duplicate === 'function') return targetOf(connection as Redis | Cluster);
  const o = connection as { host?: string; port?: number; path?: string };
  return { address: o.path ?? `${o.host ?? '127.0.0.1'}:${o.port ?? 6379}`, status: () => 'connecting (BullMQ\'s own connection)' };
}

/**
 * Creates the BullMQ queue port.
 * @example
 * const queue = createBullmqQueue({ connection: { host: '127.0.0.1', port: 6379 } });
 * const consumer = queue.consume(handle, { concurrency: 8 });
 * await queue.enqueue([{ id: 'e1-1', kind: 'advance', actor: { kind: 'execution', id: 'e1' } }]);
 * await consumer.close();
 * await queue.close();
 */
export function createBullmqQueue(options: BullmqQueueOptions): BullmqQueue {
  const name = options.queueName ?? DEFAULT_QUEUE_NAME;
  const onError = options.onError ?? (() => undefined);
  const backoffMs = options.backoffMs ?? DEFAULT_BACKOFF_MS;
  const maxBackoffMs = options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
  const prefix = options.prefix === undefined ? {} : { prefix: options.prefix };
  // ioredis' own option and client types are what BullMQ accepts at run time; its declared
  // ConnectionOptions are a structural copy that differs in details.
  const connection = options.connection as ConnectionOptions;
  const bullQueue = new BullQueue<BullmqJobData>(name, {
    connection,
    ...prefix,
    defaultJobOptions: {
      attempts: options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      backoff: { type: BACKOFF_TYPE },
      removeOnComplete: { age: options.removeOnCompleteAgeS ?? DEFAULT_REMOVE_ON_COMPLETE_AGE_S },
      removeOnFail: { age: options.removeOnFailAgeS ?? DEFAULT_REMOVE_ON_FAIL_AGE_S },
    },
  });
  bullQueue.on('error', (error) => onError(error));
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  const target = deadlineTargetOf(options.connection);
  // Each consumer of this queue, with its concurrency.
  const consumers = new Map<LocalConsumer, number>();
  const eagerBundle = options.eagerBundle ?? true;
  // Without a bundleSize, a process that consumes bundles no more parts than it handles at once
  // (a worker holds a bundle's parts until it has handled them all); one that only sends, DEFAULT_BUNDLE_SIZE.
  const bundleSizeNow = () => Math.max(1, Math.floor(options.bundleSize ?? (consumers.size === 0 ? DEFAULT_BUNDLE_SIZE : Math.min(DEFAULT_BUNDLE_SIZE, Math.max(...consumers.values())))));
  let closed = false;
  const add = (bulk: { name: string; data: BullmqJobData; opts: { jobId: string; delay?: number } }[], first: JobSpec): Promise<Job<BullmqJobData>[]> =>
    withDeadline(
      target,
      timeoutMs,
      { call: `queue.enqueue (job ${first.id})`, ...(first.actor === undefined ? {} : { executionId: first.actor.id }) },
      // One job (a hand-off, a timer): a plain add is one script call; addBulk wraps its calls in MULTI/EXEC.
      bulk.length === 1 ? bullQueue.add(bulk[0]!.name, bulk[0]!.data, bulk[0]!.opts).then((job) => [job]) : bullQueue.addBulk(bulk),
    );
  const single = (spec: JobSpec, delayMs = spec.delayMs) => ({ name: spec.kind, data: toJobData(spec), opts: { jobId: jobIdOf(spec), ...(delayMs ? { delay: delayMs } : {}) } });

  return {
    name,
    bullQueue,

    async enqueue(jobs, enqueueOptions?: EnqueueOptions) {
      if (closed) throw new XreactorError('queue_closed', `cannot enqueue: queue "${name}" is closed`);
      if (jobs.length === 0) return;
      const bundleSize = bundleSizeNow();
      const bundled = enqueueOptions?.bundle === true && bundleSize > 1 && jobs.length > 1 && jobs.every((spec) => !spec.delayMs);
      if (!bundled) {
        await add(jobs.map((spec) => single(spec)), jobs[0]!);
        return;
      }
      const firstParts = bundleSizes(jobs.length, bundleSize)[0]!;
      // A consumer with room to start at least half of the first bundle now; a busier one leaves it to other workers.
      const local = eagerBundle ? [...consumers.keys()].find((consumer) => consumer.open() && consumer.room() >= Math.ceil(firstParts / 2)) : undefined;
      if (local === undefined) {
        await add(bundlesOf(jobs, bundleSize), jobs[0]!);
        return;
      }
      // The first bundle runs here at once; its job is added delayed, in case this process dies.
      // Its parts start first: their first commits are in flight while the bundles are encoded and
      // added (a throw's critical path, docs/design/map.md §9.3). Nothing is lost if this process
      // dies before the add lands: the enqueue is its sender's effect, performed again (same ids).
      const eager = jobs.slice(0, firstParts);
      const eagerId = bundleIdOf(eager);
      const added = (async () => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        const bundles = bundlesOf(jobs, bundleSize);
        const first = bundles[0]!;
        return add([{ ...first, opts: { ...first.opts, delay: local.safetyDelayMs } }, ...bundles.slice(1)], jobs[0]!);
      })();
      local.runEagerly(eager, eagerId, added.then((list) => list[0]));
      await added;
    },

    async schedule(schedulerId, everyMs, job) {
      if (closed) throw new XreactorError('queue_closed', `cannot schedule: queue "${name}" is closed`);
      await withDeadline(target, timeoutMs, { call: `queue.schedule (${schedulerId})` }, bullQueue.upsertJobScheduler(schedulerId, { every: everyMs }, { name: job.kind, data: toJobData({ ...job, id: schedulerId }) }));
    },

    consume(handler, consumeOptions = {}) {
      if (closed) throw new XreactorError('queue_closed', `cannot consume: queue "${name}" is closed`);
      checkWorkerConnection(options.connection);
      const consumer = createConsumer(handler, consumeOptions, {
        name,
        connection,
        prefix,
        worker: options.worker ?? {},
        backoff: (attemptsMade) => Math.min(backoffMs * 2 ** Math.max(0, attemptsMade - 1), maxBackoffMs),
        onError,
        // A part of a bundle that failed to be handled is added again alone, after the first backoff.
        requeue: (specs) => add(specs.map((spec) => single(spec, backoffMs)), specs[0]!).then(() => undefined),
      });
      consumers.set(consumer, Math.max(1, consumeOptions.concurrency ?? 1));
      return {
        close: async (closeOptions) => {
          await consumer.close(closeOptions);
          consumers.delete(consumer);
        },
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...consumers.keys()].map((consumer) => consumer.close()));
      consumers.clear();
      await bullQueue.close();
    },
  };
}

/** A consumer of this process, which can run a throw's first bundle at once (`eagerBundle`). */
interface LocalConsumer extends Consumer {
  /** Whether it takes work: not closing. */
  open(): boolean;
  /** Handlers it could start now (free permits of its concurrency). */
  room(): number;
  /** How long an eagerly run bundle's job is delayed (and the delay renewed while its parts run): the workers' lock duration. */
  readonly safetyDelayMs: number;
  /**
   * Run a bundle's parts here now, while its job is added delayed (`added`); once they have been
   * handled the job is removed. Interrupted (a forced close) or unable to add a failed part again
   * alone, the job is left to be delivered when its delay runs out.
   */
  runEagerly(specs: readonly JobSpec[], bundleId: string, added: Promise<Job<BullmqJobData> | undefined>): void;
}

interface ConsumerContext {
  readonly name: string;
  readonly connection: ConnectionOptions;
  readonly prefix: { readonly prefix?: string };
  readonly worker: BullmqWorkerOptions;
  readonly backoff: (attemptsMade: number) => number;
  readonly onError: (error: Error, job?: JobSpec) => void;
  readonly requeue: (specs: readonly JobSpec[]) => Promise<void>;
}

/** The bundles of one throw's jobs, in order, with deterministic ids. */
function bundlesOf(jobs: readonly JobSpec[], bundleSize: number): { name: string; data: BullmqJobData; opts: { jobId: string } }[] {
  let from = 0;
  return bundleSizes(jobs.length, bundleSize).map((parts) => {
    const specs = jobs.slice(from, from + parts);
    from += parts;
    const first = specs[0]!;
    return {
      name: BUNDLE_JOB_NAME,
      data: { actor: `${actorLabel(first)} +${parts - 1}`, spec: Buffer.from(encode(specs)).toString('base64'), parts },
      opts: { jobId: bundleIdOf(specs) },
    };
  });
}

/** The BullMQ id of the bundle of these specs, in order. */
const bundleIdOf = (specs: readonly JobSpec[]): string => bundleJobId(specs.map(jobIdOf));

function createConsumer(handler: JobHandler, options: ConsumeOptions, context: ConsumerContext): LocalConsumer {
  const controllers = new Set<AbortController>();
  let forced: Error | undefined;
  let closing = false;
  // Bundles run eagerly and not yet done: a graceful close waits for them.
  const eager = new Set<Promise<void>>();
  const safetyDelayMs = context.worker.lockDurationMs ?? DEFAULT_LOCK_DURATION_MS;
  // Handlers running at once, the parts of bundles included: the consumer's concurrency.
  const permits = new Permits(options.concurrency ?? 1);
  // Errors a bundle fails with that its parts reported already (the 'failed' event skips them).
  const reportedParts = new WeakSet<Error>();
  // A throwing onError must not cut the handling of a bundle's other parts short.
  const report = (error: Error, spec?: JobSpec) => {
    try {
      context.onError(error, spec);
    } catch {
      // The callback's own failure has nowhere better to go.
    }
  };
  /**
   * `work` with the signal the handlers of one BullMQ job get (a bundle's parts share it): it
   * aborts on BullMQ's cancellation of the job and on a forced close. A part still waiting for its
   * permit then finds it aborted when its turn comes.
   */
  const controlled = async <T>(bullSignal: AbortSignal | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    const controller = new AbortController();
    const forward = () => controller.abort(bullSignal?.reason);
    bullSignal?.addEventListener('abort', forward, { once: true });
    if (bullSignal?.aborted === true) forward();
    controllers.add(controller);
    if (forced) controller.abort(forced);
    try {
      return await work(controller.signal);
    } finally {
      controllers.delete(controller);
      bullSignal?.removeEventListener('abort', forward);
    }
  };
  const handle = (spec: JobSpec, signal: AbortSignal) => permits.with(() => handler(spec, signal));
  const worker = new Worker<BullmqJobData>(
    context.name,
    // Three parameters: BullMQ passes its cancellation signal only to processors that declare it.
    async (job: Job<BullmqJobData>, _token?: string, bullSignal?: AbortSignal) => {
      const specs = fromJobData(job);
      if (job.data.parts === undefined) {
        try {
          await controlled(bullSignal, (signal) => handle(specs[0]!, signal));
        } catch (error) {
          // A rejected job (malformed, its actor gone or unreadable) fails at once: no delivery can help.
          if (error instanceof JobRejectedError) throw new UnrecoverableError(error.message);
          throw error;
        }
        return;
      }
      await controlled(bullSignal, (signal) => handleBundle(specs, String(job.id), signal));
    },
    {
      connection: context.connection,
      ...context.prefix,
      concurrency: options.concurrency ?? 1,
      autorun: true,
      maxStalledCount: context.worker.maxStalledCount ?? DEFAULT_MAX_STALLED_COUNT,
      ...(context.worker.lockDurationMs === undefined ? {} : { lockDuration: context.worker.lockDurationMs }),
      ...(context.worker.stalledIntervalMs === undefined ? {} : { stalledInterval: context.worker.stalledIntervalMs }),
      settings: { backoffStrategy: (attemptsMade) => context.backoff(attemptsMade) },
    },
  );
  /**
   * A bundle's parts, at once under the permits. A part rejected is reported and dropped (alone it
   * would fail at once); a part that threw otherwise is reported and added again alone, and the
   * bundle completes. Interrupted (a forced close, BullMQ's cancellation) or unable to add them,
   * the bundle fails instead and is delivered again whole: its parts that were handled find their
   * actors moved on, and do nothing.
   */
  const handleBundle = async (specs: readonly JobSpec[], bundleId: string, signal: AbortSignal): Promise<void> => {
    const outcomes = await Promise.allSettled(specs.map((spec) => handle(spec, signal)));
    const failed = outcomes.flatMap((outcome, i) =>
      outcome.status === 'fulfilled' ? [] : [{ spec: specs[i]!, error: outcome.reason instanceof Error ? outcome.reason : new Error(String(outcome.reason)) }],
    );
    for (const { spec, error } of failed) report(error, spec);
    const again = failed.filter(({ error }) => !(error instanceof JobRejectedError));
    if (again.length === 0) return;
    // The job's signal: aborted by a forced close or by BullMQ's cancellation.
    if (signal.aborted) {
      reportedParts.add(again[0]!.error);
      throw again[0]!.error;
    }
    try {
      await context.requeue(again.map(({ spec }) => spec));
    } catch (error) {
      throw new XreactorError('queue_requeue_failed', `bundle ${bundleId}: ${again.length} of its ${specs.length} jobs failed and could not be added again alone (${(error as Error).message}); the bundle is delivered again`, {
        retryable: true,
        cause: error,
      });
    }
  };
  /**
   * An eagerly run bundle: its parts as a delivered bundle's, its delayed job's delay renewed every
   * half of it meanwhile, then the job removed. Left in place when the parts were interrupted or a
   * failed part could not be added again (the bundle is then delivered when the delay runs out),
   * and when it could not be removed (locked: the delay ran out and a worker took it; its parts
   * find their actors moved on).
   */
  const runBundleEagerly = async (specs: readonly JobSpec[], bundleId: string, added: Promise<Job<BullmqJobData> | undefined>): Promise<void> => {
    let job: Job<BullmqJobData> | undefined;
    added.then((j) => void (job = j)).catch(() => undefined);
    const renew = setInterval(() => void job?.changeDelay(safetyDelayMs).catch(() => undefined), Math.max(1, safetyDelayMs / 2));
    renew.unref();
    let handled = true;
    try {
      await controlled(undefined, (signal) => handleBundle(specs, bundleId, signal));
    } catch (error) {
      handled = false;
      if (!reportedParts.has(error as Error)) report(error as Error, specs[0]);
    } finally {
      clearInterval(renew);
    }
    // Not added (the enqueue rejected, and whoever sent it performs it again): nothing to remove.
    const done = await added.catch(() => undefined);
    if (handled && done !== undefined) await done.remove().catch(() => undefined);
  };
  worker.on('error', (error) => report(error));
  worker.on('failed', (job, error) => {
    // A bundle failed with a part's error: its parts were reported one by one as they failed.
    // Otherwise (not decodable, its parts not added again) the bundle's own error is reported.
    if (reportedParts.has(error)) return;
    let spec: JobSpec | undefined;
    try {
      spec = job ? fromJobData(job)[0] : undefined;
    } catch {
      spec = undefined;
    }
    report(error, spec);
  });

  return {
    open: () => !closing,
    room: () => permits.free,
    safetyDelayMs,
    runEagerly: (specs, bundleId, added) => {
      const run = runBundleEagerly(specs, bundleId, added).finally(() => eager.delete(run));
      eager.add(run);
    },
    close: async (closeOptions) => {
      closing = true;
      // A forced close may follow a graceful one that is still waiting: it aborts the jobs then.
      if (closeOptions?.force === true && !forced) {
        forced = new XreactorError('consumer_closed', 'the consumer was closed with force: the job will be delivered again');
        for (const controller of controllers) controller.abort(forced);
      }
      // Always BullMQ's graceful close: it waits for the processors (aborted ones end promptly) and
      // records their failures, so aborted jobs are retried after the backoff, not after the lock
      // expires. Worker.close returns the same promise when called again. Then the bundles run
      // eagerly (started by those processors, so after them): aborted, they leave their delayed jobs.
      await worker.close();
      while (eager.size > 0) await Promise.allSettled([...eager]);
    },
  };
}

function jobIdOf(spec: JobSpec): string {
  if (typeof spec.id !== 'string' || spec.id === '') {
    throw new XreactorError('queue_job_invalid', `job for ${spec.actor === undefined ? 'a sweep' : `${spec.actor.kind} "${spec.actor.id}"`} has no id: every job needs a deterministic id`);
  }
  return encodeJobId(spec.id);
}

const actorLabel = (spec: JobSpec): string => (spec.actor === undefined ? 'sweep' : `${spec.actor.kind}:${spec.actor.id}`);

function toJobData(spec: JobSpec): BullmqJobData {
  return { actor: actorLabel(spec), spec: Buffer.from(encode(spec)).toString('base64') };
}

function checkSpec(spec: JobSpec): JobSpec {
  if (typeof spec?.id !== 'string' || (spec.kind !== 'sweep' && (typeof spec.actor?.kind !== 'string' || typeof spec.actor.id !== 'string'))) throw new Error('not a job spec');
  return spec;
}

/**
 * The specs a job carries: one, or a bundle's parts in order.
 * @throws UnrecoverableError when the job was not written by this adapter: BullMQ fails it at once.
 */
function fromJobData(job: Job<BullmqJobData>): JobSpec[] {
  try {
    const decoded = decode(Buffer.from(job.data.spec, 'base64')) as JobSpec | JobSpec[];
    if (job.data.parts === undefined) return [checkSpec(decoded as JobSpec)];
    if (!Array.isArray(decoded) || decoded.length !== job.data.parts || decoded.length === 0) throw new Error(`not a bundle of ${String(job.data.parts)} job specs`);
    return decoded.map(checkSpec);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new UnrecoverableError(
      `BullMQ job "${String(job.id)}" in queue "${job.queueName}" does not hold an xreactor job spec (${reason}): ` +
        'another program writes to this queue; give xreactor its own queueName or prefix',
    );
  }
}

function checkWorkerConnection(connection: RedisOptions | Redis | Cluster): void {
  if (typeof (connection as Partial<Redis>).duplicate !== 'function' || (connection as Cluster).isCluster) return;
  const maxRetries = (connection as Redis).options.maxRetriesPerRequest;
  if (maxRetries !== null) {
    throw new XreactorError(
      'queue_option_invalid',
      `the ioredis instance given as connection has maxRetriesPerRequest ${String(maxRetries)}; BullMQ workers need null: ` +
        'create it with new Redis({ ..., maxRetriesPerRequest: null }), or pass connection options instead',
    );
  }
}
