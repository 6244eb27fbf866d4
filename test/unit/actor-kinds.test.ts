/**
 * The kernel advances actors of any registered kind: a third kind (a two-state probe machine)
 * registered on an engine is driven through the job router, woken by a wake job addressed to its
 * kind, and swept by its own verdict, exactly as executions are.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { setup, transition } from 'xstate';
import { readableMachines, statusOf, tagsOf, undoSettledOf } from '../../machines/registry.js';
import type { ActorTag } from '../../machines/registry-types.js';
import { createMemoryStore } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import { ActorHost } from '../../src/runtime/actor-host.js';
import type { ActorBehaviour, HeldActor, KernelDeps, KindHost, SweepLook, SweepVerdict, Transition } from '../../src/runtime/actor-host.js';
import type { Call } from '../../src/runtime/call.js';
import { createEngine } from '../../src/runtime/engine.js';
import { wakeOf, wakeParams } from '../../src/runtime/wake.js';
import { planCommit } from '../../src/runtime/commit-plan.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import type { LoadedExecution, MapWrites, OutboxEffect, PersistedSnapshot, SignalEvent } from '../../src/store/store.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { TestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

interface ProbeContext {
  /** The probe this one signals when it is done (null: none). */
  readonly notify: string | null;
  /** When a sweep may deliver `probe.go` itself (null: never). */
  readonly dueAt: number | null;
  /** Report to `notify` as an element of it (a map) and signal it only once all its elements reported (`mapSettled`). */
  readonly asElement?: boolean;
  readonly by: string | null;
}
type ProbeEvent = { readonly type: 'probe.go'; readonly from: string };

/** The third kind: `waiting` (awaiting) until `probe.go`, then `done` (settled). */
const probeMachine = setup({ types: { context: {} as ProbeContext, events: {} as ProbeEvent, input: {} as ProbeContext } }).createMachine({
  id: 'probe',
  context: ({ input }) => input,
  initial: 'waiting',
  states: {
    waiting: { tags: ['awaiting'], on: { 'probe.go': 'done' } },
    done: { tags: ['settled'] },
  },
});

const TAGS: Readonly<Record<string, readonly ActorTag[]>> = { waiting: ['awaiting'], done: ['settled'] };

interface HeldProbe extends HeldActor {
  snapshot: { readonly value: string; readonly context: ProbeContext };
}

const persisted = (value: string, context: ProbeContext): PersistedSnapshot => ({ kind: 'probe', machineVersion: 1, value, context });

/** The probe kind's host: its pure transition, its one effect, its sweep verdict. */
class ProbeHost implements ActorBehaviour<HeldProbe>, KindHost<HeldProbe> {
  readonly loop: ActorHost<HeldProbe>;
  readonly #deps: KernelDeps;
  readonly performed: string[] = [];

  constructor(deps: KernelDeps) {
    this.#deps = deps;
    this.loop = new ActorHost(deps, this);
  }

  async load(id: string, loaded: LoadedExecution): Promise<HeldProbe> {
    return { id, snapshot: loaded.snapshot as HeldProbe['snapshot'], revision: loaded.revision, outbox: loaded.outbox, inbox: loaded.inbox, declined: new Set(), inboxStale: false, lease: undefined };
  }

