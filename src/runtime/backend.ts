/**
 * A backend: a store and a queue owned together (`connectRedis()` in `xreactor/redis` makes
 * one). Given to `createRuntime({ backend })` or `createWorker({ backend })`, it belongs to the
 * runtime or worker, whose `close()` closes it after its own work has stopped. A `store` or
 * `queue` given on their own stay the caller's to close.
 */
import { DefinitionError } from '../errors/index.js';
import type { Queue } from '../queue/queue.js';
import type { Store } from '../store/store.js';

/** A store and a queue with one `close()` for both (and whatever connection they share). */
export interface Backend {
  readonly store: Store;
  readonly queue: Queue;
  close(): Promise<void>;
}

/** Refuses `backend` beside `store` or `queue`: which would the runtime use, and who closes what? */
export function checkBackendOptions(where: string, options: { readonly backend?: Backend; readonly store?: Store; readonly queue?: Queue }): void {
  if (options.backend === undefined) return;
  const both = [options.store === undefined ? undefined : 'store', options.queue === undefined ? undefined : 'queue'].filter((x) => x !== undefined);
  if (both.length > 0) throw new DefinitionError(`${where}: give backend, or ${both.join(' and ')}, not both (a backend brings its own store and queue)`);
}
