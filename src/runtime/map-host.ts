/**
 * The hosts of the map operation (kind `map`) and element-rollback (kind `element-rollback`)
 * actors, docs/design/map.md §4, §9.2, §10: their effects, and how their transitions become
 * commits. An inline map throws one element at a time and the element is advanced in the map's
 * call (as compose advances a child); a rollback throws one rollback actor at a time, advanced
 * likewise. A fan-out map throws `batchSize` queued elements (or rollback
 * actors) per commit and enqueues their start jobs with the next one (§9.3, §10.2).
 */
import { createKindStepper } from './machine-stepper.js';
import { createMapMachine, elementIdOf, MAP_MACHINE_VERSION, mapStatusOf, mapTagsOf, rollbackIdOf } from '../../machines/map.js';
import type { ElementCreation, ElementSpawn, MapContext, MapEvent, MapInput, MapStop, RollbackCreation } from '../../machines/map-types.js';
import {
  createElementRollbackMachine,
  ELEMENT_ROLLBACK_MACHINE_VERSION,
  elementRollbackStatusOf,
  elementRollbackTagsOf,
} from '../../machines/element-rollback.js';
import type { ElementRollbackContext, ElementRollbackEvent, ElementRollbackInput } from '../../machines/element-rollback-types.js';
import { executionStatusOf } from '../../machines/execution.js';
import type { ActorTag } from '../../machines/registry-types.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { DeserializationError, WorkInterruptedError, XreactorError } from '../errors/index.js';
import { serializeError } from '../serialization/index.js';
import type { Commit, CommitOptions, LoadedExecution, MapWrites, OutboxEffect, PersistedSnapshot, Signal, SignalEvent, SpawnActor } from '../store/store.js';
import type { RollbackFailure } from '../../machines/execution-types.js';
import type { ActorBehaviour, HeldActor, KernelDeps, KindHost, SweepLook, SweepVerdict, Transition } from './actor-host.js';
import { ActorHost, commitLease, markStale } from './actor-host.js';
import type { Call, Place } from './call.js';
import type { Hooks, MapProgressHook } from '../observability/middleware.js';
import { jobId } from '../queue/job-ids.js';
import type { JobSpec, Queue } from '../queue/queue.js';
import type { HeldLease } from './lease.js';
import type { ExecutionHost, HeldExecution } from './host.js';
import { CARRIED_INPUT_MAX_BYTES } from './host.js';
import type { MapSpawnArgs, MapStoredInput } from './map.js';
import { completedElements, mapResultsOf, mapResultsRef } from './map-results.js';
import { performRollbackHandler } from './step-performer.js';
import { decodeRollbackStart, encodeElementStart, encodeRollbackStart } from './element-start.js';
import { wakeParams } from './wake.js';

type Action = { readonly type: string; readonly params?: unknown };
type Snap = { readonly value: unknown; readonly context: unknown };

/** A map or rollback actor's commit plan: its writes, outbox, signals, spawns and awaits. */
interface KindPlan {
  map: MapWrites;
  effects: OutboxEffect[];
  signals: Signal[];
  awaits: readonly string[] | undefined;
  elements: { readonly lease: boolean; readonly list: readonly ElementCreation[]; readonly element: { reactor: string; version: number; fingerprint: string } } | undefined;
  rollbacks: readonly RollbackCreation[] | undefined;
  selfSignal: boolean;
}

function planOf(id: string, actions: readonly Action[]): KindPlan {
  const plan: KindPlan = { map: {}, effects: [], signals: [], awaits: undefined, elements: undefined, rollbacks: undefined, selfSignal: false };
  const wakes: OutboxEffect[] = [];
  for (const action of actions) {
    const p = action.params as never;
    switch (action.type) {
      case 'xreactor.write.map.init':
        plan.map = { ...plan.map, init: p };
        break;
      case 'xreactor.write.map.target':
        plan.map = { ...plan.map, target: p };
        break;
      case 'xreactor.write.map.rollbackTarget':
        plan.map = { ...plan.map, rollbackTarget: p };
        break;
      case 'xreactor.write.map.dropSource':
        plan.map = { ...plan.map, dropSource: true };
        break;
      case 'xreactor.write.map.rollbackReport': {
        const r = p as { map: string; position: number; outcome: never; failures: readonly RollbackFailure[] };
        plan.map = { ...plan.map, rollbackReport: { map: r.map, position: r.position, outcome: r.outcome, failures: r.failures } };
        break;
      }
      case 'xreactor.write.spawnElements': {
        const s = p as { element: { reactor: string; version: number; fingerprint: string }; lease: boolean; elements: readonly ElementCreation[] };
        plan.elements = { lease: s.lease, list: s.elements, element: s.element };
        break;
      }
      case 'xreactor.write.spawnRollbacks':
        plan.rollbacks = (p as { actors: readonly RollbackCreation[] }).actors;
        break;
      case 'xreactor.write.signal': {
        const s = p as { to: string; event: SignalEvent; dedupeKey: string; condition?: never; kind?: string };
        plan.signals.push({ to: s.to, event: s.event, dedupeKey: s.dedupeKey, ...(s.condition === undefined ? {} : { condition: s.condition }) });
        if (s.to === id) plan.selfSignal = true;
        else {
          const kind = s.kind ?? (s.event.type.startsWith('xreactor.map.') ? 'map' : 'execution');
          wakes.push({ type: 'xreactor.effect.wake', params: wakeParams(s.to, kind, s.condition === undefined ? undefined : s.dedupeKey) });
        }
        break;
      }
      case 'xreactor.write.awaits':
        plan.awaits = (p as { actors: readonly string[] }).actors;
        break;
      default:
        if (action.type.startsWith('xreactor.effect.')) plan.effects.push({ type: action.type, params: action.params });
    }
  }
  // Wakes first (as commit-plan.ts): an awaitChild that advances the recipient in this call takes it off the woken list.
  plan.effects.unshift(...wakes);
  return plan;
}

const hasMapWrites = (map: MapWrites) => Object.keys(map).length > 0;
const writesOf = (map: MapWrites) => ({ results: [], pushUndo: [], truncateUndoTo: undefined, trace: [], ...(hasMapWrites(map) ? { map } : {}) });

/** A spawned actor built for a commit: its held form, its creation and how this call starts it. */
interface Spawned {
  readonly id: string;
  readonly held: HeldActor;
  readonly create: SpawnActor;
  readonly lease: HeldLease | undefined;
  readonly start: (call: Call) => Promise<void>;
}

