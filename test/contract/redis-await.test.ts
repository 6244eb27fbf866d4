/**
 * `awaitResult` over the Redis store: a run that settles while the waiter's SUBSCRIBE is still
 * pending must not be missed (the waiter would otherwise sleep until its durable re-check, up to
 * seconds later). The race is forced: the caller's subscriber connection holds every SUBSCRIBE
 * until the test releases it, and a worker with its own store (as another process would have)
 * settles the run in between.
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRuntime, createWorker, defineReactor, EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { AnyReactorDefinition } from '../../src/index.js';
import { createRedisStore } from '../../src/redis.js';
import { createInProcessQueue } from '../../src/testing/index.js';
import { encode } from '../../src/serialization/index.js';
import { decodeSnapshot, encodeSnapshot } from '../../src/store/snapshot-codec.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

type Channels = (...channels: string[]) => Promise<unknown>;

/** A subscriber connection whose SUBSCRIBE / UNSUBSCRIBE calls go through `around` (to record or hold them). */
function wrappedSubscriber(url: string, around: (name: 'subscribe' | 'unsubscribe', channels: string[], send: Channels) => Promise<unknown>): () => Redis {
  return () => {
    const client = new Redis(url);
    for (const name of ['subscribe', 'unsubscribe'] as const) {
      const send = client[name].bind(client) as Channels;
      (client as unknown as Record<string, Channels>)[name] = (...channels: string[]) => around(name, channels, send);
    }
    return client;
  };
}

/** A subscriber connection whose SUBSCRIBE commands wait for `release()`. */
function heldSubscriber(url: string): { connect: () => Redis; release: () => void; requested: Promise<void> } {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let markRequested: () => void = () => undefined;
  const requested = new Promise<void>((resolve) => (markRequested = resolve));
  const connect = wrappedSubscriber(url, (name, channels, send) => {
    if (name === 'unsubscribe') return send(...channels);
    markRequested();
    return gate.then(() => send(...channels));
  });
  return { connect, release, requested };
}

/**
 * A caller runtime and a worker, each with its own Redis connection and store (as two processes
 * would have), on one prefix and a manual in-process queue; `close` tears all of it down.
 */
function callerAndWorker(options: { readonly prefix: string; readonly reactor: AnyReactorDefinition; readonly id: string; readonly subscriber?: () => Redis }) {
  const redis = new Redis(server.url);
  const workerRedis = new Redis(server.url);
  const store = createRedisStore({ redis, prefix: options.prefix, ...(options.subscriber === undefined ? {} : { subscriber: options.subscriber }) });
  const workerStore = createRedisStore({ redis: workerRedis, prefix: options.prefix });
  const queue = createInProcessQueue({ mode: 'manual' });
  const logger = pino({ level: 'silent' });
  const runtime = createRuntime({ logger, store, queue, worker: false, reactors: [options.reactor], generateId: () => options.id });
  const worker = createWorker({ logger, store: workerStore, queue, reactors: [options.reactor] });
  const close = async () => {
    await worker.close();
    await runtime.close();
    await Promise.all([store.close(), workerStore.close()]);
    redis.disconnect();
    workerRedis.disconnect();
  };
  return { redis, store, queue, runtime, close };
}

