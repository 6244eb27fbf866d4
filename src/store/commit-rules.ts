/**
 * The rules on a commit's signals, awaits and spawns that every adapter checks before it writes
 * anything (the Redis store before it calls its script, the memory store before it touches a row).
 */
import { XreactorError } from '../errors/index.js';
import { rootOf } from './keys.js';
import { checkMapRules } from './map-writes.js';
import { signalCrossRootError } from './store.js';
import type { Commit, CommitOptions } from './store.js';

const isSeq = (n: number, min: number) => Number.isSafeInteger(n) && n >= min;

/**
 * Checks that every signal recipient, awaited actor and spawned actor of `commit` (and of the
 * commits of its spawned actors, at any depth) shares the root of `id`, that a spawned actor's
 * `kind` is its snapshot's, that the map writes and conditional signals follow their rules
 * (`checkMapRules` in `map-writes.ts`), and that `inboxSeen` and `consumed` are inbox seqs.
 * @throws XreactorError `signal_cross_root` ({@link signalCrossRootError}) for the first actor of
 * another root, `spawn_kind_mismatch` for a spawned actor whose `kind` its snapshot does not
 * have, `map_write_invalid` / `signal_condition_invalid` for a map write or conditional signal
 * that breaks its rules, `inbox_seq_invalid` for a seq that is not a whole number (inboxSeen >= 0, consumed >= 1)
 * or a `signalAhead` whose commit does not consume its `inboxSeen`.
 */
export function checkCommitRules(id: string, commit: Commit): void {
  if (commit.inboxSeen === undefined && commit.consumed === undefined && commit.signalAhead === undefined && commit.signals === undefined && commit.awaits === undefined && commit.spawn === undefined && commit.writes.map === undefined) return;
  const root = rootOf(id);
  const walk = (from: string, c: Commit) => {
    checkMapRules(from, c);
    for (const signal of c.signals ?? []) if (rootOf(signal.to) !== root) throw signalCrossRootError(from, signal.to, 'signal');
    for (const awaited of c.awaits ?? []) if (rootOf(awaited) !== root) throw signalCrossRootError(from, awaited, 'await');
    for (const spawned of c.spawn ?? []) {
      if (rootOf(spawned.id) !== root) throw signalCrossRootError(from, spawned.id, 'spawn');
      if (spawned.kind !== undefined && spawned.kind !== spawned.commit.snapshot.kind) {
        throw new XreactorError(
          'spawn_kind_mismatch',
          `actor ${from} spawns actor ${spawned.id} as kind "${spawned.kind}" with a first snapshot of kind "${spawned.commit.snapshot.kind}", so nothing was written; name the kind its snapshot has`,
        );
      }
      walk(spawned.id, spawned.commit);
    }
  };
  walk(id, commit);
  if (commit.inboxSeen !== undefined && !isSeq(commit.inboxSeen, 0)) {
    throw new XreactorError('inbox_seq_invalid', `commit of actor ${id} names inboxSeen ${commit.inboxSeen}, not a whole number >= 0 (the inbox.seq of its load)`);
  }
  for (const seq of commit.consumed ?? []) {
    if (!isSeq(seq, 1)) throw new XreactorError('inbox_seq_invalid', `commit of actor ${id} consumes inbox entry ${seq}, not a seq (a whole number >= 1)`);
  }
  if (commit.signalAhead !== undefined && (commit.inboxSeen === undefined || !commit.consumed?.includes(commit.inboxSeen))) {
    throw new XreactorError(
      'inbox_seq_invalid',
      `commit of actor ${id} names signalAhead ${JSON.stringify(commit.signalAhead)} but does not consume its inboxSeen ${commit.inboxSeen}; a commit computed ahead of a signal names the seq that signal is to land under as both`,
    );
  }
}

/**
 * Checks a creating commit (`CommitOptions.create`): it expects revision 0 and is not fenced by
 * a stored snapshot (there is none).
 * @throws XreactorError `commit_create_invalid`
 */
export function checkCreateOption(id: string, expectedRevision: number, options: CommitOptions | undefined): void {
  if (options?.create === undefined) return;
  if (expectedRevision !== 0) throw new XreactorError('commit_create_invalid', `commit of actor ${id} names \`create\` but expects revision ${expectedRevision}; a creating commit expects 0, so nothing was written`);
  if (options.ifSnapshot !== undefined) throw new XreactorError('commit_create_invalid', `commit of actor ${id} names both \`create\` and \`ifSnapshot\`; a creating commit is fenced by the actor's absence, so nothing was written`);
}

/** `ids` without repeats, each at its first place. */
export function uniqueIds(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}
