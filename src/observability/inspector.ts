import { toObserver } from 'xstate';
import type {
  ActorRefLike,
  AnyActorRef,
  ActorSystem,
  AnyEventObject,
  AnyStateMachine,
  InspectionEvent,
  Observer,
  Readable,
  Snapshot,
  Subscription,
} from 'xstate';

/**
 * What XState's `createActor(logic, { inspect })` takes: an observer of inspection events, or
 * a function called with each one. `createInspector(...).inspect` of `@statelyai/inspect` is one.
 */
export type InspectionObserver = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

/** An action of a transition as the inspector reports it (`@xstate.action`): its type and params. */
export interface InspectedAction {
  readonly type: string;
  readonly params?: unknown;
}

/** A live actor the host announces with {@link ActorInspector.actor}. */
export interface InspectedActor {
  /** The actor's id: an execution id (`order-1`), or a composed child's (`order-1.pay`). */
  readonly id: string;
  /** The actor's kind (`'execution'`, ...), as the store records it. */
  readonly kind: string;
  /** The id of the actor that created it (a composed child's parent), or `null` for a root. */
  readonly parentId: string | null;
  /** The machine the actor is an instance of: the inspector draws it from `machine.config`. */
  readonly machine: AnyStateMachine;
}

/**
 * The actor ref that inspection events carry for an actor the host advances. It is a stand-in
 * for the `Actor` XState would have made: it reads like one (ids, parent, logic, latest snapshot,
 * subscriptions) but it runs nothing; `send`, `start` and `stop` throw, since events go through
 * the runtime. The ref of an id stays the same object while the actor is live in this process.
 */
export interface InspectedActorRef extends AnyActorRef {
  /** The actor's id (as announced; not relative to its parent). */
  readonly id: string;
  /** `xr:<id>`: stable for an id, across processes and re-announcements. */
  readonly sessionId: string;
  /** The actor's kind, as announced. */
  readonly kind: string;
  /** The machine the actor is an instance of: `@statelyai/inspect` draws `logic.config`. */
  readonly logic: AnyStateMachine;
  /** The same machine, where XState's `Actor` keeps its logic. */
  readonly src: AnyStateMachine;
  /** The ref of the announced parent (resolved once the parent is live here), else `undefined`. */
  readonly _parent: InspectedActorRef | undefined;
}

/**
 * The inspection adapter the host drives. Every method is synchronous, never throws (an observer
 * that throws is reported to {@link ActorInspectorOptions.onError}), and ignores an id that is not
 * live (never announced, or already ended). Events are emitted in call order.
 */
export interface ActorInspector {
  /**
   * `false` for the adapter made without an observer, whose methods do nothing: the host checks
   * this one boolean before building anything it would report.
   */
  readonly enabled: boolean;
  /**
   * A live actor appears in this process (created, or loaded to be advanced). Emits, as XState's
   * `createActor(...).start()` does: `@xstate.actor`; `@xstate.event` of `{ type: 'xstate.init' }`
   * from the parent; one `@xstate.action` per `actions` (the entry actions of a new actor); and
   * `@xstate.snapshot` of `snapshot`. Announcing an id that is live is a no-op; one that ended is
   * announced again, with the same `sessionId`.
   */
  actor(actor: InspectedActor, snapshot: Snapshot<unknown>, actions?: readonly InspectedAction[]): void;
  /**
   * An event is delivered to actor `id`: `@xstate.event`. `sourceId` names the sending actor for
   * a signal between actors (a child's outcome to its parent, a parent's cancel to its child);
   * leave it out for an event from outside (a step's outcome, an operator's command, a timer).
   * A sender not live in this process is given as a detached `ActorRefLike` with its `id` and
   * `sessionId` and a `'stopped'` snapshot.
   */
  event(id: string, event: AnyEventObject, sourceId?: string): void;
  /**
   * A transition of actor `id` was committed: one `@xstate.action` per action, then
   * `@xstate.snapshot` of the new snapshot with the event that caused it. A snapshot whose status
   * is not `'active'` (`'done'`: a final state; `'error'`) ends the actor here, as in XState.
   */
  snapshot(id: string, snapshot: Snapshot<unknown>, event: AnyEventObject, actions?: readonly InspectedAction[]): void;
  /**
   * Actor `id` is no longer live in this process (settled, handed off, unloaded). If its latest
   * snapshot is still `'active'`, emits what XState emits when it stops an actor:
   * `@xstate.snapshot` of that snapshot with status `'stopped'` and event `{ type: 'xstate.stop' }`.
   * The ref's subscribers complete, and the id is forgotten.
   */
  stopped(id: string): void;
}

