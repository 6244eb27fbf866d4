/**
 * The group commit's sending rule (`batchedCommits`), against a fake script runner whose replies
 * the test releases: a turn's commits go out together at its end (a lone one alone) while fewer
 * than two calls are in flight (from idle, a turn of many as two calls), or wait (two in flight);
 * when waiting commits go out together, the cut-off of a full batch, and that every commit's
 * promise settles on every path.
 */
import { describe, expect, it } from 'vitest';
import { batchedCommits, MAX_GROUP_COMMIT, SPLIT_FROM_IDLE } from '../../src/store/commit-batcher.js';
import type { CommitCall, ScriptName, ScriptRunner } from '../../src/store/redis-scripts.js';

interface Sent {
  readonly name: ScriptName;
  /** The ids of the commits the call carries, in order. */
  readonly ids: readonly string[];
  answer(reply?: unknown): void;
  fail(error: Error): void;
}

/** A runner that records each call and answers it when the test says (a batch's reply: one `1` per commit unless given). */
function fakeRunner(): { readonly run: ScriptRunner; readonly sent: Sent[] } {
  const sent: Sent[] = [];
  const run: ScriptRunner = (name, call) => {
    // A batch's call declares one key per commit: the commit's id here.
    const ids = [...call.keys];
    return new Promise((resolve, reject) => {
      sent.push({ name, ids, answer: (reply) => resolve(reply ?? (name === 'commitBatch' ? ids.map(() => 1) : 1)), fail: reject });
    });
  };
  return { run, sent };
}

