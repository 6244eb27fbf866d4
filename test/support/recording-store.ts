/**
 * A store that tells a test's ledger what lands in it (the property tests' crash and delivery
 * checks): each commit that lands, with the inbox entries it consumed, and each create.
 */
import type { Commit, InboxEntry, Store } from '../../src/index.js';

/** What a recording store reports. */
export interface CommitLedger {
  /** A commit of `id` landed at `revision`, consuming `consumed`. */
  landed(id: string, revision: number, commit: Commit, consumed: readonly InboxEntry[]): void;
  /** An execution was created (its first commit, and the actors it spawns, with it). */
  created(execution: Parameters<Store['create']>[0]): void;
}

/** `inner` as every process sees it, recording into `ledger` what lands. */
export function recordingStore(inner: Store, ledger: CommitLedger): Store {
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'commit') {
        return async (id: string, revision: number, commit: Commit, options?: Parameters<Store['commit']>[3]) => {
          const inbox = commit.consumed !== undefined && commit.consumed.length > 0 ? await target.readInbox(id) : undefined;
          const landed = await target.commit(id, revision, commit, options);
          // Fenced by revision: no other commit of this actor landed between the read and this one.
          ledger.landed(id, landed, commit, inbox?.entries.filter((e) => commit.consumed!.includes(e.seq)) ?? []);
          return landed;
        };
      }
      if (key === 'create') {
        return async (execution: Parameters<Store['create']>[0], options?: Parameters<Store['create']>[1]) => {
          const revision = await target.create(execution, options);
          ledger.created(execution);
          return revision;
        };
      }
      const value = Reflect.get(target, key, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