/** Options of {@link createActorInspector}. */
export interface ActorInspectorOptions {
  /** Called when an observer throws; the error never reaches the host. Default: ignored. */
  readonly onError?: (error: unknown, event: InspectionEvent) => void;
}

const INIT_EVENT: AnyEventObject = { type: 'xstate.init' };
const STOP_EVENT: AnyEventObject = { type: 'xstate.stop' };
const STOPPED: Snapshot<unknown> = { status: 'stopped', output: undefined, error: undefined };
const symbolObservable: symbol | '@@observable' = (typeof Symbol === 'function' && Symbol.observable) || '@@observable';

function readOnly(what: string): never {
  throw new TypeError(`xreactor: cannot ${what} an inspected actor; actors are advanced by the runtime`);
}

function noop(): void {
  return undefined;
}

const NO_SUBSCRIPTION: Subscription = { unsubscribe: noop };

const DISABLED: ActorInspector = Object.freeze({ enabled: false, actor: noop, event: noop, snapshot: noop, stopped: noop });

/** One adapter per observer, so a runtime and a worker given the same `inspect` share live actors. */
const shared = new WeakMap<object, ActorInspector>();

/** A live actor's state in the adapter. */
interface Live {
  readonly ref: InspectedActorRef;
  readonly rootId: string;
  readonly parentId: string | null;
  snapshot: Snapshot<unknown>;
  readonly subscribers: Set<Observer<Snapshot<unknown>>>;
}

/**
 * The XState inspection adapter for actors the host steps purely (`machine.transition`) and
 * persists, which XState's own `inspect` option never sees. The host reports each live actor,
 * event and committed snapshot; the adapter turns them into XState inspection events
 * (`@xstate.actor`, `@xstate.event`, `@xstate.action`, `@xstate.snapshot`) for `observer`, with
 * one stable synthetic {@link InspectedActorRef} per live actor id.
 *
 * Without an observer, returns a disabled adapter (`enabled: false`) whose methods do nothing.
 * Calls with the same observer object return the same adapter (the first call's options apply),
 * so an actor live in this process is announced once however many runtimes and workers report it.
 * No `@xstate.microstep` events are emitted.
 */
export function createActorInspector(observer: InspectionObserver | undefined, options: ActorInspectorOptions = {}): ActorInspector {
  if (observer === undefined) return DISABLED;
  const existing = shared.get(observer);
  if (existing !== undefined) return existing;
  const inspector = build(toObserver(observer), options);
  shared.set(observer, inspector);
  return inspector;
}