describe('waitSettled on Redis', () => {
  it('listening resolves only once the SUBSCRIBE is acknowledged; a publish from another store after it wakes the waiter', async () => {
    const redis = new Redis(server.url);
    const other = new Redis(server.url);
    const held = heldSubscriber(server.url);
    const prefix = `listen-${process.pid}`;
    const store = createRedisStore({ redis, prefix, subscriber: held.connect });
    const publisher = createRedisStore({ redis: other, prefix });
    try {
      const wait = store.waitSettled('l1', 10_000);
      let listening = false;
      void wait.listening.then(() => (listening = true));
      await held.requested;
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(listening).toBe(false);
      held.release();
      await wait.listening;
      await publisher.publishSettled('l1');
      expect(await wait.settled).toBe(true);
    } finally {
      held.release();
      await Promise.all([store.close(), publisher.close()]);
      redis.disconnect();
      other.disconnect();
    }
  });

  it('a settling commit asked to announce results publishes its snapshot, revision and those of the results the hash has; the id alone without', async () => {
    const redis = new Redis(server.url);
    const prefix = `notice-${process.pid}`;
    const store = createRedisStore({ redis, prefix });
    const snapshot = { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'completed', context: { executionId: 'n1' } } as const;
    const commit = (results: [string, unknown][]) => ({ snapshot, status: 'completed' as const, writes: { results, pushUndo: [], truncateUndoTo: undefined, trace: [] }, outbox: [] });
    try {
      for (const id of ['n1', 'n2']) await store.create({ id, reactor: 'r', input: {}, commit: { ...commit([]), snapshot: { ...snapshot, value: 'running' }, status: 'running' } });
      const announced = store.waitSettled('n1', 10_000);
      await announced.listening;
      await store.commit('n1', 1, commit([['alpha', { x: 1 }], ['sum', 'two'], ['other', 3]]), { announce: true, announceResults: ['alpha', 'missing', 'sum'] });
      expect(await announced.settled).toBe(true);
      const notice = announced.notice?.();
      expect(notice?.revision).toBe(2);
      expect(notice?.snapshot).toMatchObject({ kind: 'execution', value: 'completed', context: { executionId: 'n1' } });
      expect(notice?.results).toEqual(new Map<string, unknown>([['alpha', { x: 1 }], ['sum', 'two']]));

      const plain = store.waitSettled('n2', 10_000);
      await plain.listening;
      await store.commit('n2', 1, commit([['a', 1]]), { announce: true });
      expect(await plain.settled).toBe(true);
      expect(plain.notice?.()).toBeUndefined();

      // Nobody subscribed: the notice is neither built nor published (a later waiter subscribes, then reads).
      await store.create({ id: 'n3', reactor: 'r', input: {}, commit: { ...commit([]), snapshot: { ...snapshot, value: 'running' }, status: 'running' } });
      await redis.config('RESETSTAT');
      await store.commit('n3', 1, commit([['alpha', 1]]), { announce: true, announceResults: ['alpha'] });
      const stats = await redis.info('commandstats');
      expect(stats).toMatch(/cmdstat_pubsub\|numsub:calls=1,/);
      expect(stats).not.toMatch(/cmdstat_publish:/);
      expect((await store.load('n3'))?.snapshot.value).toBe('completed');
    } finally {
      await store.close();
      redis.disconnect();
    }
  });
});

