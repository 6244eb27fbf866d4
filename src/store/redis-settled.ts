/**
 * Settled notifications over Redis pub/sub: one subscriber connection per store, created on the
 * first wait and shared by every waiter; a channel is subscribed while someone waits on it. The
 * SUBSCRIBEs and UNSUBSCRIBEs of one turn go out as one command each (in the turn's order), so a
 * caller awaiting a thousand runs does not pay a round trip and a socket write per run for them.
 */
import type { Cluster, Redis } from 'ioredis';
import { timeoutOrAbort } from '../internal/clock.js';
import type { Clock } from '../internal/clock.js';
import type { SettledNotice, SettledWait } from './store.js';

/** Waiters on settled channels, over one lazily created subscriber connection. */
export interface SettledHub {
  /**
   * Wait for a message on `channel`: `settled` resolves true on one, false after `timeoutMs`, on
   * abort, or on close; `listening` once the channel's SUBSCRIBE is acknowledged (or failed: the
   * waiter is then left to its timeout and its caller's re-check).
   */
  wait(channel: string, timeoutMs: number, signal?: AbortSignal): SettledWait;
  /**
   * Resolves once this process's pending SUBSCRIBE to `channel` (if any) is acknowledged, so a
   * publish that follows a wait in the same process always reaches it, as in the memory store.
   */
  subscribed(channel: string): Promise<void>;
  /** Resolve every waiter false and quit the subscriber connection, if one was created. */
  close(): Promise<void>;
}

interface Channel {
  /** Each waiter, told of the message (undefined: given up). */
  readonly waiters: Set<(message: Buffer | undefined) => void>;
  readonly ready: Promise<void>;
}

/** SUBSCRIBEs or UNSUBSCRIBEs of one turn, sent as one command at the turn's end, in the order the turn made them. */
interface Batch {
  readonly kind: 'subscribe' | 'unsubscribe';
  readonly names: string[];
  /** Resolves once the batch's command is acknowledged (or failed). */
  readonly done: Promise<void>;
  send(): void;
}

/**
 * Creates the hub; `connect` is called once, on the first wait, and its connection is owned by
 * the hub. `readNotice` reads what a message carries (a wait's `notice()`).
 */
export function createSettledHub(connect: () => Redis | Cluster, clock: Clock, readNotice: (message: Buffer) => SettledNotice | undefined = () => undefined): SettledHub {
  let subscriber: Redis | Cluster | undefined;
  let closed = false;
  const channels = new Map<string, Channel>();
  /** This turn's batches, sent at its end: one command per run of joins or leaves (a thousand waits started together are one SUBSCRIBE). */
  let batches: Batch[] = [];

  const connection = (): Redis | Cluster => {
    if (subscriber === undefined) {
      subscriber = connect();
      subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => {
        for (const wake of [...(channels.get(channel.toString())?.waiters ?? [])]) wake(message);
      });
      // Its connection errors are the store connection's outage seen twice (that one reports
      // it); a waiter never depends on them: it re-checks the store on its own schedule.
      subscriber.on('error', noop);
    }
    return subscriber;
  };

  const flush = (): void => {
    const due = batches;
    batches = [];
    // Commands on one connection run in order: an UNSUBSCRIBE and a later SUBSCRIBE of one channel keep theirs.
    for (const batch of due) batch.send();
  };

  /** The batch of this turn a join (or leave) goes in: the last one when it is of its kind, else a new one. */
  const batchFor = (kind: Batch['kind']): Batch => {
    const last = batches.at(-1);
    if (last?.kind === kind) return last;
    if (batches.length === 0) process.nextTick(flush);
    const names: string[] = [];
    let acknowledged = noop;
    const done = new Promise<void>((resolve) => (acknowledged = resolve));
    const send = (): void => {
      // Closed meanwhile: its waiters were resolved, and no connection is opened again.
      if (closed || subscriber === undefined) return acknowledged();
      // A failed command leaves its waiters to their timeouts: the notification is a hint, not the truth.
      (kind === 'subscribe' ? subscriber.subscribe(...names) : subscriber.unsubscribe(...names)).then(acknowledged, acknowledged);
    };
    const batch: Batch = { kind, names, done, send };
    batches.push(batch);
    return batch;
  };

  const join = (name: string): Channel => {
    const existing = channels.get(name);
    if (existing !== undefined) return existing;
    connection();
    const batch = batchFor('subscribe');
    batch.names.push(name);
    const channel: Channel = { waiters: new Set(), ready: batch.done };
    channels.set(name, channel);
    return channel;
  };

  const leave = (name: string, channel: Channel): void => {
    if (channel.waiters.size > 0 || channels.get(name) !== channel) return;
    channels.delete(name);
    batchFor('unsubscribe').names.push(name);
  };

  return {
    wait(name, timeoutMs, signal) {
      if (closed || signal?.aborted === true) return { listening: Promise.resolve(), settled: Promise.resolve(false), stop: noop, notice: () => undefined };
      const channel = join(name);
      let done: (message: Buffer | undefined) => void = noop;
      let received: Buffer | undefined;
      const settled = new Promise<boolean>((resolve) => {
        let cancel = noop;
        done = (message: Buffer | undefined): void => {
          if (!channel.waiters.delete(done)) return;
          cancel();
          leave(name, channel);
          received = message;
          resolve(message !== undefined);
        };
        channel.waiters.add(done);
        cancel = timeoutOrAbort(clock, timeoutMs, signal, () => done(undefined));
      });
      // Decoded when asked (awaitResult asks once), not on arrival: a wait nobody asks pays nothing for it.
      return { listening: channel.ready, settled, stop: () => done(undefined), notice: () => (received === undefined ? undefined : readNotice(received)) };
    },
    async subscribed(name) {
      await channels.get(name)?.ready;
    },
    async close() {
      closed = true;
      for (const channel of [...channels.values()]) for (const done of [...channel.waiters]) done(undefined);
      const connection = subscriber;
      subscriber = undefined;
      if (connection !== undefined) await connection.quit().then(noop, () => connection.disconnect());
    },
  };
}

function noop(): void {}
