/**
 * The queue port: how work for an actor moves between processes. A job addresses an actor by kind
 * and id and, optionally, carries the event to deliver to it.
 */

/** A job's kind: advance one actor, or sweep for actors whose process died. */
export type JobKind = 'advance' | 'sweep';

/** Which actor a job advances: its kind (the machine registry's key, `'execution'`) and id. */
export interface ActorAddress {
  readonly kind: string;
  readonly id: string;
}

/** One unit of queued work. */
export interface JobSpec {
  /**
   * Deterministic id: enqueueing the same id twice while the first is still
   * known to the queue adds nothing (re-performing a committed effect is harmless).
   */
  readonly id: string;
  readonly kind: JobKind;
  /** The actor an `advance` job advances (a `sweep` job has none). */
  readonly actor?: ActorAddress;
  /** The event to deliver (as plain data); absent: apply the actor's inbox, else perform its committed outbox. */
  readonly event?: { readonly type: string; readonly [key: string]: unknown };
  /**
   * Deliver `event` through the actor's inbox under this dedupe key (a continue or an interrupt
   * timeout): whichever signal with the key lands first is the only one that ever lands.
   */
  readonly dedupeKey?: string;
  /**
   * Deliver `event` only to the actor at this revision: the event was computed from that state
   * (a sweep's verdict, read from the actor and then from what it waits for). An actor that moved
   * on since gets the job without the event (as a job with none); the next sweep looks again.
   */
  readonly ifRevision?: number;
  /** Deliver no sooner than this many milliseconds from now. */
  readonly delayMs?: number;
  /**
   * A hand-off job carries the state it was sent for, so a worker can make its first commit
   * without reading the store: the revision and snapshot envelope bytes of the commit that handed
   * the run off, and the encoded input. The worker's commit applies only if the stored snapshot
   * is still exactly these bytes; otherwise it reads the store as for any other job.
   */
  readonly handoff?: { readonly revision: number; readonly snapshot: Uint8Array; readonly input: Uint8Array };
  /**
   * The start job of a fan-out map element that does not exist yet: its map, its index and the
   * start payload its map's throw wrote (the element's reactor, map link and input; absent when
   * large: the worker reads it from the map's start payloads). The worker builds the element and
   * its first commit creates it, fenced by its absence (docs/design/map.md §19); an element that
   * exists already (a duplicate start) is read from the store as for any other job. For a fan-out
   * rollback actor (`actor.kind` `element-rollback`), `index` is its position and `payload` (always
   * carried) its rollback start: the element's index, the throw and whether it is the throw's last.
   */
  readonly start?: { readonly map: string; readonly index: number; readonly payload?: Uint8Array };
}

/** Options of one {@link Queue.enqueue} call. */
export interface EnqueueOptions {
  /**
   * The jobs are siblings of one fan-out throw (a map's element starts, its rollback actors'
   * starts): independent of each other and not delayed. A queue may carry several of them in one
   * transport message (the BullMQ adapter's bundles); each is still handled as its own job, under
   * the consumer's concurrency, and retried alone. Enqueueing the same jobs again in one call
   * (a re-performed effect) adds nothing.
   */
  readonly bundle?: boolean;
}

/** Handles one job. Throwing makes the queue redeliver it later. */
export type JobHandler = (job: JobSpec, signal: AbortSignal) => Promise<void>;

/** Options of a consumer. */
export interface ConsumeOptions {
  /**
   * Jobs handled at once (the parts of a bundle count one each).
   * @defaultValue 1
   */
  readonly concurrency?: number;
}

/** A running consumer. */
export interface Consumer {
  /** Stop taking jobs; wait for jobs in progress (whose signal fires at once when `force`). */
  close(options?: { readonly force?: boolean }): Promise<void>;
}

/** The queue port. */
export interface Queue {
  /** Add jobs. Ids already known to the queue are not added again. */
  enqueue(jobs: readonly JobSpec[], options?: EnqueueOptions): Promise<void>;
  /**
   * Enqueue `job` every `everyMs` milliseconds under `schedulerId`. Scheduling the
   * same id again (from any process) replaces the schedule instead of adding one.
   */
  schedule(schedulerId: string, everyMs: number, job: Omit<JobSpec, 'id' | 'delayMs'>): Promise<void>;
  /** Start handling jobs in this process. */
  consume(handler: JobHandler, options?: ConsumeOptions): Consumer;
  /** Release connections. */
  close(): Promise<void>;
}