describe('awaitResult on Redis', () => {
  it('a run that settles while the waiter is still subscribing wakes it at once, not at its re-check', async () => {
    const held = heldSubscriber(server.url);
    const reactor = defineReactor({ name: 'await_race' })
      .step('a', { run: () => 41 })
      .step('b', { args: ({ result }) => ({ a: result('a') }), run: ({ a }) => a + 1 })
      .background({ all: true })
      .returns('b')
      .build();
    const { store, queue, runtime, close } = callerAndWorker({ prefix: `await-${process.pid}`, reactor, id: 'race-1', subscriber: held.connect });
    try {
      expect(await runtime.run(reactor, {})).toMatchObject({ status: 'dispatched', executionId: 'race-1' });

      // The waiter starts listening; its SUBSCRIBE is held back.
      const started = Date.now();
      const waiting = runtime.awaitResult('race-1', { timeoutMs: 20_000 });
      await held.requested;
      // The worker settles the run (its commit publishes the notification) before the caller's
      // SUBSCRIBE reaches Redis.
      await queue.drain();
      expect((await store.load('race-1'))?.snapshot.value).toBe('completed');
      held.release();

      expect(await waiting).toMatchObject({ status: 'completed', value: 42 });
      // The re-check of a 20 s wait comes after 2 s: the waiter must not have needed it.
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      held.release();
      await close();
    }
  });

  /**
   * Runs `reactor` (id `id`) to its end while `awaitResult` waits on it, and returns the outcome,
   * the commands the caller's store sent from the wait on, and the SUBSCRIBEs it made.
   */
  const awaitWoken = async (reactor: AnyReactorDefinition, id: string) => {
    const subscribes: string[][] = [];
    const subscriber = wrappedSubscriber(server.url, (name, channels, send) => {
      if (name === 'subscribe') subscribes.push(channels);
      return send(...channels);
    });
    const { redis, store, queue, runtime, close } = callerAndWorker({ prefix: `${id}-${process.pid}`, reactor, id, subscriber });
    try {
      await runtime.run(reactor, {});
      // Every command the caller's store sends from here (its load script is registered already).
      await store.load(id);
      const sent: string[] = [];
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = (...args: Parameters<typeof send>) => {
        sent.push(args[0].name);
        return send(...args);
      };
      const waiting = runtime.awaitResult(id, { timeoutMs: 20_000 });
      // Let the waiter listen and find the run still dispatched, then settle it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(sent).toEqual(['evalsha']);
      await queue.drain();
      return { outcome: await waiting, sent, subscribes };
    } finally {
      await close();
    }
  };

  it('a waiter woken by the settle notification of a completed run reads nothing more: the notice carries the snapshot and the returned result', async () => {
    const reactor = defineReactor({ name: 'await_once' }).step('a', { run: () => 7 }).step('b', { run: () => 8 }).background({ all: true }).returns('a').build();
    const { outcome, sent, subscribes } = await awaitWoken(reactor, 'once-1');
    expect(outcome).toMatchObject({ status: 'completed', value: 7 });
    expect(subscribes).toHaveLength(1);
    expect(sent).toEqual(['evalsha']);
  });

  it('a notice answers a failed run too; a run returning every result, or a notice past 64 KiB, is read in one call after the notification', async () => {
    const failing = defineReactor({ name: 'await_failed' }).step('a', { run: () => 1, undo: () => undefined }).step('b', { run: () => { throw new Error('no'); } }).background({ all: true }).build();
    const failed = await awaitWoken(failing, 'failed-1');
    expect(failed.outcome).toMatchObject({ status: 'failed', step: 'b', message: expect.stringContaining('no') });
    expect(failed.sent).toEqual(['evalsha']);

    // No returns(): the outcome reads every step's result, which no notice carries.
    const every = defineReactor({ name: 'await_all' }).step('a', { run: () => 7 }).background({ all: true }).build();
    const all = await awaitWoken(every, 'all-1');
    expect(all.outcome).toMatchObject({ status: 'completed', value: { a: 7 } });
    expect(all.sent).toEqual(['evalsha', 'evalsha']);

    const big = 'x'.repeat(70_000);
    const large = defineReactor({ name: 'await_large' }).step('a', { run: () => big }).background({ all: true }).returns('a').build();
    const read = await awaitWoken(large, 'large-1');
    expect(read.outcome).toMatchObject({ status: 'completed', value: big });
    expect(read.sent).toEqual(['evalsha', 'evalsha']);
  });

  it('a notice older than the state the waiter looked at (published before an undo, still on its way) is not taken as the outcome', async () => {
    const prefix = `stale-${process.pid}`;
    const reactor = defineReactor({ name: 'await_stale' }).step('a', { run: () => 7 }).background({ all: true }).returns('a').build();
    const { redis, queue, runtime, close } = callerAndWorker({ prefix, reactor, id: 'stale-1' });
    try {
      await runtime.run(reactor, {});
      const waiting = runtime.awaitResult('stale-1', { timeoutMs: 20_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      // A notice of a completed state at revision 1, below the one the waiter's look read.
      const stored = decodeSnapshot(await redis.hgetBuffer(`${prefix}:{stale-1}:exec:stale-1`, 'snapshot') as Buffer);
      const snapshot = Buffer.from(encodeSnapshot({ ...stored, value: 'completed' }));
      const u32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
      const value = Buffer.from(encode(999));
      await redis.publish(`${prefix}:{stale-1}:settled:stale-1`, Buffer.concat([Buffer.from('\0xr1', 'latin1'), u32(1), u32(snapshot.length), snapshot, Buffer.from([0, 1, 0, 1]), Buffer.from('a'), u32(value.length), value]));
      await new Promise((resolve) => setTimeout(resolve, 100));
      await queue.drain();
      expect(await waiting).toMatchObject({ status: 'completed', value: 7 });
    } finally {
      await close();
    }
  });

  it('a woken waiter and a later one report a completed run whose stored result cannot be decoded alike: the read rejects', async () => {
    const prefix = `bad-result-${process.pid}`;
    // No returns(): the outcome reads every step's result.
    const reactor = defineReactor({ name: 'bad_result' }).step('a', { run: () => 7 }).background({ all: true }).build();
    const { redis, store, queue, runtime, close } = callerAndWorker({ prefix, reactor, id: 'bad-1' });
    const outcome = (p: Promise<unknown>) => p.then((value) => ({ value }), (error: unknown) => ({ error: (error as Error).name }));
    try {
      await runtime.run(reactor, {});
      // A result field this build cannot decode (truncated msgpack), as another program might write.
      await redis.hset(`${prefix}:{bad-1}:results:bad-1`, 'zz', Buffer.from([0x92, 0x01]));
      const woken = outcome(runtime.awaitResult('bad-1', { timeoutMs: 20_000 }));
      await new Promise((resolve) => setTimeout(resolve, 100));
      await queue.drain();
      expect(await woken).toEqual({ error: 'DeserializationError' });
      expect(await outcome(runtime.awaitResult('bad-1', { timeoutMs: 20_000 }))).toEqual({ error: 'DeserializationError' });
      // The load itself stands: the snapshot is readable, the results are left to readResults.
      const loaded = await store.load('bad-1', { results: 'all' });
      expect(loaded?.revision).toBeGreaterThan(1);
      expect(loaded?.results).toBeUndefined();
    } finally {
      await close();
    }
  });

  it('waits started in one turn subscribe with one SUBSCRIBE, and those ended in one turn leave with one UNSUBSCRIBE', async () => {
    const redis = new Redis(server.url);
    const commands: { name: string; channels: string[] }[] = [];
    const subscriber = wrappedSubscriber(server.url, (name, channels, send) => {
      commands.push({ name, channels });
      return send(...channels);
    });
    const store = createRedisStore({ redis, prefix: `batch-${process.pid}`, subscriber });
    try {
      const ids = Array.from({ length: 50 }, (_, i) => `b${i}`);
      const waits = ids.map((id) => store.waitSettled(id, 60_000));
      // A second wait on a channel already joined adds nothing.
      const again = store.waitSettled('b0', 60_000);
      await Promise.all(waits.map((w) => w.listening));
      expect(commands).toEqual([{ name: 'subscribe', channels: ids.map((id) => `batch-${process.pid}:{${id}}:settled:${id}`) }]);
      // One publish reaches both waiters of b0; the channel is left once neither waits.
      await store.publishSettled('b0');
      expect(await waits[0]!.settled).toBe(true);
      expect(await again.settled).toBe(true);
      for (const w of waits.slice(1)) w.stop!();
      expect(await Promise.all(waits.slice(1).map((w) => w.settled))).toEqual(ids.slice(1).map(() => false));
      await vi.waitFor(() => expect(commands).toHaveLength(3));
      expect(commands.slice(1).map((c) => [c.name, c.channels.length])).toEqual([
        ['unsubscribe', 1],
        ['unsubscribe', 49],
      ]);
      // A channel joined, left and joined again in one turn: three commands, in that order, so it ends subscribed.
      store.waitSettled('b1', 60_000).stop!();
      const late = store.waitSettled('b1', 60_000);
      await late.listening;
      const channel = `batch-${process.pid}:{b1}:settled:b1`;
      expect(commands.slice(3)).toEqual([
        { name: 'subscribe', channels: [channel] },
        { name: 'unsubscribe', channels: [channel] },
        { name: 'subscribe', channels: [channel] },
      ]);
      await store.publishSettled('b1');
      expect(await late.settled).toBe(true);
    } finally {
      await store.close();
      redis.disconnect();
    }
  });
});
