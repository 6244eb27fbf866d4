/**
 * Settled notifications over Redis pub/sub: one subscriber connection per store, created on the
 * first wait and shared by every waiter; a channel is subscribed while someone waits on it.
 */
import type { Cluster, Redis } from 'ioredis';
import { timeoutOrAbort } from '../internal/clock.js';
import type { Clock } from '../internal/clock.js';
import type { SettledWait } from './store.js';

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
  readonly waiters: Set<(notified: boolean) => void>;
  readonly ready: Promise<void>;
}

/** Creates the hub; `connect` is called once, on the first wait, and its connection is owned by the hub. */
export function createSettledHub(connect: () => Redis | Cluster, clock: Clock): SettledHub {
  let subscriber: Redis | Cluster | undefined;
  let closed = false;
  const channels = new Map<string, Channel>();

  const connection = (): Redis | Cluster => {
    if (subscriber === undefined) {
      subscriber = connect();
      subscriber.on('message', (channel: string) => {
        for (const wake of [...(channels.get(channel)?.waiters ?? [])]) wake(true);
      });
      // Its connection errors are the store connection's outage seen twice (that one reports
      // it); a waiter never depends on them: it re-checks the store on its own schedule.
      subscriber.on('error', noop);
    }
    return subscriber;
  };

  const join = (name: string): Channel => {
    const existing = channels.get(name);
    if (existing !== undefined) return existing;
    // A failed SUBSCRIBE leaves the waiter to its timeout: the notification is a hint, not the truth.
    const channel: Channel = { waiters: new Set(), ready: connection().subscribe(name).then(noop, noop) };
    channels.set(name, channel);
    return channel;
  };

  const leave = (name: string, channel: Channel): void => {
    if (channel.waiters.size > 0 || channels.get(name) !== channel) return;
    channels.delete(name);
    // Commands on one connection run in order: a later SUBSCRIBE to the same channel follows this one.
    subscriber?.unsubscribe(name).then(noop, noop);
  };

  return {
    wait(name, timeoutMs, signal) {
      if (closed || signal?.aborted === true) return { listening: Promise.resolve(), settled: Promise.resolve(false) };
      const channel = join(name);
      const settled = new Promise<boolean>((resolve) => {
        let cancel = noop;
        const done = (notified: boolean): void => {
          if (!channel.waiters.delete(done)) return;
          cancel();
          leave(name, channel);
          resolve(notified);
        };
        channel.waiters.add(done);
        cancel = timeoutOrAbort(clock, timeoutMs, signal, () => done(false));
      });
      return { listening: channel.ready, settled };
    },
    async subscribed(name) {
      await channels.get(name)?.ready;
    },
    async close() {
      closed = true;
      for (const channel of [...channels.values()]) for (const done of [...channel.waiters]) done(false);
      const connection = subscriber;
      subscriber = undefined;
      if (connection !== undefined) await connection.quit().then(noop, () => connection.disconnect());
    },
  };
}

function noop(): void {}
