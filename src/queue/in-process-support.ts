/**
 * Helpers of the in-process queue: its FIFO, option and job checks, and the
 * diagnosis of a drain that does not end.
 */
import { XreactorError } from '../errors/index.js';
import { JOB_PURPOSES } from './purpose.js';
import type { DelayedDelivery, DrainRoundsOptions, JobPurpose } from './purpose.js';
import type { JobSpec } from './queue.js';

/** A first-in-first-out list with O(1) push and shift. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head += 1;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  values(): T[] {
    return this.#items.slice(this.#head) as T[];
  }

  /** The place of the first item that matches (0 = the next `shift`), or -1. */
  findIndex(matches: (item: T) => boolean): number {
    for (let index = this.#head; index < this.#items.length; index += 1) {
      if (matches(this.#items[index] as T)) return index - this.#head;
    }
    return -1;
  }

  /** Removes and returns the item at `index` (as {@link findIndex} counts), keeping the order of the others. */
  removeAt(index: number): T | undefined {
    if (index < 0 || index >= this.size) return undefined;
    if (index === 0) return this.shift();
    return this.#items.splice(this.#head + index, 1)[0];
  }

  replace(items: T[]): void {
    this.#items = items;
    this.#head = 0;
  }
}


/** `value`, checked to be a positive integer option. */
export function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new XreactorError('queue_option_invalid', `${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** Refuse a job without an id or with a bad delay. */
export function validateJob(job: JobSpec): void {
  if (typeof job.id !== 'string' || job.id === '') {
    throw new XreactorError('queue_job_invalid', `job for ${job.actor === undefined ? 'a sweep' : `${job.actor.kind} "${job.actor.id}"`} has no id: every job needs a deterministic id`);
  }
  const delay = job.delayMs ?? 0;
  if (!Number.isFinite(delay) || delay < 0) {
    throw new XreactorError('queue_job_invalid', `job "${job.id}" has delayMs ${String(job.delayMs)}: use a finite number >= 0`);
  }
}

/** Up to ten ids, quoted, for messages. */
export function describeIds(ids: readonly string[]): string {
  if (ids.length === 0) return 'none';
  const shown = ids.slice(0, 10).map((id) => `"${id}"`).join(', ');
  return ids.length > 10 ? `${shown} and ${ids.length - 10} more` : shown;
}

/**
 * Names the actor that received most of the recent jobs, and the event it was sent most.
 * `caller` is the drain that gave up (`drain`, `drainRounds`), for the message.
 */
export function drainLimitError(maxJobs: number, recent: readonly JobSpec[], caller = 'drain'): XreactorError {
  const byExecution = new Map<string, { count: number; kind: string; events: Map<string, number> }>();
  for (const job of recent) {
    const actor = job.actor?.id ?? '(sweep)';
    const tally = byExecution.get(actor) ?? { count: 0, kind: job.actor?.kind ?? 'sweep', events: new Map() };
    tally.count += 1;
    const event = job.event?.type ?? `${job.kind} (outbox)`;
    tally.events.set(event, (tally.events.get(event) ?? 0) + 1);
    byExecution.set(actor, tally);
  }
  let loop: [string, { count: number; kind: string; events: Map<string, number> }] | undefined;
  for (const candidate of byExecution) if (!loop || candidate[1].count > loop[1].count) loop = candidate;
  let suspect = '';
  if (loop) {
    const [executionId, tally] = loop;
    let topEvent = '';
    let topCount = 0;
    for (const [event, count] of tally.events) if (count > topCount) [topEvent, topCount] = [event, count];
    suspect =
      `; likely loop: ${tally.kind} "${executionId}" got ${tally.count} of the last ` +
      `${recent.length} jobs, most often "${topEvent}" (${topCount} times)`;
  }
  return new XreactorError(
    'queue_drain_limit',
    `${caller} ran ${maxJobs} jobs and jobs are still due${suspect}. ` +
      `Look for a handler that keeps enqueueing jobs with fresh ids, or pass ${caller}({ maxJobs }) if the run needs more`,
  );
}

/** {@link DrainRoundsOptions} checked, with defaults filled. */
export interface DrainRoundsPlan {
  /** The purposes a round runs, in order (`order` without those `only` leaves out). */
  readonly purposes: readonly JobPurpose[];
  readonly delayed: DelayedDelivery;
  readonly maxJobs: number;
}

const DELAYED_DELIVERIES: readonly DelayedDelivery[] = ['as-due', 'wait', 'hold'];

/**
 * Checks the options of `drainRounds` and fills their defaults.
 * @throws XreactorError (`queue_option_invalid`) naming the option and what to pass instead.
 */
export function compileDrainRoundsOptions(options: DrainRoundsOptions, defaultMaxJobs: number): DrainRoundsPlan {
  const order = options.order ?? JOB_PURPOSES;
  checkPurposes(order, 'order');
  const missing = JOB_PURPOSES.filter((purpose) => !order.includes(purpose));
  if (missing.length > 0) {
    throw new XreactorError(
      'queue_option_invalid',
      `drainRounds order must name every purpose once; it leaves out ${missing.map((p) => `"${p}"`).join(', ')}: use \`only\` to run some purposes only`,
    );
  }
  const only = options.only;
  if (only !== undefined) {
    checkPurposes(only, 'only');
    if (only.length === 0) throw new XreactorError('queue_option_invalid', 'drainRounds only is empty, so the drain would run nothing: name at least one purpose');
  }
  const delayed = options.delayed ?? 'hold';
  if (!DELAYED_DELIVERIES.includes(delayed)) {
    throw new XreactorError('queue_option_invalid', `drainRounds delayed must be one of ${DELAYED_DELIVERIES.map((d) => `"${d}"`).join(', ')}, got ${JSON.stringify(delayed)}`);
  }
  return {
    purposes: only === undefined ? order : order.filter((purpose) => only.includes(purpose)),
    delayed,
    maxJobs: positiveInteger(options.maxJobs ?? defaultMaxJobs, 'maxJobs'),
  };
}

/** Refuses a purpose list with an unknown or repeated name. */
function checkPurposes(purposes: readonly JobPurpose[], option: string): void {
  const seen = new Set<string>();
  for (const purpose of purposes) {
    if (!JOB_PURPOSES.includes(purpose)) {
      throw new XreactorError('queue_option_invalid', `drainRounds ${option} names an unknown purpose ${JSON.stringify(purpose)}; purposes: ${JOB_PURPOSES.join(', ')}`);
    }
    if (seen.has(purpose)) throw new XreactorError('queue_option_invalid', `drainRounds ${option} names "${purpose}" twice`);
    seen.add(purpose);
  }
}