  transition(held: HeldProbe, event: SignalEvent, _call: Call): Transition | undefined {
    const [next] = transition(probeMachine, probeMachine.resolveState(held.snapshot), event as ProbeEvent);
    if (next.value === held.snapshot.value) return undefined;
    const context = { ...held.snapshot.context, by: String(event['from']) };
    const notify = context.notify;
    const key = `${held.id}.go`;
    const asElement = notify !== null && context.asElement === true;
    const effects: OutboxEffect[] = [{ type: 'probe.finished', params: null }, ...(notify === null ? [] : [{ type: 'xreactor.effect.wake', params: wakeParams(notify, 'probe', asElement ? key : undefined) }])];
    const commit: Commit = {
      snapshot: persisted(String(next.value), context),
      status: 'completed',
      writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [], ...(asElement ? { map: { report: { map: notify, index: Number(held.id.slice(held.id.lastIndexOf('.') + 1)), outcome: 'completed', stops: false, at: 1 } } } : {}) },
      outbox: effects,
      ...(notify === null ? {} : { signals: [{ to: notify, event: { type: 'probe.go', from: held.id }, dedupeKey: key, ...(asElement ? { condition: 'mapSettled' as const } : {}) }] }),
    };
    return { next: { value: String(next.value), context }, commit, options: undefined, effects, listed: notify === null ? [] : [notify], landed: () => undefined };
  }

  async perform(held: HeldProbe, effect: OutboxEffect): Promise<SignalEvent | undefined> {
    this.performed.push(`${held.id}:${effect.type}`);
    if (effect.type === 'probe.finished') await this.#deps.store.markActive(held.id, false);
    return undefined;
  }

  tags(value: unknown): ReadonlySet<ActorTag> {
    return new Set(TAGS[String(value)] ?? []);
  }

  adopt(held: HeldProbe, loaded: LoadedExecution): void {
    held.snapshot = loaded.snapshot as HeldProbe['snapshot'];
    held.revision = loaded.revision;
    held.outbox = loaded.outbox;
  }

  persist(held: HeldProbe) {
    return { snapshot: persisted(held.snapshot.value, held.snapshot.context), status: held.snapshot.value === 'done' ? ('completed' as const) : ('running' as const) };
  }

  sweep(_id: string, loaded: LoadedExecution, _look: SweepLook): SweepVerdict {
    if (loaded.inbox.entries.length > 0) return { action: 'job' };
    if (loaded.snapshot.value === 'done') return { action: 'drop' };
    const { dueAt } = loaded.snapshot.context as ProbeContext;
    if (dueAt !== null && this.#deps.clock.now() >= dueAt) return { action: 'deliver', event: { type: 'probe.go', from: 'sweeper' } };
    return { action: 'keep' };
  }
}

function world(clock: TestClock = createTestClock()) {
  const store = createMemoryStore({ clock, machines: { ...readableMachines(), probe: [1] } });
  const queue = createInProcessQueue({ mode: 'manual', clock, maxAttempts: 2, redeliveryDelayMs: () => 0 });
  const engine = createEngine({ store, queue, clock, logger, leaseTtlMs: 10_000 });
  const probes = engine.registerKind('probe', (deps) => new ProbeHost(deps)) as ProbeHost;
  const consumer = queue.consume(createJobHandler(engine));
  return { clock, store, queue, engine, probes, consumer };
}

async function createProbe(store: Store, id: string, context: Partial<ProbeContext> = {}, map?: MapWrites): Promise<void> {
  const full: ProbeContext = { notify: null, dueAt: null, by: null, ...context };
  await store.create({ id, reactor: 'probe', input: {}, commit: { snapshot: persisted('waiting', full), status: 'running', writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [], ...(map === undefined ? {} : { map }) }, outbox: [] } });
}

const valueOf = async (store: Store, id: string) => (await store.load(id))?.snapshot.value;

