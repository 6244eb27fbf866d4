/**
 * The in-process queue: the embedded default (`auto`) and the deterministic queue of the unit
 * lane (`manual`, `inline`), whose pending jobs tests inspect, reorder and drain by hand.
 *
 * Delivery order: jobs that are due wait in a FIFO; a delayed job joins the end of that FIFO
 * when the clock reaches its due time (as BullMQ promotes delayed jobs to the wait list). The
 * queue promotes due jobs before every enqueue, take and inspection, so the order depends only
 * on the sequence of calls and clock readings, never on when a test happens to look.
 *
 * Every job has a purpose ({@link jobPurpose}, from the actor it addresses); a purpose's FIFO is
 * the FIFO filtered by purpose. `drainRounds` empties those FIFOs purpose by purpose, in rounds.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { JobRejectedError, XreactorError } from '../errors/index.js';
import { systemClock } from '../internal/clock.js';
import type { Clock } from '../internal/clock.js';
import { compileDrainRoundsOptions, describeIds, drainLimitError, Fifo, positiveInteger, validateJob } from './in-process-support.js';
import { jobPurpose } from './purpose.js';
import type { DrainRoundsOptions, DrainRoundsResult, JobPurpose } from './purpose.js';
import type { ConsumeOptions, Consumer, JobHandler, JobKind, JobSpec, Queue } from './queue.js';

/**
 * How jobs reach the consumer.
 * - `manual`: jobs wait until the test calls {@link InProcessQueue.runNext}, {@link InProcessQueue.drain}
 *   or {@link InProcessQueue.drainRounds}.
 * - `inline`: `enqueue` runs the jobs before it resolves. A job enqueued by a handler runs after
 *   that handler's job finishes, from one FIFO worked by the outermost call (no recursion).
 * - `auto`: jobs run on a later macrotask with the consumer's concurrency; delayed jobs run when
 *   the clock's `sleep` until their due time returns (a test clock returns at once, so virtual
 *   time jumps to each due time in turn and the delays show in its `sleeps`). The embedded default.
 *
 * Delayed jobs in `manual` and `inline` mode are never timed: they are pending, not due, until
 * the clock reaches their time; the next enqueue, `runNext` or `drain` then finds them due, and
 * `drain({ includeDelayed: true })` sleeps on the clock to reach them.
 */
export type InProcessQueueMode = 'manual' | 'inline' | 'auto';

/** Options of {@link createInProcessQueue}. */
export interface InProcessQueueOptions {
  /** @defaultValue `'auto'` */
  readonly mode?: InProcessQueueMode;
  /** Decides when delayed jobs are due. @defaultValue the system clock */
  readonly clock?: Clock;
  /**
   * Deliveries of a job whose handler keeps throwing before it is recorded in `failed()`.
   * @defaultValue 25
   */
  readonly maxAttempts?: number;
  /**
   * Delay before a job whose handler threw is delivered again, by failed attempt (1, 2, ...).
   * @defaultValue no delay: the job goes to the end of the FIFO
   */
  readonly redeliveryDelayMs?: (attempt: number) => number;
  /**
   * Ids of handled jobs remembered for deduplication (the oldest are forgotten first).
   * @defaultValue 10000
   */
  readonly handledIdsKept?: number;
  /** Told of every handler error (the job is redelivered or, after `maxAttempts`, failed). */
  readonly onError?: (error: unknown, job: JobSpec, attempt: number) => void;
  /** Runs a task on a later macrotask (`auto` and `inline` scheduling). @defaultValue `setImmediate` */
  readonly defer?: (task: () => void) => void;
}

/** Selects pending jobs. */
export interface JobFilter {
  readonly kind?: JobKind;
  /** Jobs of this actor id only. */
  readonly actorId?: string;
  /** Jobs of this purpose only ({@link jobPurpose}). */
  readonly purpose?: JobPurpose;
}

