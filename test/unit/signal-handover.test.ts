/**
 * Signals handed over in a call (docs/actor-kernel.md, "Signals handed over in the call"): a
 * commit's signal to an actor the same call advances reaches it through the store's receipt, not
 * a read of its inbox; when something it has not seen landed before (the seq says so), it reads.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

/** A memory store that counts reads of the inbox of `id` (`load`, `readInbox`), and runs `during` in the child's step. */
function counting(id: string) {
  const inner = createMemoryStore({ clock: createTestClock() });
  const reads: string[] = [];
  const store: Store = new Proxy(inner, {
    get: (t, k, r) => {
      const value = Reflect.get(t, k, r) as unknown;
      if ((k === 'load' || k === 'readInbox') && typeof value === 'function') {
        return (actor: string, ...rest: unknown[]) => {
          if (actor === id) reads.push(String(k));
          return (value as (...a: unknown[]) => unknown).call(t, actor, ...rest);
        };
      }
      return value;
    },
  });
  return { inner, store, reads };
}

function tree(during: () => Promise<void>) {
  const child = defineReactor({ name: 'ho_child' })
    .step('c1', { run: async () => (await during(), 'C1') })
    .build();
  return defineReactor({ name: 'ho_root' })
    .step('a', { run: () => 'A' })
    .compose('sub', child, { waitFor: ['a'] })
    .step('b', { waitFor: ['sub'], run: () => 'B' })
    .build();
}

describe('signals handed over in a call', () => {
  it("a composed child's settle is handed to its parent: the parent never reads its inbox, and consumes the entry", async () => {
    const { store, reads } = counting('h1');
    const runtime = createRuntime({ store, logger, generateId: () => 'h1' });
    const result = await runtime.run(tree(async () => undefined), {});
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(reads).toEqual([]);
    expect((await store.load('h1'))?.inbox).toEqual({ entries: [], seq: 1 });
  });

  it('a signal the parent had not seen landed before the settle: the parent reads its inbox, and the run ends as without it', async () => {
    const { inner, store, reads } = counting('h2');
    const runtime = createRuntime({ store, logger, generateId: () => 'h2' });
    // While the child runs, a signal no state of the parent accepts lands first (seq 1): the settle is seq 2.
    const noise = async () => void (await inner.signal({ to: 'h2', event: { type: 'test.noise', at: 0 }, dedupeKey: 'noise' }));
    const result = await runtime.run(tree(noise), {});
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(reads).toContain('load');
    // The settle (seq 2) consumed; the noise (seq 1), which no state accepts, left in place
    // (a completed run can still be undone, so it keeps what it has not consumed).
    const inbox = (await store.load('h2'))?.inbox;
    expect({ seqs: inbox?.entries.map((e) => [e.seq, e.event.type]), seq: inbox?.seq }).toEqual({ seqs: [[1, 'test.noise']], seq: 2 });
  });
});
