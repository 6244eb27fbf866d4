/**
 * A store as a worker process that dies at one of its commits sees it, for the chaos property
 * tests (`test/property/kernel-chaos.test.ts`, `test/property/map.test.ts`).
 */
import type { Commit, Store } from '../../src/index.js';

/** Where the worker dies: at its `commit`-th store commit, before it lands or after. */
export interface CommitCrash {
  /** The dying worker's commit at which it dies (counted over every store commit it makes). */
  readonly commit: number;
  /** `after`: the commit lands, then the process dies before it performs the outbox. `before`: the commit never lands. */
  readonly mode: 'after' | 'before';
}

/** What the worker died at. */
export interface CommitDeath {
  /** The actor whose commit the worker died at, and that commit. */
  readonly id: string;
  readonly commit: Commit;
  readonly mode: CommitCrash['mode'];
  /** Whether that commit landed (an `after` commit can still be refused by the store). */
  readonly landed: boolean;
  /** The job the dying worker was handling. */
  readonly job: string;
}

/** A promise that never settles: a call into a process that is gone. */
export const never = <T>() => new Promise<T>(() => undefined);

/**
 * The store as a worker that dies at its `plan.commit`-th commit sees it: from then on no call
 * returns (the process is gone), and `died` is told what it died at.
 */
export function dyingStore(inner: Store, plan: CommitCrash, job: string, died: (death: CommitDeath) => void): Store {
  let commits = 0;
  let dead = false;
  return new Proxy(inner, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...a: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => {
        if (dead) return never();
        if (key !== 'commit' || ++commits < plan.commit) return method.apply(target, args);
        dead = true;
        const [id, , commit] = args as [string, number, Commit];
        if (plan.mode === 'before') {
          died({ id, commit, mode: plan.mode, landed: false, job });
          return never();
        }
        return method.apply(target, args).then(
          () => (died({ id, commit, mode: plan.mode, landed: true, job }), never()),
          () => (died({ id, commit, mode: plan.mode, landed: false, job }), never()),
        );
      };
    },
  });
}