/** A pending job with its delivery state. */
export interface PendingJob {
  readonly job: JobSpec;
  /** Clock time from which the job may be delivered. */
  readonly dueAt: number;
  /** Failed deliveries so far. */
  readonly attempts: number;
  /** What the handler threw on the last failed delivery. */
  readonly lastError?: unknown;
}

/** A job whose handler threw on every one of `attempts` deliveries. */
export interface FailedJob {
  readonly job: JobSpec;
  readonly attempts: number;
  readonly error: unknown;
}

/** Options of {@link InProcessQueue.drain}. */
export interface DrainOptions {
  /**
   * Handler runs after which a drain that still finds due jobs throws (a likely loop).
   * @defaultValue 10000
   */
  readonly maxJobs?: number;
  /**
   * Also wait for delayed jobs: when nothing is due, sleep on the clock until the next one is.
   * With a test clock this jumps virtual time at once; with the system clock it really waits.
   * @defaultValue false
   */
  readonly includeDelayed?: boolean;
}

/** The in-process queue and its test controls. */
export interface InProcessQueue extends Queue {
  readonly mode: InProcessQueueMode;
  /** Pending jobs in delivery order: due jobs first, then delayed jobs by due time. */
  pending(filter?: JobFilter): JobSpec[];
  /** Like {@link pending}, with due times and failed attempts. */
  inspect(filter?: JobFilter): PendingJob[];
  /**
   * Move these due jobs to the front, in this order. Reordering the jobs of one purpose reorders
   * that purpose's FIFO and leaves the other purposes' as they were.
   * @example
   * // deliver the pending element jobs in reverse
   * queue.reorder(queue.pending({ purpose: 'map-element' }).map((job) => job.id).reverse());
   * @throws XreactorError (`queue_job_not_pending`) when an id is not pending or not yet due.
   */
  reorder(ids: readonly string[]): void;
  /** Run the first due job; `false` when none is due. Jobs run one at a time. */
  runNext(): Promise<boolean>;
  /**
   * Run due jobs one at a time, including those enqueued meanwhile, until none is due and none
   * is in progress. Resolves with the number of handler runs; stops early if the consumer closes.
   * @throws XreactorError (`queue_drain_limit`) past `maxJobs`, naming the execution that loops.
   */
  drain(options?: DrainOptions): Promise<number>;
  /**
   * Manual mode: drain in rounds, as the seed harness does. A round takes the purposes in `order`
   * and, for each, runs the first due job of that purpose until none is left: a job of that
   * purpose enqueued meanwhile joins the back of its FIFO and runs in the same pass; a job of a
   * purpose already passed waits for the next round. The drain ends when a round runs nothing
   * (and none is in progress), or early if the consumer closes.
   * @example
   * await queue.drainRounds({ only: ['map-settle'] });
   * queue.reorder(queue.pending({ purpose: 'map-element' }).map((job) => job.id).reverse());
   * await queue.drainRounds({ delayed: 'as-due' });
   * @throws XreactorError (`queue_drain_limit`) past `maxJobs`, naming the actor that loops;
   * (`queue_mode_invalid`) when the queue is not in manual mode; (`queue_option_invalid`).
   */
  drainRounds(options?: DrainRoundsOptions): Promise<DrainRoundsResult>;
  /** Jobs that failed on every allowed delivery, in the order they failed. */
  failed(): FailedJob[];
}

const DEFAULT_MAX_ATTEMPTS = 25;
const DEFAULT_HANDLED_IDS_KEPT = 10_000;
const DEFAULT_DRAIN_MAX_JOBS = 10_000;
/** Jobs a drain remembers to name the execution that loops. */
const LOOP_WINDOW = 1_000;

interface Entry {
  readonly spec: JobSpec;
  readonly purpose: JobPurpose;
  dueAt: number;
  seq: number;
  attempts: number;
  lastError?: unknown;
}