function build(first: Observer<InspectionEvent>, options: ActorInspectorOptions): ActorInspector {
  const observers = new Set<Observer<InspectionEvent>>([first]);
  const live = new Map<string, Live>();
  const onError = options.onError ?? noop;

  const emit = (event: InspectionEvent): void => {
    for (const o of observers) {
      try {
        o.next?.(event);
      } catch (error) {
        try {
          onError(error, event);
        } catch {
          // A reporter that throws is not the host's problem either.
        }
      }
    }
  };

  const system: ActorSystem<any> = {
    get: (id: PropertyKey) => (typeof id === 'string' ? live.get(id)?.ref : undefined),
    getAll: () => Object.fromEntries([...live].map(([id, entry]) => [id, entry.ref])),
    inspect: (more: InspectionObserver) => {
      const o = toObserver(more);
      observers.add(o);
      return { unsubscribe: () => void observers.delete(o) };
    },
    scheduler: { schedule: noop, cancel: noop, cancelAll: noop },
    getSnapshot: () => ({ _scheduledEvents: {} }),
    start: noop,
    _clock: { setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms), clearTimeout: (handle: ReturnType<typeof setTimeout>) => clearTimeout(handle) },
    _logger: noop,
  };

  const makeRef = (actor: InspectedActor, entry: () => Live): InspectedActorRef => {
    let parent: InspectedActorRef | undefined;
    const subscribe = (next?: Observer<Snapshot<unknown>> | ((s: Snapshot<unknown>) => void), error?: (e: unknown) => void, complete?: () => void): Subscription => {
      const current = entry();
      if (live.get(actor.id) !== current) {
        // Ended: like a stopped XState actor, complete at once.
        toObserver(next, error, complete).complete?.();
        return NO_SUBSCRIPTION;
      }
      const o = toObserver(next, error, complete);
      current.subscribers.add(o);
      return { unsubscribe: () => void current.subscribers.delete(o) };
    };
    const ref = {
      id: actor.id,
      sessionId: sessionIdOf(actor.id),
      kind: actor.kind,
      logic: actor.machine,
      src: actor.machine,
      get _parent(): InspectedActorRef | undefined {
        if (parent === undefined && actor.parentId !== null) parent = live.get(actor.parentId)?.ref;
        return parent;
      },
      system,
      getSnapshot: () => entry().snapshot,
      getPersistedSnapshot: () => actor.machine.getPersistedSnapshot(entry().snapshot as never),
      send: (): never => readOnly('send an event to'),
      start: (): never => readOnly('start'),
      stop: (): never => readOnly('stop'),
      subscribe,
      on: () => NO_SUBSCRIPTION,
      select: <T>(selector: (s: Snapshot<unknown>) => T, equal: (a: T, b: T) => boolean = Object.is): Readable<T> => ({
        get: () => selector(entry().snapshot),
        subscribe: (next?: Observer<T> | ((value: T) => void), error?: (e: unknown) => void, complete?: () => void) => {
          const o = toObserver(next, error, complete);
          let last = selector(entry().snapshot);
          return subscribe({
            next: (s) => {
              const value = selector(s);
              if (equal(last, value)) return;
              last = value;
              o.next?.(value);
            },
            error: (e: unknown) => o.error?.(e),
            complete: () => o.complete?.(),
          });
        },
      }),
      toJSON: () => ({ xstate$$type: 1, id: actor.id }),
      [symbolObservable]() {
        return this;
      },
    };
    return ref as unknown as InspectedActorRef;
  };

  const end = (id: string, entry: Live): void => {
    live.delete(id);
    for (const s of entry.subscribers) s.complete?.();
    entry.subscribers.clear();
  };

  const record = (id: string, entry: Live, snapshot: Snapshot<unknown>, event: AnyEventObject, actions: readonly InspectedAction[] | undefined): void => {
    if (actions !== undefined) {
      for (const a of actions) emit({ type: '@xstate.action', rootId: entry.rootId, actorRef: entry.ref, action: { type: a.type, params: a.params } });
    }
    entry.snapshot = snapshot;
    for (const s of entry.subscribers) s.next?.(snapshot);
    emit({ type: '@xstate.snapshot', rootId: entry.rootId, actorRef: entry.ref, event, snapshot });
    if (snapshot.status !== 'active') end(id, entry);
  };

  const sourceRef = (sourceId: string | undefined): ActorRefLike | undefined => {
    if (sourceId === undefined) return undefined;
    return live.get(sourceId)?.ref ?? detached(sourceId);
  };

  return {
    enabled: true,
    actor(actor, snapshot, actions) {
      if (live.has(actor.id)) return;
      const parentEntry = actor.parentId === null ? undefined : live.get(actor.parentId);
      // XState's rootId is the root actor's sessionId. Composed children are named `<root>.<step>...`
      // and root ids have no `.`, so an unannounced parent still names the root.
      const rootId = parentEntry?.rootId ?? sessionIdOf(actor.parentId === null ? actor.id : rootOf(actor.parentId));
      const ref = makeRef(actor, () => entry);
      const entry: Live = { ref, rootId, parentId: actor.parentId, snapshot, subscribers: new Set() };
      live.set(actor.id, entry);
      emit({ type: '@xstate.actor', rootId, actorRef: entry.ref });
      emit({ type: '@xstate.event', rootId, actorRef: entry.ref, sourceRef: entry.ref._parent, event: INIT_EVENT });
      record(actor.id, entry, snapshot, INIT_EVENT, actions);
    },
    event(id, event, sourceId) {
      const entry = live.get(id);
      if (entry === undefined) return;
      emit({ type: '@xstate.event', rootId: entry.rootId, actorRef: entry.ref, sourceRef: sourceRef(sourceId), event });
    },
    snapshot(id, snapshot, event, actions) {
      const entry = live.get(id);
      if (entry === undefined) return;
      record(id, entry, snapshot, event, actions);
    },
    stopped(id) {
      const entry = live.get(id);
      if (entry === undefined) return;
      if (entry.snapshot.status === 'active') {
        record(id, entry, { ...entry.snapshot, status: 'stopped', output: undefined, error: undefined }, STOP_EVENT, undefined);
      } else {
        end(id, entry);
      }
    },
  };
}

/** The inspection `sessionId` of actor `id`. */
function sessionIdOf(id: string): string {
  return `xr:${id}`;
}

function rootOf(id: string): string {
  const dot = id.indexOf('.');
  return dot === -1 ? id : id.slice(0, dot);
}

/** A sender that is not live in this process: only its ids are known. */
function detached(id: string): ActorRefLike & { readonly id: string } {
  return {
    id,
    sessionId: sessionIdOf(id),
    send: () => readOnly('send an event to'),
    getSnapshot: () => STOPPED,
  };
}