describe('actor kinds: a third kind on the kernel', () => {
  it('routes a job addressed to the registered kind to its host: the event is delivered and committed', async () => {
    const { store, queue, engine, probes, consumer } = world();
    await createProbe(store, 'p1');
    await queue.enqueue([{ id: 'go-1', kind: 'advance', actor: { kind: 'probe', id: 'p1' }, event: { type: 'probe.go', from: 'test' } }]);
    expect(await queue.drain()).toBe(1);
    expect(await store.load('p1')).toMatchObject({ revision: 2, snapshot: { kind: 'probe', value: 'done', context: { by: 'test' } } });
    expect(probes.performed).toEqual(['p1:probe.finished']);
    expect(engine.kinds()).toEqual(['execution', 'probe']);
    expect(await store.hasLease('p1')).toBe(false);
    // A kind neither this engine nor the store knows is retried, naming the kinds it does know.
    await queue.enqueue([{ id: 'map-1', kind: 'advance', actor: { kind: 'map', id: 'p1' } }]);
    await queue.drain();
    expect(queue.failed().map((f) => [f.job.id, (f.error as Error).message])).toEqual([['map-1', expect.stringMatching(/knows actor kinds execution, probe, not "map"/)]]);
    await consumer.close();
  });

  it('a signal to an actor of the kind wakes it in the same call when its lease is free, else with a wake job addressed to its kind', async () => {
    const { store, queue, probes, consumer } = world();
    await createProbe(store, 'p1', { notify: 'p1.b' });
    await createProbe(store, 'p1.b');
    await queue.enqueue([{ id: 'go-1', kind: 'advance', actor: { kind: 'probe', id: 'p1' }, event: { type: 'probe.go', from: 'test' } }]);
    expect(await queue.drain()).toBe(1);
    expect([await valueOf(store, 'p1'), await valueOf(store, 'p1.b')]).toEqual(['done', 'done']);
    expect((await store.load('p1.b'))?.snapshot.context).toMatchObject({ by: 'p1' });
    expect(probes.performed).toEqual(['p1:probe.finished', 'p1.b:probe.finished']);

    // Another process holds the recipient's lease: the wake becomes a job for the probe kind.
    await createProbe(store, 'p2', { notify: 'p2.b' });
    await createProbe(store, 'p2.b');
    expect(await store.acquireLease('p2.b', 'another-process', 10_000)).toBe(true);
    await queue.enqueue([{ id: 'go-2', kind: 'advance', actor: { kind: 'probe', id: 'p2' }, event: { type: 'probe.go', from: 'test' } }]);
    expect(await queue.runNext()).toBe(true);
    expect(await valueOf(store, 'p2.b')).toBe('waiting');
    expect(queue.pending().map((job) => ({ id: job.id.replace(/\.\d+$/, '.<at>'), actor: job.actor, event: job.event }))).toEqual([{ id: 'p2.b.wake.<at>', actor: { kind: 'probe', id: 'p2.b' }, event: undefined }]);
    await store.releaseLease('p2.b', 'another-process');
    await queue.drain();
    expect(await store.load('p2.b')).toMatchObject({ snapshot: { value: 'done', context: { by: 'p2' } }, inbox: { entries: [] } });
    await consumer.close();
  });

  it('the wake of a conditional signal is performed only when the commit\'s receipt lists its key', async () => {
    const { store, queue, consumer } = world();
    // p3.b is a "map" of two elements p3.b.0 and p3.b.1: it is signalled (and woken) only by the last report.
    await createProbe(store, 'p3.b', {}, { init: { total: 2, batchSize: 2, atomic: true, mode: 'fanOut' }, target: { target: 2 } });
    await createProbe(store, 'p3.b.0', { notify: 'p3.b', asElement: true });
    await createProbe(store, 'p3.b.1', { notify: 'p3.b', asElement: true });
    // Were the first element's wake performed, the map's busy lease would make it a wake job.
    expect(await store.acquireLease('p3.b', 'another-process', 10_000)).toBe(true);
    await queue.enqueue([{ id: 'go-0', kind: 'advance', actor: { kind: 'probe', id: 'p3.b.0' }, event: { type: 'probe.go', from: 'test' } }]);
    expect(await queue.drain()).toBe(1);
    expect(await store.readInbox('p3.b')).toEqual({ entries: [], seq: 0 });
    expect(queue.pending()).toEqual([]);
    await store.releaseLease('p3.b', 'another-process');
    await queue.enqueue([{ id: 'go-1', kind: 'advance', actor: { kind: 'probe', id: 'p3.b.1' }, event: { type: 'probe.go', from: 'test' } }]);
    expect(await queue.drain()).toBe(1);
    expect(await store.load('p3.b')).toMatchObject({ snapshot: { value: 'done', context: { by: 'p3.b.1' } }, inbox: { entries: [] } });
    expect(await store.readMapStats('p3.b')).toMatchObject({ settled: 2, completed: 2 });
    await consumer.close();
  });

  it('a conditional wake in an outbox performed again after a crash (no receipt) is performed anyway', async () => {
    const { store, queue, consumer } = world();
    await createProbe(store, 'p4.b', {}, { init: { total: 2, batchSize: 2, atomic: true, mode: 'fanOut' }, target: { target: 2 } });
    await createProbe(store, 'p4.b.0', { notify: 'p4.b', asElement: true });
    // The element's settling commit landed (its signal did not: one of two reported), then its process died.
    const outbox = [{ type: 'probe.finished', params: null }, { type: 'xreactor.effect.wake', params: wakeParams('p4.b', 'probe', 'p4.b.0.go') }];
    await store.commit('p4.b.0', 1, { snapshot: persisted('done', { notify: 'p4.b', dueAt: null, by: 'test', asElement: true }), status: 'completed', writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] }, outbox });
    expect(await store.acquireLease('p4.b', 'another-process', 10_000)).toBe(true);
    await queue.enqueue([{ id: 'recover-0', kind: 'advance', actor: { kind: 'probe', id: 'p4.b.0' } }]);
    expect(await queue.runNext()).toBe(true);
    expect(queue.pending().map((job) => job.actor)).toEqual([{ kind: 'probe', id: 'p4.b' }]);
    await consumer.close();
  });

  it('a sweep asks the kind for its verdict: keep until due, then a job delivering its event to the kind; a settled one is dropped', async () => {
    const clock = createTestClock(1_000);
    const { store, queue, engine, consumer } = world(clock);
    await createProbe(store, 'p3', { dueAt: 5_000 });
    await createProbe(store, 'p4');
    await store.markActiveMany(['p3', 'p4'], true);
    expect(await engine.sweepOnce(10)).toBe(0);
    expect(queue.pending()).toEqual([]);
    clock.advance(4_000);
    expect(await engine.sweepOnce(10)).toBe(1);
    expect(queue.pending().map((job) => ({ actor: job.actor, event: job.event }))).toEqual([{ actor: { kind: 'probe', id: 'p3' }, event: { type: 'probe.go', from: 'sweeper' } }]);
    await queue.drain();
    expect(await valueOf(store, 'p3')).toBe('done');
    expect((await store.listActive(10)).ids).toEqual(['p4']);
    // A settled probe still listed (its own unlisting was lost) is dropped by the next sweep.
    await store.markActive('p3', true);
    expect(await engine.sweepOnce(10)).toBe(0);
    expect((await store.listActive(10)).ids).toEqual(['p4']);
    // A probe held by a live lease is left to its holder.
    expect(await store.acquireLease('p4', 'another-process', 10_000)).toBe(true);
    await store.signal({ to: 'p4', event: { type: 'probe.go', from: 'signal' }, dedupeKey: 'go' });
    expect(await engine.sweepOnce(10)).toBe(0);
    await store.releaseLease('p4', 'another-process');
    expect(await engine.sweepOnce(10)).toBe(1);
    await queue.drain();
    expect(await store.load('p4')).toMatchObject({ snapshot: { value: 'done', context: { by: 'signal' } }, inbox: { entries: [] } });
    await consumer.close();
  });

  it('refuses to register the execution kind or a kind twice', () => {
    const { engine } = world();
    expect(() => engine.registerKind('probe', (deps) => new ProbeHost(deps))).toThrow(/actor kind "probe" is registered already/);
    expect(() => engine.registerKind('execution', (deps) => new ProbeHost(deps))).toThrow(/actor kind "execution" is registered already/);
  });
});