interface ConsumerState {
  readonly handler: JobHandler;
  readonly concurrency: number;
  active: number;
  closing: boolean;
  /** One signal for every job of the consumer: only a forced close of the consumer aborts jobs. */
  readonly controller: AbortController;
  closed?: Promise<void>;
}

/**
 * Creates an in-process queue.
 *
 * Decided behaviours: a second `consume` while a consumer is open throws (one consumer per
 * queue; raise its concurrency instead). Ids are deduplicated while pending, in progress,
 * failed, or among the last `handledIdsKept` handled. A throwing handler never loses its job:
 * it is delivered again (after `redeliveryDelayMs`) up to `maxAttempts` times, then kept in
 * `failed()`. `manual` and `inline` run one job at a time whatever the concurrency.
 * @example
 * const clock = createTestClock();
 * const queue = createInProcessQueue({ mode: 'manual', clock });
 * queue.consume(handle);
 * await queue.enqueue([{ id: 'e1-1', kind: 'advance', actor: { kind: 'execution', id: 'e1' } }]);
 * queue.reorder(['e1-1']);
 * await queue.drain();
 */
export function createInProcessQueue(options: InProcessQueueOptions = {}): InProcessQueue {
  return new InProcessQueueImpl(options);
}

class InProcessQueueImpl implements InProcessQueue {
  readonly mode: InProcessQueueMode;
  readonly #clock: Clock;
  readonly #maxAttempts: number;
  readonly #redeliveryDelayMs: (attempt: number) => number;
  readonly #handledIdsKept: number;
  readonly #onError: ((error: unknown, job: JobSpec, attempt: number) => void) | undefined;
  readonly #defer: (task: () => void) => void;
  /** Pending and in-progress jobs by id. */
  readonly #entries = new Map<string, Entry>();
  /** Due jobs in delivery order. */
  readonly #waiting = new Fifo<Entry>();
  /** Jobs not yet due, sorted by (dueAt, seq). */
  readonly #delayed: Entry[] = [];
  readonly #handled = new Set<string>();
  /** The handled ids in the order they were remembered, as a ring: the oldest is overwritten. */
  readonly #handledOrder: string[] = [];
  #handledCount = 0;
  readonly #failed = new Map<string, FailedJob>();
  /**
   * Marks code running inside one of this queue's handlers, to tell a nested enqueue from a
   * concurrent one. Inline mode only: on Node 20 an active AsyncLocalStorage costs every promise.
   */
  readonly #insideHandler: AsyncLocalStorage<InProcessQueueImpl> | undefined;
  #consumer: ConsumerState | undefined;
  #running = 0;
  #settleWaiters: (() => void)[] = [];
  #seq = 0;
  #closed = false;
  #scheduled = false;
  #timer: { readonly at: number; readonly controller: AbortController } | undefined;
  #inlinePump: Promise<void> | undefined;
  /** During a `drainRounds({ delayed: 'as-due' })`: delayed jobs join the FIFO when enqueued. */
  #asDue = false;

  constructor(options: InProcessQueueOptions) {
    this.mode = options.mode ?? 'auto';
    this.#insideHandler = this.mode === 'inline' ? new AsyncLocalStorage() : undefined;
    this.#clock = options.clock ?? systemClock;
    this.#maxAttempts = positiveInteger(options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, 'maxAttempts');
    this.#redeliveryDelayMs = options.redeliveryDelayMs ?? (() => 0);
    this.#handledIdsKept = positiveInteger(options.handledIdsKept ?? DEFAULT_HANDLED_IDS_KEPT, 'handledIdsKept');
    this.#onError = options.onError;
    this.#defer = options.defer ?? ((task) => void setImmediate(task));
  }