/** A map operation actor as its host holds it. */
export interface HeldMap extends HeldActor {
  snapshot: Snap;
  readonly inputs: MapStoredInput;
  /**
   * The start payloads of the fan-out rollback actors of the last rollback throw, by position from
   * `from`, while their start jobs are to be enqueued (not kept across processes: after a crash
   * they are built again from the started list, {@link MapHost.rollbackStarts}).
   */
  rollbackStarts?: { readonly from: number; readonly payloads: readonly Uint8Array[] } | undefined;
  /** The start payloads of the fan-out elements of the last throw, while their start jobs are to be enqueued (not kept across processes). */
  starts?: { readonly from: number; readonly payloads: readonly Uint8Array[] } | undefined;
  /** The page of a paged source read last: `page` is called once per `batchSize` elements. */
  page?: { readonly from: number; readonly items: readonly unknown[]; readonly ended: boolean } | undefined;
}

/** An element-rollback actor as its host holds it. */
export interface HeldRollback extends HeldActor {
  snapshot: Snap;
}

/** What the map hosts need besides the kernel's services. */
export interface MapHostDeps extends KernelDeps {
  readonly hooks: Hooks;
  /** The owner reactor (by the map's context), at the version and plan it started with. */
  readonly definitionOf: (ref: { reactor: string; version: number; fingerprint: string }) => AnyReactorDefinition;
  readonly hostFor: (definition: AnyReactorDefinition) => ExecutionHost;
  /** The rollback host (built after the map host). */
  readonly rollbacks: () => ElementRollbackHost;
  /** How long a fan-out map waits with unsettled positions and no report before a sweep redispatches them (EngineOptions.mapStallMs). */
  readonly stallMs: number;
  /** Lease checks before a rollback actor reports `element_in_flight`. */
  readonly lockSnoozeMaxAttempts: number;
  /** The pause between two lease checks of a held element. */
  readonly lockSnoozeDelayMs: number;
}

const newHeldActor = <H extends HeldActor>(id: string, snapshot: Snap, revision: number, outbox: readonly OutboxEffect[], extra: Omit<H, keyof HeldActor>): H =>
  ({ id, snapshot, revision, outbox, inbox: { entries: [], seq: 0 }, declined: new Set(), inboxStale: false, lease: undefined, ...extra }) as unknown as H;

/**
 * The rollback throw a position of a fan-out rollback belongs to, and whether it is its last: throws
 * are consecutive windows of the map's stored batch size from position 0 (the rollback's total
 * is fixed when it starts), as the map machine's `recordRollbackThrow` makes them.
 */
function rollbackThrowOf(context: MapContext, position: number): { readonly throw: number; readonly lastOfThrow: boolean } {
  const total = context.rollback?.total ?? 0;
  return { throw: Math.floor(position / context.batchSize), lastOfThrow: position % context.batchSize === context.batchSize - 1 || position === total - 1 };
}

/** The start payloads of a fan-out rollback throw's actors, by position from the first (their positions are consecutive). */
function rollbackStartsOf(context: MapContext, actors: readonly RollbackCreation[]): { readonly from: number; readonly payloads: Uint8Array[] } {
  const from = actors[0]?.position ?? context.rollback?.offset ?? 0;
  const payloads = actors.map((actor, i) => {
    if (actor.position !== from + i) throw new XreactorError('map_throw_invalid', `map ${context.mapId}: rollback throw ${actor.throw} names position ${actor.position} at place ${i} after ${from}; a throw's positions are consecutive`);
    return encodeRollbackStart({ reactor: context.reactor, step: context.step, index: actor.index, throw: actor.throw, lastOfThrow: actor.lastOfThrow });
  });
  return { from, payloads };
}

/** The start job of fan-out rollback actor at `position` of `map` (JobSpec.start: its payload always rides with it); a redispatch round names a new job. */
function rollbackStartJob(map: string, position: number, payload: Uint8Array, round?: number): JobSpec {
  const id = rollbackIdOf(map, position);
  return {
    id: round === undefined ? jobId(id, 'start') : jobId(id, 'start', `r${round}`),
    kind: 'advance',
    actor: { kind: 'element-rollback', id },
    start: { map, index: position, payload },
  };
}

/** The start payloads of a fan-out throw's elements, by position from `from` (their indexes are consecutive). */
function startsOf(context: MapContext, elements: readonly ElementCreation[]): { readonly from: number; readonly payloads: Uint8Array[] } {
  const from = elements[0]?.map.index ?? context.offset;
  const payloads = elements.map((element, i) => {
    if (element.map.index !== from + i) throw new XreactorError('map_throw_invalid', `map ${context.mapId}: throw ${element.map.throw} names element ${element.map.index} at place ${i} after ${from}; a throw's elements are consecutive`);
    return encodeElementStart({ element: context.element, path: [...context.ownerPath, context.step, String(element.map.index)], map: element.map, spawn: element.spawn });
  });
  return { from, payloads };
}

/** The start job of fan-out element `index` of `map` (JobSpec.start); a redispatch round names a new job. */
function elementStartJob(map: string, index: number, payload: Uint8Array | undefined, round?: number): JobSpec {
  const id = elementIdOf(map, index);
  return {
    id: round === undefined ? jobId(id, 'start') : jobId(id, 'start', `r${round}`),
    kind: 'advance',
    actor: { kind: 'execution', id },
    start: { map, index, ...(payload === undefined ? {} : { payload }) },
  };
}

/** Which `mapProgress` event a map transition is, if any. */
function progressOf(event: MapEvent, next: Snap): Pick<MapProgressHook, 'event' | 'throw' | 'outcome'> | undefined {
  const context = next.context as MapContext;
  switch (event.type) {
    case 'xreactor.map.thrown':
      return { event: 'throw', throw: event.throw };
    case 'xreactor.map.concluded':
      return { event: 'settled', outcome: event.outcome };
    case 'xreactor.map.rollbackStarted':
      return { event: 'rollback_started' };
    case 'xreactor.map.rollbackThrown':
      return { event: 'rollback_throw', throw: event.throw };
    default:
      return next.value === 'undone' && context.rollback !== null ? { event: 'rolled_back' } : undefined;
  }
}

/** The queue a map's jobs go to; a runtime without one cannot run fan-out maps. */
function queueOf(deps: KernelDeps, id: string): Queue {
  if (deps.queue === undefined) throw new XreactorError('queue_required', `map ${id} fans out to workers, but this runtime has no queue; pass createRuntime({ queue })`);
  return deps.queue;
}

/** The stop a gate's `stop` field records (`failed:2`). */
function parseStop(stop: string): MapStop {
  const [kind, index] = stop.split(':');
  return { kind: kind as MapStop['kind'], index: Number(index) };
}