describe('actor kinds: status questions by kind', () => {
  it('the registry answers status, tags and the end of an undo per kind (nothing for a kind it does not know)', () => {
    expect(statusOf('execution', { running: 'awaiting' })).toBe('running');
    expect(statusOf('execution', 'cancelled')).toBe('cancelled');
    expect([...tagsOf('execution', 'completed')].sort()).toEqual(['settled', 'undoable']);
    // An undo of an execution ended once it failed or was cancelled; completed, halted or aborted ones still have it ahead.
    expect(['failed', 'cancelled', 'completed', 'halted', 'aborted', { rolling_back: 'undoingEntry' }].map((value) => undoSettledOf('execution', value))).toEqual([true, true, false, false, false, false]);
    expect(statusOf('probe', 'done')).toBeUndefined();
    expect(tagsOf('probe', 'done').size).toBe(0);
    expect(undoSettledOf('probe', 'done')).toBe(false);
  });

  it('a wake names the recipient\'s kind; one committed before wakes carried a kind wakes an execution', () => {
    const plan = planCommit([{ type: 'xreactor.write.signal', params: { to: 'r', event: { type: 'xreactor.child.settled', at: 1, child: 'r.c', status: 'completed' }, dedupeKey: 'k' } }]);
    expect(plan.effects).toEqual([{ type: 'xreactor.effect.wake', params: { actor: 'r', kind: 'execution' } }]);
    expect(wakeOf({ type: 'xreactor.effect.wake', params: { actor: 'r' } })).toEqual({ actor: 'r', kind: 'execution' });
    expect(wakeOf({ type: 'xreactor.effect.wake', params: wakeParams('r.m', 'map') })).toEqual({ actor: 'r.m', kind: 'map' });
  });
});
