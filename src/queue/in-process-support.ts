/**
 * Helpers of the in-process queue: its FIFO, option and job checks, and the
 * diagnosis of a drain that does not end.
 */
import { XreactorError } from '../errors/index.js';
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

/** Names the execution that received most of the recent jobs, and the event it was sent most. */
export function drainLimitError(maxJobs: number, recent: readonly JobSpec[]): XreactorError {
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
    `drain ran ${maxJobs} jobs and jobs are still due${suspect}. ` +
      'Look for a handler that keeps enqueueing jobs with fresh ids, or pass drain({ maxJobs }) if the run needs more',
  );
}