/** The kind host of map operation actors. */
export class MapHost implements ActorBehaviour<HeldMap>, KindHost<HeldMap> {
  readonly loop: ActorHost<HeldMap>;
  readonly #deps: MapHostDeps;
  readonly #stepper = createKindStepper(createMapMachine(), undefined);

  constructor(deps: MapHostDeps) {
    this.#deps = deps;
    this.loop = new ActorHost(deps, this);
  }

  /** The compiled map step a map runs (from its owner's definition). */
  #stepOf(context: MapContext): CompiledStep {
    const definition = this.#deps.definitionOf({ reactor: context.reactor, version: context.version, fingerprint: context.fingerprint });
    const step = definition.steps.find((s) => s.name === context.step);
    if (step?.map === undefined) throw new XreactorError('map_step_unknown', `map ${context.mapId}: reactor "${context.reactor}" has no map step "${context.step}"`, { retryable: true });
    return step;
  }

  /** The creation of a map operation for its owner's commit (`xreactor.map.spawn`), with this process's lease. */
  async creation(owner: HeldExecution, ownerDefinition: AnyReactorDefinition, step: CompiledStep, id: string, args: MapSpawnArgs, place: Place): Promise<Spawned> {
    const map = step.map!;
    const at = this.#deps.clock.now();
    const input: MapInput = {
      mapId: id,
      owner: owner.id,
      ownerPath: owner.snapshot.context.origin.path,
      step: step.name,
      reactor: ownerDefinition.name,
      version: ownerDefinition.version,
      fingerprint: ownerDefinition.fingerprint,
      element: { reactor: map.element.name, version: map.element.version, fingerprint: map.element.fingerprint },
      mode: map.fanOut ? 'fanOut' : 'inline',
      batchSize: map.batchSize,
      atomic: map.atomic,
      undoAll: map.undoAll !== undefined,
      total: args.items === undefined ? null : args.items.length,
      at,
    };
    const [snapshot, actions] = this.#stepper.initial(input);
    const plan = planOf(id, actions);
    const stored: MapStoredInput = { template: args.template, pagedArgs: args.pagedArgs };
    const writes = writesOf({ ...plan.map, ...(args.items === undefined || args.items.length === 0 ? {} : { source: args.items }) });
    // A fan-out map spawned by a caller throws in a worker (§9.3): it is created without a lease, for its start job to take.
    const lease = map.fanOut && place === 'caller' ? undefined : this.#deps.lease(id);
    const held = newHeldActor<HeldMap>(id, snapshot, 1, plan.effects, { inputs: stored });
    held.lease = lease;
    const create: SpawnActor = {
      id,
      reactor: ownerDefinition.name,
      input: stored,
      kind: 'map',
      ...(lease === undefined ? {} : { lease: lease.request }),
      commit: { snapshot: this.#persist(snapshot), status: mapStatusOf(snapshot.value), writes, outbox: plan.effects, ...(plan.signals.length === 0 ? {} : { signals: plan.signals }) },
    };
    return { id, held, create, lease, start: (call) => this.startSpawned(held, call) };
  }

  /**
   * Start a spawned map: perform its creating commit's outbox, then keep driving. A fan-out map a
   * caller spawned (no lease) gets its start job instead: the caller never runs a page query, and
   * its call ends with the root `dispatched`.
   */
  async startSpawned(held: HeldMap, call: Call): Promise<void> {
    if (held.lease === undefined) {
      await queueOf(this.#deps, held.id).enqueue([{ id: jobId(held.id, 'start'), kind: 'advance', actor: { kind: 'map', id: held.id } }]);
      return;
    }
    await this.loop.continueWith(held, await this.loop.performAll(held, held.outbox, call), call);
  }

  #persist(snapshot: Snap): PersistedSnapshot {
    return { kind: 'map', machineVersion: MAP_MACHINE_VERSION, value: snapshot.value, context: snapshot.context };
  }

  async load(id: string, loaded: LoadedExecution, input: { readonly value: unknown } | undefined): Promise<HeldMap | undefined> {
    if (loaded.snapshot.kind !== 'map' || loaded.snapshot.machineVersion !== MAP_MACHINE_VERSION) {
      throw new DeserializationError(`actor ${id} was stored as ${loaded.snapshot.kind} machine version ${loaded.snapshot.machineVersion}; this host runs map machine version ${MAP_MACHINE_VERSION}`, { retryable: true });
    }
    const inputs = (input === undefined ? await this.#deps.store.readInput(id) : input.value) as MapStoredInput;
    const held = newHeldActor<HeldMap>(id, this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context), loaded.revision, loaded.outbox, { inputs });
    held.inbox = loaded.inbox;
    return held;
  }

  adopt(held: HeldMap, loaded: LoadedExecution): void {
    held.snapshot = this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context);
    held.revision = loaded.revision;
    held.outbox = loaded.outbox;
  }

  tags(value: unknown): ReadonlySet<ActorTag> {
    return mapTagsOf(value);
  }

  persist(held: HeldMap) {
    return { snapshot: this.#persist(held.snapshot), status: mapStatusOf(held.snapshot.value) };
  }

  /**
   * A map with no live lease: its inbox or a recoverable state → a job (it performs its throw,
   * enqueue, conclusion or rollback step again); a fan-out map waiting with dispatched positions
   * unsettled and nothing reported for `stallMs` → a redispatch of the start jobs of those not
   * started (their jobs were lost or failed for good).
   */
  async sweep(id: string, loaded: LoadedExecution, _look: SweepLook): Promise<SweepVerdict> {
    if (loaded.inbox.entries.length > 0) return { action: 'job' };
    const tags = mapTagsOf(loaded.snapshot.value);
    if (tags.has('settled')) return { action: 'drop' };
    if (tags.has('recoverable')) return { action: 'job' };
    const context = loaded.snapshot.context as MapContext;
    if (context.mode !== 'fanOut' || !tags.has('awaiting')) return { action: 'keep' };
    const stats = await this.#deps.store.readMapStats(id);
    if (stats === undefined) return { action: 'keep' };
    const phase = mapStatusOf(loaded.snapshot.value) === 'rolling_back' ? 'rollback' : 'forward';
    const unsettled = phase === 'forward' ? context.offset - stats.settled : (context.rollback?.offset ?? 0) - stats.rollback.settled;
    const quietSince = Math.max(context.updatedAt, phase === 'forward' ? (stats.lastReportAt ?? 0) : 0);
    const now = this.#deps.clock.now();
    if (unsettled <= 0 || now - quietSince <= this.#deps.stallMs) return { action: 'keep' };
    return { action: 'deliver', event: { type: 'xreactor.map.redispatch', at: now, phase } };
  }

  async transition(held: HeldMap, event: SignalEvent, call: Call): Promise<Transition | undefined> {
    const [first, actions] = this.#stepper.next(held.snapshot, event);
    if (first === held.snapshot) return undefined;
    const folded = await this.#readAhead(held, first, planOf(held.id, actions), call);
    const { next, plan } = folded;
    const events = [{ event, next: first }, ...folded.events];
    const context = next.context as MapContext;
    const spawned: Spawned[] = [];
    // Fan-out elements are not created here: the throw writes their start payloads, and each
    // start job creates its element with its first commit (docs/design/map.md §19).
    const starts = plan.elements !== undefined && !plan.elements.lease ? startsOf(context, plan.elements.list) : undefined;
    if (starts !== undefined) plan.map = { ...plan.map, starts: { from: starts.from, starts: starts.payloads } };
    else if (plan.elements !== undefined) {
      for (const element of plan.elements.list) spawned.push(await this.#element(context, element));
    }
    // Fan-out rollback actors are not created here either: each start job carries its actor's
    // start payload, and the worker creates the actor with its first commit.
    const rollbackStarts = plan.rollbacks !== undefined && context.mode === 'fanOut' ? rollbackStartsOf(context, plan.rollbacks) : undefined;
    if (plan.rollbacks !== undefined && rollbackStarts === undefined) for (const actor of plan.rollbacks) spawned.push(this.#deps.rollbacks().creation(context, actor));
    const commit: Commit = {
      snapshot: this.#persist(next),
      status: mapStatusOf(next.value),
      writes: writesOf(plan.map),
      outbox: plan.effects,
      ...(plan.signals.length === 0 ? {} : { signals: plan.signals }),
      ...(plan.awaits === undefined ? {} : { awaits: plan.awaits }),
      ...(spawned.length === 0 ? {} : { spawn: spawned.map((s) => s.create) }),
    };
    const finished = plan.effects.some((e) => e.type === 'xreactor.effect.finished');
    return {
      next,
      commit,
      options: finished ? { announce: true, unlist: true } : undefined,
      effects: plan.effects,
      listed: plan.signals.filter((s) => s.to !== held.id).map((s) => s.to),
      landed: (landedIn) => {
        if (plan.selfSignal) markStale(held);
        const progress = this.#deps.hooks.has('mapProgress') ? events.map((e) => progressOf(e.event as MapEvent, e.next)).filter((p) => p !== undefined) : [];
        // Inline, the one element or rollback actor is advanced in this call; fan-out ones by
        // their start jobs, which carry their start payloads.
        if (starts !== undefined) held.starts = starts;
        if (rollbackStarts !== undefined) held.rollbackStarts = rollbackStarts;
        for (const child of spawned) {
          if (child.lease === undefined) continue;
          child.lease.taken();
          landedIn.spawned.set(child.id, { held: child.held, start: child.start });
        }
        return progress.length === 0 ? undefined : this.#emitProgress(held.id, context, progress);
      },
    };
  }

  /**
   * A transition whose only effect is a read of the store (a throw's window of a stored source and
   * the gate, a rollback throw's started positions, the conclusion's or the rollback's counters)
   * is followed at once by the transition that read leads to, and both are committed as one: the
   * read is performed before the first transition's state is stored, which changes nothing a crash
   * could see (a read is performed again from the stored state, the signal that led to it is still
   * in the inbox), and saves a commit and its round trip on a throw's critical path
   * (docs/design/map.md §9.3, "Reads ahead of the commit"). Otherwise, or when the plans of the two
   * transitions would overlap, the first transition alone, as before.
   */
  async #readAhead(held: HeldMap, first: Snap, plan: KindPlan, call: Call): Promise<{ readonly next: Snap; readonly plan: KindPlan; readonly events: readonly { readonly event: MapEvent; readonly next: Snap }[] }> {
    let next = first;
    let merged = plan;
    const events: { event: MapEvent; next: Snap }[] = [];
    // A rollback's start reads its counters, then its first throw its positions: a chain of reads.
    // (A signal to another actor comes with its wake effect: the read is then not the only effect.)
    for (;;) {
      const [effect] = merged.effects;
      if (merged.effects.length !== 1 || !this.#readsOnly(next.context as MapContext, effect!) || merged.elements !== undefined || merged.rollbacks !== undefined || call.signal.aborted) break;
      const event = await this.#perform(held, effect!, call, next.context as MapContext);
      if (event === undefined) break;
      const [after, actions] = this.#stepper.next(next, event);
      if (after === next) break;
      const then = planOf(held.id, actions);
      if (Object.keys(merged.map).some((key) => key in then.map) || (merged.awaits !== undefined && then.awaits !== undefined)) break;
      merged = { ...then, map: { ...merged.map, ...then.map }, signals: [...merged.signals, ...then.signals], awaits: then.awaits ?? merged.awaits, selfSignal: merged.selfSignal || then.selfSignal };
      next = after;
      events.push({ event, next });
    }
    return { next, plan: merged, events };
  }

  /** Whether an effect only reads the store (a throw over a paging function calls it: not a read). */
  #readsOnly(context: MapContext, effect: OutboxEffect): boolean {
    switch (effect.type) {
      case 'xreactor.effect.map.throw':
        return this.#stepOf(context).map!.source.kind === 'source';
      case 'xreactor.effect.map.rollbackThrow':
      case 'xreactor.effect.map.conclude':
      case 'xreactor.effect.map.rollbackStart':
        return true;
      default:
        return false;
    }
  }

  /** The `mapProgress` hook of a map commit: the counters are read once, after it landed. */
  async #emitProgress(id: string, context: MapContext, progress: readonly Pick<MapProgressHook, 'event' | 'throw' | 'outcome'>[]): Promise<void> {
    const stats = await this.#deps.store.readMapStats(id);
    const rb = context.rollback;
    for (const one of progress) {
      this.#deps.hooks.emit('mapProgress', {
        reactor: context.reactor,
        executionId: context.owner,
        path: context.ownerPath,
        step: context.step,
        map: id,
        ...one,
        total: context.total,
        dispatched: context.offset,
        settled: stats?.settled ?? 0,
        ...(rb === null ? {} : { rollback: { total: rb.total, settled: stats?.rollback.settled ?? 0 } }),
      });
    }
  }

  /** An inline element's creation for the map's throw commit, with this process's lease (unless it fails at once). */
  async #element(context: MapContext, element: ElementCreation): Promise<Spawned> {
    const definition = this.#deps.definitionOf(context.element);
    const host = this.#deps.hostFor(definition);
    const spawn: ElementSpawn = element.spawn;
    const rejected = 'error' in spawn ? spawn.error : undefined;
    const { held, create, plan } = await host.creation(
      element.id,
      'input' in spawn ? spawn.input : undefined,
      { parentId: context.mapId, path: [...context.ownerPath, context.step, String(element.map.index)] },
      { map: element.map, ...(rejected === undefined ? {} : { rejected }) },
    );
    const leaves = plan.effects.some((e) => e.type === 'xreactor.effect.finished');
    const lease = leaves ? undefined : this.#deps.lease(element.id);
    held.lease = lease;
    return {
      id: element.id,
      held,
      // Detached; one that fails at once is not listed (it settled).
      create: { ...create, retainWithParent: false, ...(lease === undefined ? { listed: false } : { lease: lease.request }) },
      lease,
      start: (call) => host.startSpawned(held, call),
    };
  }

  perform(held: HeldMap, effect: OutboxEffect, call: Call): Promise<SignalEvent | undefined> {
    return this.#perform(held, effect, call);
  }

  /** Perform one effect of the map's state (`context`: of the state a read ahead of its commit is performed for). */
  async #perform(held: HeldMap, effect: OutboxEffect, call: Call, context = held.snapshot.context as MapContext): Promise<MapEvent | undefined> {
    const { store, clock } = this.#deps;
    switch (effect.type) {
      case 'xreactor.effect.map.throw':
        return this.#throw(held, effect.params as { throw: number; from: number; size: number }, call, context);
      case 'xreactor.effect.map.conclude': {
        const stats = await store.readMapStats(held.id);
        const stop = stats?.stop ?? context.stop;
        const outcome = stop !== null ? stop.kind : context.failure !== null ? 'failed' : 'completed';
        return { type: 'xreactor.map.concluded', at: clock.now(), outcome, stop };
      }
      case 'xreactor.effect.map.rollbackStart': {
        const stats = await store.readMapStats(held.id);
        return { type: 'xreactor.map.rollbackStarted', at: clock.now(), total: stats?.started ?? 0, aborted: stats?.aborted ?? 0 };
      }
      case 'xreactor.effect.map.rollbackThrow': {
        const p = effect.params as { throw: number; from: number; size: number; total: number; list: 'started' | 'aborted' };
        // With undoAll, only the interrupted (aborted) elements replay their own undo stacks; undoAll covers the completed ones.
        const indexes = await store.readMapStarted(held.id, p.total, p.from, p.size, p.list);
        return { type: 'xreactor.map.rollbackThrown', at: clock.now(), throw: p.throw, from: p.from, positions: indexes.map((index, i) => ({ position: p.from + i, index })) };
      }
      case 'xreactor.effect.map.undoAll':
        return this.#undoAll(held, context, call);
      case 'xreactor.effect.awaitChild': {
        await this.loop.advanceAwaited(held, (effect.params as { child: string }).child, call);
        return undefined;
      }
      case 'xreactor.effect.map.enqueue': {
        // One enqueue call for the whole throw (at most batchSize jobs), ids deterministic: performed again after a crash, it enqueues nothing twice.
        const p = effect.params as { kind: 'element' | 'rollback'; from: number; count: number };
        const { starts } = held;
        held.starts = undefined;
        let jobs: JobSpec[];
        if (p.kind === 'element') {
          jobs = Array.from({ length: p.count }, (_, i): JobSpec => {
            const index = p.from + i;
            // An element's start payload rides with its start job (a large one, or one this
            // process no longer holds after a crash, is read from the map's start payloads).
            const payload = starts !== undefined && index >= starts.from ? starts.payloads[index - starts.from] : undefined;
            const carry = payload !== undefined && payload.byteLength <= CARRIED_INPUT_MAX_BYTES;
            return elementStartJob(held.id, index, carry ? payload : undefined);
          });
        } else {
          // A rollback actor's start payload rides with its start job; the worker's first commit
          // creates the actor, fenced by its absence (a duplicate start reads the store).
          const kept = held.rollbackStarts;
          held.rollbackStarts = undefined;
          const payloads = kept !== undefined && kept.from === p.from && kept.payloads.length === p.count ? kept.payloads : await this.rollbackStarts(held.id, context, p.from, p.count);
          jobs = payloads.map((payload, i) => rollbackStartJob(held.id, p.from + i, payload));
        }
        // Siblings of one throw: the BullMQ adapter carries them in bundles, each still its own job.
        if (jobs.length > 0) await queueOf(this.#deps, held.id).enqueue(jobs, { bundle: true });
        return { type: 'xreactor.map.enqueued', at: clock.now(), kind: p.kind, from: p.from };
      }
      case 'xreactor.effect.map.redispatch':
        return this.#redispatch(held, effect.params as { phase: 'forward' | 'rollback'; from: number; size: number; round: number });
      case 'xreactor.effect.finished':
        // The settling commit took it off the recovery index.
        if (held.revision > 1) return undefined;
        store.markActive(held.id, false).catch((error: unknown) => {
          this.#deps.logger.warn({ event: 'xreactor.index.remove_failed', executionId: held.id, err: error }, 'could not remove a settled map from the recovery index');
        });
        return undefined;
      default:
        throw new XreactorError('map_effect_unknown', `map ${held.id}: effect ${effect.type} is not one this build performs`);
    }
  }

  /**
   * One redispatch window (at most `batchSize` positions): an element still queued, or a rollback
   * actor still unstarted, with no lease gets its start job again under a new id (`.start.r<round>`).
   * Started ones are listed for the sweeper, which recovers them itself. A duplicate start is
   * harmless: `element.start` is accepted only by a queued element, a resolve only by a resolving actor.
   */
  async #redispatch(held: HeldMap, p: { phase: 'forward' | 'rollback'; from: number; size: number; round: number }): Promise<MapEvent> {
    const { store, clock, logger } = this.#deps;
    const context = held.snapshot.context as MapContext;
    const forward = p.phase === 'forward';
    const jobs = (
      await Promise.all(
        Array.from({ length: p.size }, async (_, i): Promise<JobSpec | undefined> => {
          const index = p.from + i;
          const id = forward ? elementIdOf(held.id, index) : rollbackIdOf(held.id, index);
          const loaded = await store.load(id);
          // An actor that does not exist was never started: its start job again (an element's
          // payload read from the store, a rollback actor's built again from the started list).
          if (loaded === undefined) return forward ? elementStartJob(held.id, index, undefined, p.round) : rollbackStartJob(held.id, index, (await this.rollbackStarts(held.id, context, index, 1))[0]!, p.round);
          // (A queued element or an unstarted rollback actor stored by an earlier build starts from the store.)
          const waiting = forward ? loaded.snapshot.value === 'queued' : loaded.snapshot.value === 'resolving' && loaded.revision === 1;
          return waiting && !loaded.leased ? { id: jobId(id, 'start', `r${p.round}`), kind: 'advance', actor: { kind: forward ? 'execution' : 'element-rollback', id } } : undefined;
        }),
      )
    ).filter((job): job is JobSpec => job !== undefined);
    if (jobs.length > 0) {
      await queueOf(this.#deps, held.id).enqueue(jobs, { bundle: true });
      logger.info({ event: 'xreactor.map.redispatched', executionId: held.id, phase: p.phase, round: p.round, from: p.from, jobs: jobs.length }, 'restarted the start jobs of map positions not started');
    }
    return { type: 'xreactor.map.redispatched', at: clock.now(), next: p.from + p.size };
  }

  /**
   * The start payloads of fan-out rollback positions `[from, from + count)`, built again from the
   * map's started list (the rollback's own list, read from its tail) and its stored batch size:
   * for start jobs enqueued again after a crash, and for a redispatch.
   */
  async rollbackStarts(id: string, context: MapContext, from: number, count: number): Promise<Uint8Array[]> {
    const rb = context.rollback;
    if (rb === null) throw new XreactorError('map_rollback_missing', `map ${id}: rollback positions ${from}…${from + count - 1} were asked for, but the map is not rolling back`);
    const indexes = await this.#deps.store.readMapStarted(id, rb.total, from, count, rb.list);
    if (indexes.length !== count) throw new XreactorError('map_rollback_missing', `map ${id}: the started list holds ${indexes.length} of rollback positions ${from}…${from + count - 1}; its data is incomplete`);
    return indexes.map((index, i) => encodeRollbackStart({ reactor: context.reactor, step: context.step, index, ...rollbackThrowOf(context, from + i) }));
  }

  /** A throw: the gate, then the window's items and the elements' inputs. */
  async #throw(held: HeldMap, p: { throw: number; from: number; size: number }, call: Call, context: MapContext): Promise<MapEvent> {
    const { store, clock } = this.#deps;
    if (call.signal.aborted) {
      const reason: unknown = call.signal.reason;
      const text = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted';
      // A worker that is interrupted commits nothing: the job is redelivered.
      if (call.place === 'worker') throw new WorkInterruptedError(held.id, text);
      return { type: 'xreactor.execution.abort', at: clock.now(), reason: text };
    }
    const step = this.#stepOf(context);
    const map = step.map!;
    // A stored source's window is read alongside the gate (one round trip instead of two); it goes
    // unused when the gate is closed. A paging function is called only once the gate is open.
    const stored = map.source.kind === 'source' && p.size > 0 ? store.readMapSource(held.id, p.from, p.size) : undefined;
    // Its failure, if any, is met where the window is used (below); unused, it is dropped.
    stored?.catch(() => undefined);
    const gate = await store.readMapGate(held.id);
    if (gate.stop !== undefined) return { type: 'xreactor.map.stop', at: clock.now(), throw: p.throw, stop: parseStop(gate.stop) };
    let items: readonly unknown[];
    let exhausted: boolean;
    let total: number | null = context.total;
    try {
      if (map.source.kind === 'source') {
        items = stored === undefined ? [] : await stored;
        exhausted = total === null ? items.length < p.size : p.from + items.length >= total;
      } else {
        const source = map.source;
        const ownerInputs = (await store.readInput(context.owner)) as Readonly<Record<string, unknown>>;
        const pageCtx = { args: held.inputs.pagedArgs, inputs: ownerInputs, signal: call.signal };
        if (p.throw === 0 && total === null && source.count !== undefined) {
          const counted = await source.count(pageCtx);
          if (!Number.isSafeInteger(counted) || counted < 0) throw new Error(`count() returned ${String(counted)}, not a whole number >= 0`);
          total = counted;
        }
        const size = total === null ? p.size : Math.min(p.size, total - p.from);
        let page = held.page;
        if (size > 0 && (page === undefined || p.from < page.from || p.from + size > page.from + page.items.length) && !(page?.ended === true && p.from >= page.from)) {
          const limit = total === null ? context.batchSize : Math.min(context.batchSize, total - p.from);
          const fetched = await source.page(p.from, limit, pageCtx);
          if (!Array.isArray(fetched)) throw new Error(`page(${p.from}, ${limit}) returned ${typeof fetched}, not an array`);
          page = { from: p.from, items: fetched, ended: fetched.length < limit };
          held.page = page;
        }
        items = size <= 0 || page === undefined ? [] : page.items.slice(p.from - page.from, p.from - page.from + size);
        exhausted = total !== null ? p.from + items.length >= total : items.length < size || (page?.ended === true && p.from + items.length >= page.from + page.items.length);
      }
    } catch (error) {
      const failure = new XreactorError('map_source_invalid', `map "${context.step}" (${held.id}): reading its source failed: ${error instanceof Error ? error.message : String(error)}`, { step: context.step, reactor: context.reactor, cause: error });
      return { type: 'xreactor.map.sourceFailed', at: clock.now(), throw: p.throw, error: serializeError(failure) };
    }
    const inputs = items.map((item, i) => this.#elementInput(step, held.inputs, p.from + i, item));
    return { type: 'xreactor.map.thrown', at: clock.now(), throw: p.throw, from: p.from, count: items.length, exhausted, total, inputs };
  }

  /** An element's input from the template and its item: element sources resolved, their transforms applied. */
  #elementInput(step: CompiledStep, stored: MapStoredInput, index: number, item: unknown): ElementSpawn {
    const args = step.map!.elementArgs;
    if (args === undefined) return { index, input: item };
    const input: Record<string, unknown> = {};
    for (const [key, source] of Object.entries(args)) {
      const spec = source.spec;
      if (spec.kind !== 'element') {
        input[key] = stored.template?.[key];
        continue;
      }
      let value: unknown = item;
      try {
        for (const segment of spec.path) {
          if (typeof value !== 'object' || value === null || !(segment in value)) {
            throw new Error(`"${segment}" is missing in ${value === null ? 'null' : typeof value}`);
          }
          value = (value as Record<string, unknown>)[segment];
        }
        for (const transform of spec.transforms) value = transform(value);
      } catch (error) {
        const where = spec.path.length > 0 ? `element("${spec.path.join('.')}")` : 'element()';
        const rejection = new XreactorError('element_input_invalid', `map "${step.name}" element ${index}: argument "${key}" from ${where} cannot be resolved: ${error instanceof Error ? error.message : String(error)}`, { step: step.name, cause: error });
        return { index, error: serializeError(rejection) };
      }
      input[key] = value;
    }
    return { index, input };
  }

  /** undoAll over the completed elements (not called when none completed). */
  async #undoAll(held: HeldMap, context: MapContext, call: Call): Promise<MapEvent> {
    const { store, clock } = this.#deps;
    const step = this.#stepOf(context);
    const map = step.map!;
    const stats = await store.readMapStats(held.id);
    if (map.undoAll === undefined || (stats?.completed ?? 0) === 0) return { type: 'xreactor.map.undoAllFinished', at: clock.now(), failure: null };
    const results = mapResultsOf(store, mapResultsRef(held.id, stats?.target ?? context.offset, map.element.returns ?? null), map.element);
    const inputs = await store.readInput(context.owner);
    const ctx = { executionId: context.owner as never, reactor: context.reactor, step: context.step, attempt: 1, signal: call.signal, inputs: inputs as Readonly<unknown> };
    const undoAll = map.undoAll;
    const failure = await performRollbackHandler(() => undoAll(completedElements(results), ctx), context.step, context.reactor);
    return { type: 'xreactor.map.undoAllFinished', at: clock.now(), failure };
  }
}