  async enqueue(jobs: readonly JobSpec[]): Promise<void> {
    if (this.#closed) throw new XreactorError('queue_closed', 'cannot enqueue: the in-process queue is closed');
    for (const job of jobs) validateJob(job);
    this.#promoteDue();
    const now = this.#clock.now();
    for (const job of jobs) {
      if (this.#isKnown(job.id)) continue;
      const entry: Entry = { spec: { ...job }, purpose: jobPurpose(job), dueAt: now + (job.delayMs ?? 0), seq: ++this.#seq, attempts: 0 };
      this.#entries.set(job.id, entry);
      this.#place(entry, now);
    }
    if (this.mode === 'auto') this.#schedule();
    else if (this.mode === 'inline') await this.#enqueueInline();
  }

  consume(handler: JobHandler, options: ConsumeOptions = {}): Consumer {
    if (this.#closed) throw new XreactorError('queue_closed', 'cannot consume: the in-process queue is closed');
    if (this.#consumer) {
      throw new XreactorError(
        'queue_consumer_exists',
        'this in-process queue already has a consumer: close it before consuming again, or raise its concurrency',
      );
    }
    const state: ConsumerState = {
      handler,
      concurrency: positiveInteger(options.concurrency ?? 1, 'concurrency'),
      active: 0,
      closing: false,
      controller: new AbortController(),
    };
    this.#consumer = state;
    if (this.mode === 'auto') this.#schedule();
    else if (this.mode === 'inline') this.#defer(() => void this.#pumpInline());
    return { close: (closeOptions) => this.#closeConsumer(state, closeOptions?.force ?? false) };
  }

  readonly #schedules = new Map<string, () => void>();
  /** Schedules made so far: part of each scheduled job's id, so a schedule made again never reuses an id already handled. */
  #scheduleEpoch = 0;

  /**
   * Enqueue `job` every `everyMs` as `<schedulerId>.<epoch>.<round>`. A round with no open
   * consumer is skipped (nobody would handle it; the next consumer gets the next round).
   */
  async schedule(schedulerId: string, everyMs: number, job: Omit<JobSpec, 'id' | 'delayMs'>): Promise<void> {
    this.#schedules.get(schedulerId)?.();
    const epoch = (this.#scheduleEpoch += 1);
    let round = 0;
    const stop = this.#clock.every(everyMs, () => {
      round += 1;
      if (this.#consumer === undefined) return;
      this.enqueue([{ ...job, id: `${schedulerId}.${epoch}.${round}` }]).catch(() => undefined);
    });
    this.#schedules.set(schedulerId, stop);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const stop of this.#schedules.values()) stop();
    this.#schedules.clear();
    this.#cancelTimer();
    const consumer = this.#consumer;
    if (consumer) await this.#closeConsumer(consumer, false);
    // Node 20 keeps every enabled AsyncLocalStorage alive and slows every later await with it.
    this.#insideHandler?.disable();
  }

  pending(filter?: JobFilter): JobSpec[] {
    return this.#pendingEntries(filter).map((entry) => entry.spec);
  }

  inspect(filter?: JobFilter): PendingJob[] {
    return this.#pendingEntries(filter).map((entry) => ({
      job: entry.spec,
      dueAt: entry.dueAt,
      attempts: entry.attempts,
      ...(entry.attempts > 0 ? { lastError: entry.lastError } : {}),
    }));
  }

  reorder(ids: readonly string[]): void {
    this.#promoteDue();
    const waiting = new Map(this.#waiting.values().map((entry) => [entry.spec.id, entry]));
    if (new Set(ids).size !== ids.length) {
      throw new XreactorError('queue_job_not_pending', `reorder got an id twice: ${ids.join(', ')}`);
    }
    for (const id of ids) {
      if (waiting.has(id)) continue;
      const delayed = this.#delayed.find((entry) => entry.spec.id === id);
      const message = delayed
        ? `job "${id}" is not due until ${delayed.dueAt} (clock at ${this.#clock.now()}): advance the clock before reordering it`
        : `job "${id}" is not pending (pending: ${describeIds([...waiting.keys()])}): it was never enqueued, already ran, or is running`;
      throw new XreactorError('queue_job_not_pending', message);
    }
    const moved = new Set(ids);
    this.#waiting.replace([...ids.map((id) => waiting.get(id)!), ...this.#waiting.values().filter((entry) => !moved.has(entry.spec.id))]);
  }

  async runNext(): Promise<boolean> {
    this.#promoteDue();
    if (this.#waiting.size === 0) return false;
    const consumer = this.#requireConsumer('runNext');
    await this.#run(this.#take()!, consumer);
    return true;
  }

  async drain(options: DrainOptions = {}): Promise<number> {
    const maxJobs = options.maxJobs ?? DEFAULT_DRAIN_MAX_JOBS;
    const consumer = this.#consumer;
    const recent: JobSpec[] = [];
    let ran = 0;
    for (;;) {
      if (consumer && (consumer.closing || this.#consumer !== consumer)) return ran;
      this.#promoteDue();
      if (this.#waiting.size > 0) {
        const active = consumer ?? this.#requireConsumer('drain');
        if (ran >= maxJobs) throw drainLimitError(maxJobs, recent);
        const entry = this.#take()!;
        recent[ran % LOOP_WINDOW] = entry.spec;
        ran += 1;
        await this.#run(entry, active);
      } else if (this.#running > 0) {
        await new Promise<void>((resolve) => this.#settleWaiters.push(resolve));
      } else if (options.includeDelayed === true && this.#delayed.length > 0) {
        this.#requireConsumer('drain');
        await this.#clock.sleep(Math.max(0, this.#delayed[0]!.dueAt - this.#clock.now()));
      } else {
        return ran;
      }
    }
  }

  async drainRounds(options: DrainRoundsOptions = {}): Promise<DrainRoundsResult> {
    if (this.mode !== 'manual') {
      throw new XreactorError(
        'queue_mode_invalid',
        `drainRounds drains a manual queue, and this queue's mode is "${this.mode}": create it with createInProcessQueue({ mode: 'manual' })`,
      );
    }
    const plan = compileDrainRoundsOptions(options, DEFAULT_DRAIN_MAX_JOBS);
    const consumer = this.#consumer;
    const recent: JobSpec[] = [];
    let jobs = 0;
    let rounds = 0;
    const stopped = () => consumer !== undefined && (consumer.closing || this.#consumer !== consumer);
    if (plan.delayed === 'as-due') this.#beginAsDue();
    try {
      for (;;) {
        let ranInRound = 0;
        for (const purpose of plan.purposes) {
          for (;;) {
            if (stopped()) return { rounds: ranInRound > 0 ? rounds + 1 : rounds, jobs };
            this.#promoteDue();
            const index = this.#waiting.findIndex((entry) => entry.purpose === purpose);
            if (index < 0) break;
            const active = consumer ?? this.#requireConsumer('drainRounds');
            if (jobs >= plan.maxJobs) throw drainLimitError(plan.maxJobs, recent, 'drainRounds');
            const entry = this.#waiting.removeAt(index)!;
            recent[jobs % LOOP_WINDOW] = entry.spec;
            jobs += 1;
            ranInRound += 1;
            const early = entry.dueAt - this.#clock.now();
            if (early > 0) await this.#clock.sleep(early);
            await this.#run(entry, active);
          }
        }
        if (ranInRound > 0) {
          rounds += 1;
          continue;
        }
        if (this.#running > 0) {
          await new Promise<void>((resolve) => this.#settleWaiters.push(resolve));
          continue;
        }
        const next = plan.delayed === 'wait' ? this.#delayed.find((entry) => plan.purposes.includes(entry.purpose)) : undefined;
        if (next === undefined) return { rounds, jobs };
        this.#requireConsumer('drainRounds');
        await this.#clock.sleep(Math.max(0, next.dueAt - this.#clock.now()));
      }
    } finally {
      if (plan.delayed === 'as-due') this.#endAsDue();
    }
  }

  failed(): FailedJob[] {
    return [...this.#failed.values()];
  }

  /** Delayed jobs join the FIFO from now on; those already pending join it in the order they were enqueued. */
  #beginAsDue(): void {
    this.#asDue = true;
    const delayed = this.#delayed.splice(0).sort((a, b) => a.seq - b.seq);
    for (const entry of delayed) this.#waiting.push(entry);
  }

  /** Jobs left in the FIFO that are not due yet go back among the delayed jobs. */
  #endAsDue(): void {
    this.#asDue = false;
    const now = this.#clock.now();
    const entries = this.#waiting.values();
    this.#waiting.replace(entries.filter((entry) => entry.dueAt <= now));
    for (const entry of entries) if (entry.dueAt > now) this.#place(entry, now);
  }

  #isKnown(id: string): boolean {
    return this.#entries.has(id) || this.#handled.has(id) || this.#failed.has(id);
  }

  #pendingEntries(filter: JobFilter | undefined): Entry[] {
    this.#promoteDue();
    const entries = [...this.#waiting.values(), ...this.#delayed];
    if (!filter) return entries;
    return entries.filter(
      ({ spec, purpose }) =>
        (filter.kind === undefined || spec.kind === filter.kind) &&
        (filter.actorId === undefined || spec.actor?.id === filter.actorId) &&
        (filter.purpose === undefined || purpose === filter.purpose),
    );
  }

  /** Puts an entry among the due jobs or the delayed ones (during an `as-due` drain, among the due ones). */
  #place(entry: Entry, now: number): void {
    if (entry.dueAt <= now || this.#asDue) {
      this.#waiting.push(entry);
      return;
    }
    let index = this.#delayed.length;
    while (index > 0 && compareDue(this.#delayed[index - 1]!, entry) > 0) index -= 1;
    this.#delayed.splice(index, 0, entry);
  }

  /** Moves delayed jobs whose time has come to the end of the FIFO, in due order. */
  #promoteDue(): void {
    const now = this.#clock.now();
    while (this.#delayed.length > 0 && this.#delayed[0]!.dueAt <= now) {
      this.#waiting.push(this.#delayed.shift()!);
    }
  }

  #take(): Entry | undefined {
    return this.#waiting.shift();
  }

  #requireConsumer(caller: string): ConsumerState {
    if (this.#consumer && !this.#consumer.closing) return this.#consumer;
    throw new XreactorError(
      'queue_no_consumer',
      `${caller} found due jobs but the queue has no open consumer: call queue.consume(handler) first`,
    );
  }

  /** Runs one delivery of a job; never rejects. A throwing handler puts the job back or fails it. */
  async #run(entry: Entry, consumer: ConsumerState): Promise<void> {
    const { signal } = consumer.controller;
    consumer.active += 1;
    this.#running += 1;
    try {
      const { handler } = consumer;
      await (this.#insideHandler
        ? this.#insideHandler.run(this, () => handler(entry.spec, signal))
        : handler(entry.spec, signal));
      this.#entries.delete(entry.spec.id);
      this.#remember(entry.spec.id);
    } catch (error) {
      this.#redeliverOrFail(entry, error);
    } finally {
      consumer.active -= 1;
      this.#running -= 1;
      const waiters = this.#settleWaiters;
      this.#settleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  #redeliverOrFail(entry: Entry, error: unknown): void {
    entry.attempts += 1;
    entry.lastError = error;
    try {
      this.#onError?.(error, entry.spec, entry.attempts);
    } catch {
      // A throwing error observer must not lose the job.
    }
    // A rejected job (malformed, its actor gone or unreadable) fails at once: no delivery can help.
    if (entry.attempts >= this.#maxAttempts || error instanceof JobRejectedError) {
      this.#entries.delete(entry.spec.id);
      this.#failed.set(entry.spec.id, { job: entry.spec, attempts: entry.attempts, error });
      return;
    }
    this.#promoteDue();
    const now = this.#clock.now();
    entry.dueAt = now + Math.max(0, this.#redeliveryDelayMs(entry.attempts));
    entry.seq = ++this.#seq;
    this.#place(entry, now);
    // A delivery run by drain() or runNext() in auto mode: the timer must learn of a delayed retry.
    if (this.mode === 'auto') this.#schedule();
  }

  #remember(id: string): void {
    // A ring, not Set iteration: iterating a Set from its start after many deletes walks the holes.
    const slot = this.#handledCount % this.#handledIdsKept;
    if (this.#handledCount >= this.#handledIdsKept) this.#handled.delete(this.#handledOrder[slot]!);
    this.#handledOrder[slot] = id;
    this.#handledCount += 1;
    this.#handled.add(id);
  }

  /** Stops the consumer taking jobs and waits for its jobs in progress; `force` (also later) aborts them. */
  #closeConsumer(state: ConsumerState, force: boolean): Promise<void> {
    state.closing = true;
    if (this.#consumer === state) {
      this.#consumer = undefined;
      this.#cancelTimer();
    }
    if (force && !state.controller.signal.aborted) {
      state.controller.abort(
        new XreactorError('consumer_closed', 'the consumer was closed with force: the job will be delivered again'),
      );
    }
    state.closed ??= (async () => {
      while (state.active > 0) await new Promise<void>((resolve) => this.#settleWaiters.push(resolve));
    })();
    return state.closed;
  }

  // auto mode

  #schedule(): void {
    if (this.#scheduled || !this.#consumer) return;
    this.#scheduled = true;
    this.#defer(() => {
      this.#scheduled = false;
      this.#fill();
    });
  }

  /** Starts due jobs up to the consumer's concurrency, then waits on the clock for the next delayed one. */
  #fill(): void {
    const consumer = this.#consumer;
    if (!consumer || consumer.closing || this.#closed) return;
    this.#promoteDue();
    while (consumer.active < consumer.concurrency) {
      const entry = this.#take();
      if (!entry) break;
      void this.#run(entry, consumer).then(() => this.#fill());
    }
    this.#armTimer();
  }

  #armTimer(): void {
    const next = this.#delayed[0];
    if (!next) {
      this.#cancelTimer();
      return;
    }
    if (this.#timer && this.#timer.at <= next.dueAt) return;
    this.#cancelTimer();
    const controller = new AbortController();
    const timer = { at: next.dueAt, controller };
    this.#timer = timer;
    this.#clock.sleep(Math.max(0, next.dueAt - this.#clock.now()), controller.signal).then(
      () => {
        if (this.#timer === timer) this.#timer = undefined;
        this.#fill();
      },
      () => undefined,
    );
  }

  #cancelTimer(): void {
    this.#timer?.controller.abort();
    this.#timer = undefined;
  }

  // inline mode

  async #enqueueInline(): Promise<void> {
    if (this.#insideHandler?.getStore() === this && this.#running > 0) return;
    await this.#pumpInline();
  }

  /** Works the FIFO one job at a time; concurrent callers wait for the one pump running. */
  async #pumpInline(): Promise<void> {
    while (this.#inlinePump) await this.#inlinePump;
    const consumer = this.#consumer;
    this.#promoteDue();
    if (!consumer || consumer.closing || this.#waiting.size === 0) return;
    this.#inlinePump = (async () => {
      for (let entry = this.#take(); entry; entry = this.#take()) {
        await this.#run(entry, consumer);
        if (consumer.closing) return;
        this.#promoteDue();
      }
    })();
    try {
      await this.#inlinePump;
    } finally {
      this.#inlinePump = undefined;
    }
  }
}

/** A first-in-first-out list with O(1) push and shift (Map iteration after many deletes is not). */
function compareDue(a: Entry, b: Entry): number {
  return a.dueAt - b.dueAt || a.seq - b.seq;
}
