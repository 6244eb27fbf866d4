/**
 * A job's purpose: which part of a run it advances, derived from the actor it addresses. The
 * in-process queue drains manual mode purpose by purpose ({@link JOB_PURPOSES} is the order of a
 * round), so the delivery orders of the seed scenarios are reproducible exactly.
 */
import type { JobSpec } from './queue.js';

/**
 * What a job is for.
 * - `execution-advance`: a root or composed execution, sweep jobs, and actors of any other kind.
 * - `map-element`: an element execution of a map, or an execution inside one (a composed child,
 *   an element's timers and wakes).
 * - `map-settle`: a map operation actor (its start, its wakes, its sweeps).
 * - `element-rollback`: an element-rollback actor.
 * - `async-unit`: an async unit actor (kind `unit`).
 */
export type JobPurpose = 'execution-advance' | 'map-element' | 'map-settle' | 'element-rollback' | 'async-unit';

/** Every purpose, in the order a round of `drainRounds` takes them. */
export const JOB_PURPOSES: readonly JobPurpose[] = ['execution-advance', 'map-element', 'map-settle', 'element-rollback', 'async-unit'];

/** Actor kinds with a purpose of their own; executions are told apart by id, other kinds are `execution-advance`. */
const PURPOSE_BY_ACTOR_KIND: ReadonlyMap<string, JobPurpose> = new Map<string, JobPurpose>([
  ['map', 'map-settle'],
  ['element-rollback', 'element-rollback'],
  ['unit', 'async-unit'],
]);

/** An element's index segment: step names cannot start with a digit, so only an element id has one. */
const INDEX_SEGMENT = /^[0-9]+$/;

/**
 * The purpose of `job`, from the actor it addresses alone, so wakes, timers, hand-offs and sweep
 * redispatches are classified without extra data on the job. A `sweep` job (no actor) is
 * `execution-advance`.
 * @example
 * jobPurpose({ id: 'j', kind: 'advance', actor: { kind: 'execution', id: 'order-7.lines.3' } }); // 'map-element'
 * jobPurpose({ id: 'j', kind: 'advance', actor: { kind: 'map', id: 'order-7.lines' } }); // 'map-settle'
 */
export function jobPurpose(job: Pick<JobSpec, 'kind' | 'actor'>): JobPurpose {
  const actor = job.actor;
  if (job.kind === 'sweep' || actor === undefined) return 'execution-advance';
  const own = PURPOSE_BY_ACTOR_KIND.get(actor.kind);
  if (own !== undefined) return own;
  if (actor.kind !== 'execution') return 'execution-advance';
  // The first segment is the root id, which may be all digits; an index segment after it marks
  // an element (`<owner>.<step>.<index>`) or something inside one.
  const segments = actor.id.split('.');
  for (let i = 1; i < segments.length; i += 1) if (INDEX_SEGMENT.test(segments[i]!)) return 'map-element';
  return 'execution-advance';
}

/**
 * When a rounds drain delivers delayed jobs.
 * - `as-due`: as the seed harness does: a delayed job enqueued during the drain joins the back
 *   of its purpose's FIFO at once (one already pending when the drain starts joins the back as
 *   the drain starts, in enqueue order), and the clock is moved to its due time when it runs. Jobs the drain
 *   leaves behind that are not due yet go back to waiting for their time.
 * - `wait`: a delayed job joins the back of its FIFO when it falls due; a round that runs
 *   nothing moves the clock to the next due job of a purpose the drain runs, and goes on.
 * - `hold`: a delayed job joins the back of its FIFO when it falls due; the drain never moves
 *   the clock.
 *
 * The clock is moved with `clock.sleep`: a test clock jumps at once (the delays show in its
 * `sleeps`); the system clock really waits.
 */
export type DelayedDelivery = 'as-due' | 'wait' | 'hold';

/** Options of `InProcessQueue.drainRounds`. */
export interface DrainRoundsOptions {
  /**
   * The order of the purposes in a round: every purpose, each once.
   * @defaultValue {@link JOB_PURPOSES}
   */
  readonly order?: readonly JobPurpose[];
  /**
   * Run jobs of these purposes only; the others stay pending.
   * @defaultValue every purpose
   */
  readonly only?: readonly JobPurpose[];
  /** @defaultValue `'hold'`, as `drain()` without `includeDelayed` */
  readonly delayed?: DelayedDelivery;
  /**
   * Handler runs after which a drain that still finds jobs to run throws (a likely loop).
   * @defaultValue 10000
   */
  readonly maxJobs?: number;
}

/** What a rounds drain did. */
export interface DrainRoundsResult {
  /** Rounds that ran at least one job (the last, empty round is not counted). */
  readonly rounds: number;
  /** Handler runs. */
  readonly jobs: number;
}