/** The kind host of element-rollback actors (in-call mode: the element is undone in the rollback actor's call). */
export class ElementRollbackHost implements ActorBehaviour<HeldRollback>, KindHost<HeldRollback> {
  readonly loop: ActorHost<HeldRollback>;
  readonly #deps: MapHostDeps;
  readonly #stepper = createKindStepper(createElementRollbackMachine(), undefined);

  constructor(deps: MapHostDeps) {
    this.#deps = deps;
    this.loop = new ActorHost(deps, this);
  }

  #persist(snapshot: Snap): PersistedSnapshot {
    return { kind: 'element-rollback', machineVersion: ELEMENT_ROLLBACK_MACHINE_VERSION, value: snapshot.value, context: snapshot.context };
  }

  /** A rollback actor's creation for its map's rollback throw commit (inline: with this process's lease). */
  creation(map: MapContext, actor: RollbackCreation): Spawned {
    const input: ElementRollbackInput = {
      id: actor.id,
      map: map.mapId,
      step: map.step,
      element: actor.element,
      position: actor.position,
      index: actor.index,
      throw: actor.throw,
      lastOfThrow: actor.lastOfThrow,
      mode: actor.mode,
      maxAttempts: this.#deps.lockSnoozeMaxAttempts,
      at: this.#deps.clock.now(),
    };
    const [snapshot, actions] = this.#stepper.initial(input);
    const plan = planOf(actor.id, actions);
    const lease = actor.mode === 'inline' ? this.#deps.lease(actor.id) : undefined;
    const held = newHeldActor<HeldRollback>(actor.id, snapshot, 1, plan.effects, {});
    held.lease = lease;
    const create: SpawnActor = {
      id: actor.id,
      reactor: map.reactor,
      input: null,
      kind: 'element-rollback',
      retainWithParent: false,
      // Fan-out: listed by its first own commit (an unstarted one is its map's to redispatch).
      ...(lease === undefined ? { listed: false } : { lease: lease.request }),
      commit: { snapshot: this.#persist(snapshot), status: elementRollbackStatusOf(snapshot.value), writes: writesOf(plan.map), outbox: plan.effects },
    };
    return { id: actor.id, held, create, lease, start: (call) => this.startSpawned(held, call) };
  }

  async startSpawned(held: HeldRollback, call: Call): Promise<void> {
    await this.loop.continueWith(held, await this.loop.performAll(held, held.outbox, call), call);
  }

  async load(id: string, loaded: LoadedExecution): Promise<HeldRollback | undefined> {
    return Promise.resolve(this.#held(id, loaded));
  }

  #held(id: string, loaded: LoadedExecution): HeldRollback {
    if (loaded.snapshot.kind !== 'element-rollback' || loaded.snapshot.machineVersion !== ELEMENT_ROLLBACK_MACHINE_VERSION) {
      throw new DeserializationError(`actor ${id} was stored as ${loaded.snapshot.kind} machine version ${loaded.snapshot.machineVersion}; this host runs element-rollback machine version ${ELEMENT_ROLLBACK_MACHINE_VERSION}`, { retryable: true });
    }
    const held = newHeldActor<HeldRollback>(id, this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context), loaded.revision, loaded.outbox, {});
    held.inbox = loaded.inbox;
    return held;
  }

  /**
   * A fan-out rollback actor from its start job (docs/design/map.md §19), not stored yet: held at
   * revision 0 in `resolving`, its first work the resolve its creation asks for; the commit of the
   * transition that resolve leads to creates it, fenced by its absence (`HeldActor.fromJob.create`).
   * Nothing is read from the store.
   * @throws DeserializationError when the payload is not one this build reads
   */
  fromStartJob(id: string, start: NonNullable<JobSpec['start']>): HeldRollback {
    if (start.payload === undefined) throw new DeserializationError(`the start job of rollback actor ${id} carries no start payload`);
    const payload = decodeRollbackStart(id, start.payload);
    const input: ElementRollbackInput = {
      id,
      map: start.map,
      step: payload.step,
      element: elementIdOf(start.map, payload.index),
      position: start.index,
      index: payload.index,
      throw: payload.throw,
      lastOfThrow: payload.lastOfThrow,
      mode: 'fanOut',
      maxAttempts: this.#deps.lockSnoozeMaxAttempts,
      at: this.#deps.clock.now(),
    };
    const [snapshot, actions] = this.#stepper.initial(input);
    const plan = planOf(id, actions);
    const held = newHeldActor<HeldRollback>(id, snapshot, 0, plan.effects, {});
    held.fromJob = { create: { reactor: payload.reactor, input: null, parent: start.map } };
    return held;
  }

  adopt(held: HeldRollback, loaded: LoadedExecution): void {
    held.snapshot = this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context);
    held.revision = loaded.revision;
    held.outbox = loaded.outbox;
  }

  tags(value: unknown): ReadonlySet<ActorTag> {
    return elementRollbackTagsOf(value);
  }

  persist(held: HeldRollback) {
    return { snapshot: this.#persist(held.snapshot), status: elementRollbackStatusOf(held.snapshot.value) };
  }

  /**
   * A rollback actor with no live lease: its inbox or a resolve to perform again → a job; parked
   * past its pause → the retry itself (its delayed job was lost); undoing an element that is gone →
   * the loss (it reports `context_unavailable`).
   */
  async sweep(_id: string, loaded: LoadedExecution, look: SweepLook): Promise<SweepVerdict> {
    if (loaded.inbox.entries.length > 0) return { action: 'job' };
    const tags = elementRollbackTagsOf(loaded.snapshot.value);
    if (tags.has('settled')) return { action: 'drop' };
    const context = loaded.snapshot.context as ElementRollbackContext;
    const now = this.#deps.clock.now();
    if (tags.has('parked')) {
      if (context.parkedUntil !== null && now < context.parkedUntil) return { action: 'keep' };
      return { action: 'deliver', event: { type: 'xreactor.rollback.retry', at: now, attempt: context.attempt } };
    }
    if (tags.has('recoverable')) return { action: 'job' };
    if (tags.has('awaiting')) {
      // Undoing its element: gone → the loss; held by a live process → it is being undone; else
      // (its process died, or it never took up the undo signalled to it) a job advances it here.
      const element = await look(context.element);
      if (element === 'not_here') return { action: 'keep' };
      if (element === undefined) return { action: 'deliver', event: { type: 'xreactor.child.lost', at: now, child: context.element } };
      return element.leased ? { action: 'keep' } : { action: 'job' };
    }
    return { action: 'keep' };
  }

  transition(held: HeldRollback, event: SignalEvent): Transition | undefined {
    const [next, actions] = this.#stepper.next(held.snapshot, event);
    if (next === held.snapshot) return undefined;
    const plan = planOf(held.id, actions);
    const finished = plan.effects.some((e) => e.type === 'xreactor.effect.finished');
    const commit: Commit = {
      snapshot: this.#persist(next),
      status: elementRollbackStatusOf(next.value),
      writes: writesOf(plan.map),
      outbox: plan.effects,
      ...(plan.signals.length === 0 ? {} : { signals: plan.signals }),
      ...(plan.awaits === undefined ? {} : { awaits: plan.awaits }),
    };
    const context = held.snapshot.context as ElementRollbackContext;
    // A fan-out rollback actor lists itself with the commit that creates it (one stored unlisted
    // by an earlier build's throw, with its first own commit). The element it signals is not
    // listed: while this actor awaits it, this actor's sweep advances it.
    const listed = context.mode === 'fanOut' && held.revision <= 1 && !finished ? [held.id] : [];
    const lease = commitLease(held, finished);
    const options: CommitOptions | undefined = !finished && !lease.fromJob ? undefined : { ...(finished ? { announce: true, unlist: true } : {}), ...lease.options };
    return {
      next,
      commit,
      options,
      effects: plan.effects,
      listed,
      refused: lease.refused,
      landed: () => {
        lease.landed();
        return undefined;
      },
    };
  }

  /** Computed at once, with nothing done that its refusal does not give back: sent ahead of its element's end. */
  transitionAhead(held: HeldRollback, event: SignalEvent): Transition | undefined {
    return this.transition(held, event);
  }

  perform(held: HeldRollback, effect: OutboxEffect, call: Call): Promise<SignalEvent | undefined> {
    return this.#perform(held, effect, call);
  }

  async #perform(held: HeldRollback, effect: OutboxEffect, call: Call): Promise<ElementRollbackEvent | undefined> {
    const { store, clock } = this.#deps;
    const context = held.snapshot.context as ElementRollbackContext;
    switch (effect.type) {
      case 'xreactor.effect.rollback.resolve': {
        const { element, attempt } = effect.params as { element: string; attempt: number };
        // The element with its lease, in one store call: held by a live process, it is in flight
        // (snooze); free, this call keeps it (lease and state) for the undo it signals next, which is
        // handed to it and applied without loading it again (`Call.leased`).
        // (A load that throws has given the lease back already.)
        const lease = this.#deps.lease(element);
        // With its undo stack's top entry: the undo it is signalled next reads nothing either.
        // Built from its start job and not created yet, it takes nothing if it exists after all (a
        // duplicate start): the job then reads it from the store, and the element's lease, which a
        // live rollback of it may need, is not taken for the round trip its refused creation took.
        const unlessExists = held.fromJob?.create === undefined ? undefined : held.id;
        const found = await this.#deps.loadLeased(lease, { undoTop: true, ...(unlessExists === undefined ? {} : { unlessExists }) });
        if (found === 'missing') return { type: 'xreactor.rollback.unavailable', at: clock.now(), attempt };
        if (found === 'busy') {
          // Held by a live process: one that ended failed, halted or cancelled needs nothing (read
          // without the lease); any other is in flight, and the rollback snoozes.
          const loaded = await store.load(element);
          if (loaded === undefined) return { type: 'xreactor.rollback.unavailable', at: clock.now(), attempt };
          if (needsNoUndo(loaded.snapshot.value)) return { type: 'xreactor.rollback.notNeeded', at: clock.now(), attempt };
          return { type: 'xreactor.rollback.contended', at: clock.now(), attempt, delayMs: this.#deps.lockSnoozeDelayMs };
        }
        if (needsNoUndo(found.held.snapshot.value)) {
          await lease.end();
          return { type: 'xreactor.rollback.notNeeded', at: clock.now(), attempt };
        }
        const { held: taken, loop } = found;
        await call.leased.get(element)?.held.lease?.end();
        call.leased.set(element, { held: taken, resume: (c) => loop.resume(taken as never, taken.outbox, c), loop });
        return { type: 'xreactor.rollback.undo', at: clock.now(), attempt };
      }
      case 'xreactor.effect.wait': {
        const { attempt, delayMs } = effect.params as { attempt: number; delayMs: number };
        if (call.place === 'worker') {
          // Parked on a delayed job: the worker is free meanwhile (a lost timer is redelivered by the sweep once past parkedUntil).
          const event: ElementRollbackEvent = { type: 'xreactor.rollback.retry', at: clock.now(), attempt };
          await queueOf(this.#deps, held.id).enqueue([{ id: jobId(held.id, 'timer', attempt), kind: 'advance', actor: { kind: 'element-rollback', id: held.id }, event, delayMs }]);
          return undefined;
        }
        await clock.sleep(delayMs, call.signal);
        return { type: 'xreactor.rollback.retry', at: clock.now(), attempt };
      }
      case 'xreactor.effect.awaitChild':
        await this.loop.advanceAwaited(held, context.element, call);
        return undefined;
      case 'xreactor.effect.finished':
        // The settling commit took it off the recovery index (a rollback actor never settles at its creation).
        return undefined;
      default:
        return undefined;
    }
  }
}

/** An element that ended failed (it rolled itself back), halted or cancelled: its rollback has nothing to undo. */
function needsNoUndo(value: unknown): boolean {
  const status = executionStatusOf(value);
  return status === 'failed' || status === 'halted' || status === 'cancelled';
}

export type { MapEvent };