const commit = (id: string): CommitCall => ({ keys: [id], argv: ['x'], actor: { base: 'p', id } });
/** Lets every queued microtask and `process.nextTick` callback run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('group commit: batchedCommits', () => {
  it('sends a lone commit at the end of its turn, alone, with the single-commit script', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const reply = send(commit('a'));
    expect(sent).toHaveLength(0);
    await settle();
    expect(sent.map((s) => [s.name, s.ids])).toEqual([['commitExecution', ['a']]]);
    sent[0]!.answer(7);
    expect(await reply).toBe(7);
  });

  it('sends the commits of a turn as one call at its end, from idle and while one call is in flight', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    // From idle: the first commit of a turn waits for the others (a bundle's parts start together).
    const first = [send(commit('a')), send(commit('b'))];
    expect(sent).toHaveLength(0);
    await settle();
    const second = [send(commit('c')), send(commit('d'))];
    await settle();
    // Not waiting for the reply to the first call: two calls may be in flight.
    expect(sent.map((s) => [s.name, s.ids])).toEqual([
      ['commitBatch', ['a', 'b']],
      ['commitBatch', ['c', 'd']],
    ]);
    sent[1]!.answer([3, 4]);
    sent[0]!.answer([1, 2]);
    expect(await Promise.all([...first, ...second])).toEqual([1, 2, 3, 4]);
  });

  it('sends a turn of at least SPLIT_FROM_IDLE commits from idle as two calls of halves, so their actors fall out of step; fewer, or with a call in flight, as one', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    const ten = ids('a', 10).map((id) => send(commit(id)));
    await settle();
    expect(sent.map((s) => [s.name, s.ids])).toEqual([
      ['commitBatch', ids('a', 5)],
      ['commitBatch', ids('a', 10).slice(5)],
    ]);
    // The first half answered: its actors' next commits go out while the second half is in flight, as one call.
    sent[0]!.answer();
    await settle();
    const next = ids('b', 5).map((id) => send(commit(id)));
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([ids('a', 5), ids('a', 10).slice(5), ids('b', 5)]);
    sent[1]!.answer();
    sent[2]!.answer();
    await Promise.all([...ten, ...next]);
    // From idle again, below SPLIT_FROM_IDLE: one call.
    const few = ids('c', SPLIT_FROM_IDLE - 1).map((id) => send(commit(id)));
    await settle();
    expect(sent.at(-1)!.ids).toEqual(ids('c', SPLIT_FROM_IDLE - 1));
    sent.at(-1)!.answer();
    await Promise.all(few);
    // A sender allowed one call in flight has nothing to overlap: one call.
    const single = fakeRunner();
    const one = batchedCommits(single.run, MAX_GROUP_COMMIT, 1);
    const all = ids('d', 10).map((id) => one(commit(id)));
    await settle();
    expect(single.sent.map((s) => s.ids)).toEqual([ids('d', 10)]);
    single.sent[0]!.answer();
    await Promise.all(all);
  });

  it('holds commits issued while two calls are in flight, over several turns, and sends them as one call once one is answered', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const a = send(commit('a'));
    await settle();
    const b = send(commit('b'));
    await settle();
    const early = send(commit('c'));
    await settle();
    const late = send(commit('d'));
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['a'], ['b']]);
    sent[1]!.answer();
    await settle();
    expect(sent.map((s) => [s.name, s.ids])).toEqual([
      ['commitExecution', ['a']],
      ['commitExecution', ['b']],
      ['commitBatch', ['c', 'd']],
    ]);
    sent[0]!.answer();
    sent[2]!.answer([3, 4]);
    expect(await Promise.all([a, b, early, late])).toEqual([1, 1, 3, 4]);
  });

  it('includes in the next call the commits that the answered actors issue right away', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const waiting = send(commit('w'));
    await settle();
    // An actor whose commit is in flight issues its next one as soon as it is answered.
    const chained = send(commit('a')).then(() => send(commit('a2')));
    await settle();
    const behind = send(commit('b'));
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['w'], ['a']]);
    sent[1]!.answer(1);
    await settle();
    // 'b' waited for a reply; 'a2' was issued in the turn that reply arrived in: one call.
    expect(sent.map((s) => s.ids)).toEqual([['w'], ['a'], ['b', 'a2']]);
    sent[2]!.answer([2, 5]);
    sent[0]!.answer();
    expect(await waiting).toBe(1);
    expect(await behind).toBe(2);
    expect(await chained).toBe(5);
  });

  it('sends a full batch at once whatever is in flight, and the rest only once fewer than two calls are', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run, 3);
    const replies = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => send(commit(id)));
    // 'a'–'c' and 'd'–'f' full batches, at once; 'g' and 'h' wait for the turn's end, then for a reply.
    expect(sent.map((s) => s.ids)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']]);
    await settle();
    expect(sent).toHaveLength(2);
    sent[0]!.answer();
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g', 'h']]);
    sent[1]!.answer();
    sent[2]!.answer();
    expect(await Promise.all(replies)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
  });

  it('does not send while two calls are in flight, even when a flush was already queued', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run, 2);
    // 'a' queues a flush at the turn's end; 'b' fills the batch, which goes out at once; so do 'c' and 'd': two in flight.
    const a = send(commit('a'));
    const b = send(commit('b'));
    const c = send(commit('c'));
    const d = send(commit('d'));
    const e = send(commit('e'));
    expect(sent.map((s) => s.ids)).toEqual([['a', 'b'], ['c', 'd']]);
    await settle();
    // The queued flush found two calls in flight: 'e' waits.
    expect(sent).toHaveLength(2);
    sent[0]!.answer();
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
    sent[1]!.answer();
    sent[2]!.answer();
    expect(await Promise.all([a, b, c, d, e])).toEqual([1, 1, 1, 1, 1]);
  });

  it('rejects each commit of a batch on its own error, every commit of it when the call fails, and goes on', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const batch = [send(commit('b')), send(commit('c'))].map((p) => p.then(
      (value) => ({ value }),
      (error: Error) => ({ error: error.message }),
    ));
    await settle();
    sent[0]!.answer([1, [-1, 'WRONGTYPE']]);
    const [b, c] = await Promise.all(batch);
    expect(b).toEqual({ value: 1 });
    expect(c).toMatchObject({ error: expect.stringContaining('WRONGTYPE') });

    const held = send(commit('e'));
    await settle();
    const failing = [send(commit('f')), send(commit('g'))];
    sent[1]!.fail(new Error('connection lost'));
    await expect(held).rejects.toThrow('connection lost');
    await settle();
    sent[2]!.fail(new Error('connection lost again'));
    for (const p of failing) await expect(p).rejects.toThrow('connection lost again');
    // Nothing is stuck: the next commit goes out at the end of its turn.
    const next = send(commit('h'));
    await settle();
    expect(sent.at(-1)!.ids).toEqual(['h']);
    sent.at(-1)!.answer(9);
    expect(await next).toBe(9);
  });

  it('rejects the commits of a batch whose call cannot be built, and goes on', async () => {
    let calls = 0;
    const answers: ((reply: unknown) => void)[] = [];
    const run: ScriptRunner = (name) => {
      calls++;
      if (name === 'commitBatch') throw new Error('bad arguments');
      return new Promise((resolve) => answers.push(resolve));
    };
    const send = batchedCommits(run);
    const batch = [send(commit('b')), send(commit('c'))];
    for (const p of batch) await expect(p).rejects.toThrow('bad arguments');
    const next = send(commit('d'));
    await settle();
    answers[0]!(2);
    expect(await next).toBe(2);
    expect(calls).toBe(2);
  });
});
