/**
 * The group commit's sending rule (`batchedCommits`), against a fake script runner whose replies
 * the test releases: when a commit goes out alone, at the end of its turn (one call in flight),
 * or waits (two in flight); when waiting commits go out together, the cut-off of a full batch, and
 * that every commit's promise settles on every path.
 */
import { describe, expect, it } from 'vitest';
import { batchedCommits } from '../../src/store/commit-batcher.js';
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
  it('sends a commit at once, alone, while none is in flight', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const reply = send(commit('a'));
    expect(sent.map((s) => [s.name, s.ids])).toEqual([['commitExecution', ['a']]]);
    sent[0]!.answer(7);
    expect(await reply).toBe(7);
  });

  it('sends the commits of a turn as one call at its end while one call is in flight', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const first = send(commit('a'));
    const turn = [send(commit('b')), send(commit('c'))];
    expect(sent).toHaveLength(1);
    await settle();
    // Not waiting for the reply to 'a': two calls may be in flight.
    expect(sent.map((s) => [s.name, s.ids])).toEqual([
      ['commitExecution', ['a']],
      ['commitBatch', ['b', 'c']],
    ]);
    sent[1]!.answer([2, 3]);
    sent[0]!.answer();
    expect(await Promise.all([first, ...turn])).toEqual([1, 2, 3]);
  });

  it('holds commits issued while two calls are in flight, over several turns, and sends them as one call once one is answered', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const inFlight = [send(commit('a')), send(commit('b'))];
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
    expect(await Promise.all([...inFlight, early, late])).toEqual([1, 1, 3, 4]);
  });

  it('includes in the next call the commits that the answered actors issue right away', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    const waiting = send(commit('w'));
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
    // 'a' alone; 'b'–'d' and 'e'–'g' full batches, the second beyond two calls in flight; 'h' waits.
    expect(sent.map((s) => s.ids)).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f', 'g']]);
    await settle();
    expect(sent).toHaveLength(3);
    sent[0]!.answer();
    await settle();
    // Two calls still in flight.
    expect(sent).toHaveLength(3);
    sent[1]!.answer();
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f', 'g'], ['h']]);
    sent[2]!.answer();
    sent[3]!.answer();
    expect(await Promise.all(replies)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
  });

  it('does not send while two calls are in flight, even when a flush was already queued', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run, 2);
    const a = send(commit('a'));
    // 'b' queues a flush at the turn's end; 'c' fills the batch, which goes out at once: two in flight.
    const b = send(commit('b'));
    const c = send(commit('c'));
    const d = send(commit('d'));
    expect(sent.map((s) => s.ids)).toEqual([['a'], ['b', 'c']]);
    await settle();
    // The queued flush found two calls in flight: 'd' waits.
    expect(sent).toHaveLength(2);
    sent[0]!.answer();
    await settle();
    expect(sent.map((s) => s.ids)).toEqual([['a'], ['b', 'c'], ['d']]);
    sent[1]!.answer();
    sent[2]!.answer();
    expect(await Promise.all([a, b, c, d])).toEqual([1, 1, 1, 1]);
  });

  it('rejects each commit of a batch on its own error, every commit of it when the call fails, and goes on', async () => {
    const { run, sent } = fakeRunner();
    const send = batchedCommits(run);
    void send(commit('a'));
    const batch = [send(commit('b')), send(commit('c'))].map((p) => p.then(
      (value) => ({ value }),
      (error: Error) => ({ error: error.message }),
    ));
    sent[0]!.answer();
    await settle();
    sent[1]!.answer([1, [-1, 'WRONGTYPE']]);
    const [b, c] = await Promise.all(batch);
    expect(b).toEqual({ value: 1 });
    expect(c).toMatchObject({ error: expect.stringContaining('WRONGTYPE') });

    const held = send(commit('e'));
    const failing = [send(commit('f')), send(commit('g'))];
    sent[2]!.fail(new Error('connection lost'));
    await expect(held).rejects.toThrow('connection lost');
    await settle();
    sent[3]!.fail(new Error('connection lost again'));
    for (const p of failing) await expect(p).rejects.toThrow('connection lost again');
    // Nothing is stuck: the next commit goes out at once.
    const next = send(commit('h'));
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
    const first = send(commit('a'));
    const batch = [send(commit('b')), send(commit('c'))];
    answers[0]!(1);
    expect(await first).toBe(1);
    for (const p of batch) await expect(p).rejects.toThrow('bad arguments');
    expect(calls).toBe(2);
    const next = send(commit('d'));
    answers[1]!(2);
    expect(await next).toBe(2);
  });
});
