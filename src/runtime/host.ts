import type { Logger } from 'pino';
import type { ExecutionMachine } from '../../machines/execution.js';
import { EXECUTION_MACHINE_READABLE, EXECUTION_MACHINE_VERSION, upgradeExecutionContext } from '../../machines/execution.js';
import type { ExecutionEffect, ExecutionEvent, ExecutionStatus, PauseRecord } from '../../machines/execution-types.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { DefinitionError, DeserializationError, InputValidationError, InterruptTimeoutError, MapGateClosedError, QueueRequiredError, WorkInterruptedError, XreactorError } from '../errors/index.js';
import { CORRELATION_TTL_MS, correlationKey, descendantId, interruptKey, rootIdOf } from './lineage.js';
import type { JobSpec, Queue } from '../queue/queue.js';
import { jobId } from '../queue/job-ids.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import type { Hooks } from '../observability/middleware.js';
import { decode, deserializeError, encode, serializeError } from '../serialization/index.js';
import type { Commit, CommitOptions, LoadedExecution, OutboxEffect, PersistedSnapshot, SignalEvent, SpawnActor, Store, UndoEntry } from '../store/store.js';
import { encodeSnapshot } from '../store/snapshot-codec.js';
import type { Clock } from '../internal/clock.js';
import type { Attempt, StepScope } from './step-performer.js';
import { performRollbackHandler, performStep, resolveArguments, stepContext } from './step-performer.js';
import { buildResult } from './results.js';
import { createMachineStepper } from './machine-stepper.js';
import type { HeldLease } from './lease.js';
import type { ExecutionSnapshot, MachineAction, MachineStepper } from './machine-stepper.js';
import type { ElementStart } from './element-start.js';
import type { ComposeDeps } from './compose.js';
import { runCompose, undoCompose } from './compose.js';
import { executionStatusOf, executionTagsOf } from '../../machines/execution.js';
import type { Call, Place } from './call.js';
import { newCall } from './call.js';
import { mergePlans, planCommit } from './commit-plan.js';
import type { CommitPlan } from './commit-plan.js';
import type { ActorInspector } from '../observability/inspector.js';
import { ActorHost, commitLease } from './actor-host.js';
import type { ActorBehaviour, HeldActor, KernelDeps, KindHost, SweepLook, SweepVerdict, Transition } from './actor-host.js';
import { sweepExecution } from './execution-sweep.js';
import type { MapHost } from './map-host.js';
import type { MapSpawnArgs } from './map.js';
import { compensateMap, runMap, undoMap } from './map.js';
import { isMapResultsRef, mapResultsOf } from './map-results.js';
import type { ElementMapLink } from '../../machines/map-types.js';
import type { ErrorData } from '../internal/error-data.js';
import type { UnitHost } from './unit-host.js';
import type { SpawnParams } from './commit-plan.js';
import { awaitUnit, dispatchUnit, readUnits } from './async-units.js';
import type { UnitWaitDeps } from './async-units.js';
import { isAsyncUnit } from '../definition/async-unit.js';
import type { ActorTag } from '../../machines/registry-types.js';

type Snapshot = ExecutionSnapshot;

/** Services a host uses. */
export interface HostDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly hooks: Hooks;
  readonly logger: Logger;
  /** Where hand-offs and worker-side timers go; required for background reactors. */
  readonly queue: Queue | undefined;
  /** The host of another reactor (a composed child's). */
  readonly hostFor: (definition: AnyReactorDefinition) => ExecutionHost;
  /** Where live actors are shown (XState inspection events); disabled when no observer was given. */
  readonly inspector: ActorInspector;
  /** A lease on an actor for this process, not taken yet. */
  readonly lease: (id: string) => HeldLease;
  /** Take an actor's lease and load it with the host of its kind, in one store call (see Engine.loadLeased). */
  readonly loadLeased: KernelDeps['loadLeased'];
  /** The host of map operations (for a map step's spawn). */
  readonly mapHost: () => MapHost;
  /** The host of async units (for an async step's dispatch). */
  readonly unitHost: () => UnitHost;
  /** How long a step run in a caller waits for an async unit it reads (`EngineOptions.asyncWaitTimeoutMs`). */
  readonly asyncWaitTimeoutMs: number;
  /** How long after its dispatch a step run in a worker waits for an async unit it reads (`EngineOptions.asyncParkTimeoutMs`). */
  readonly asyncParkTimeoutMs: number;
}

export type { Place } from './call.js';

/** An execution actor held by a host: the kernel's held actor, with its input and the results it read. */
export interface HeldExecution extends HeldActor {
  snapshot: Snapshot;
  readonly inputs: unknown;
  /**
   * Encoded results this host committed or read, so a step does not read back
   * what was just written (decoded afresh each time: a step can never alias
   * another step's stored result).
   */
  readonly results: Map<string, Uint8Array>;
  /** The hand-off job, sent alongside the commit that asked for it (awaited when the effect is performed). */
  handOffSent?: Promise<void> | undefined;
  /**
   * The undo stack's top entry, read with the lease (`Engine.loadLeased` with `undoTop`: a map's
   * element taken for its rollback). The first undo this process performs of the actor uses it
   * instead of reading the entry, when the positions match; then it is dropped. The lease keeps
   * it current: only this process's commits write the stack meanwhile, and a rollback pushes none.
   */
  undoTop?: { readonly position: number; readonly entry: UndoEntry } | undefined;
}

/** An actor held by this process, as loaded or created. */
function newHeld(id: string, snapshot: Snapshot, revision: number, inputs: unknown, outbox: readonly OutboxEffect[]): HeldExecution {
  return { id, snapshot, revision, inputs, outbox, inbox: { entries: [], seq: 0 }, declined: new Set(), inboxStale: false, results: new Map(), lease: undefined };
}

/** A child a commit spawns: its held form, creation, lease and how this call starts it (none for an async unit: its own job does). */
interface SpawnedChild {
  readonly held: HeldActor;
  readonly create: SpawnActor;
  readonly lease: HeldLease | undefined;
  readonly start: ((call: Call) => Promise<void>) | undefined;
}

/** Hand-off jobs carry the run's input up to this size (encoded); a larger input is read from the store. */
export const CARRIED_INPUT_MAX_BYTES = 16 * 1024;

/**
 * Whether a transition's effects take the run out of this process: its end, or a hand-off made by
 * a caller. A worker that reaches the hand-off (it redid the caller's part after the caller died
 * before its hand-off commit landed) carries on itself, under the lease it holds.
 */
function leavesProcess(effects: readonly ExecutionEffect[], place: Place): boolean {
  return effects.some((e) => e.type === 'xreactor.effect.finished' || (e.type === 'xreactor.effect.handOff' && place === 'caller'));
}

/** Whether a transition's effects settle the run (its waiters are told in the same commit). */
function settles(effects: readonly ExecutionEffect[]): boolean {
  return effects.some((e) => e.type === 'xreactor.effect.finished');
}

/**
 * The results a settling commit's notification carries with the state: a completed run's
 * returned step, none for any other end. A run that returns every step's result announces no
 * state (its waiter reads them all).
 */
function announcedResults(definition: AnyReactorDefinition, next: Snapshot): Pick<CommitOptions, 'announceResults'> {
  if (statusOf(next.value) !== 'completed') return { announceResults: [] };
  return definition.returns === undefined ? {} : { announceResults: [definition.returns] };
}

/** Whether a stored state is recoverable: with no live lease, the sweeper resumes it. */
function isRecoverable(value: unknown): boolean {
  return executionTagsOf(value).has('recoverable');
}

/** The status an execution snapshot is in. */
export const statusOf = executionStatusOf;

/** The stored form of a snapshot (machine version {@link EXECUTION_MACHINE_VERSION}). */
function persist(snapshot: Snapshot): PersistedSnapshot {
  return { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: snapshot.value, context: snapshot.context };
}

const waitersBySignal = new WeakMap<AbortSignal, Set<() => void>>();

/** The callbacks to run when `signal` fires, behind one listener on it. */
function abortWaiters(signal: AbortSignal): Set<() => void> {
  let waiting = waitersBySignal.get(signal);
  if (waiting === undefined) {
    const set = new Set<() => void>();
    waiting = set;
    waitersBySignal.set(signal, set);
    signal.addEventListener('abort', () => {
      for (const wake of [...set]) wake();
      set.clear();
    }, { once: true });
  }
  return waiting;
}

/**
 * The execution kind of actor for one reactor: its pure machine, how a transition becomes a commit
 * (writes, signals, spawned children, lease and announcement), and its performers (run a step,
 * wait, compensate, undo, pause, hand off, await a child). The kernel's loop ({@link ActorHost})
 * advances it, the same in every process.
 */
export class ExecutionHost implements ActorBehaviour<HeldExecution>, KindHost<HeldExecution> {
  /** The kernel loop advancing this reactor's executions. */
  readonly loop: ActorHost<HeldExecution>;
  readonly #definition: AnyReactorDefinition;
  readonly #machine: ExecutionMachine;
  readonly #stepper: MachineStepper;
  readonly #deps: HostDeps;
  readonly #byName: ReadonlyMap<string, CompiledStep>;
  /** Per plan index: the async unit steps the step reads (it waits for them to settle). */
  readonly #unitReads: readonly (readonly CompiledStep[])[];

  readonly #composeDeps: ComposeDeps;

  constructor(definition: AnyReactorDefinition, machine: ExecutionMachine, deps: HostDeps) {
    this.#definition = definition;
    this.#machine = machine;
    this.#stepper = createMachineStepper(machine);
    this.#deps = deps;
    this.#composeDeps = { store: deps.store, clock: deps.clock };
    this.#byName = new Map(definition.steps.map((s) => [s.name, s]));
    this.#unitReads = definition.plan.map((step) => step.reads.map((name) => this.#byName.get(name)!).filter(isAsyncUnit));
    this.loop = new ActorHost(deps, this);
  }

  /**
   * The first commit of a new execution actor and the actor as held after it: its input is
   * validated, and the creation and the input's verdict are one commit (one round trip fewer
   * per run), so `pending` is never stored.
   */
  async creation(
    id: string,
    rawInput: unknown,
    lineage: { readonly parentId: string | null; readonly path: readonly string[]; readonly async?: boolean },
    element?: { readonly map: ElementMapLink; readonly rejected?: ErrorData },
  ): Promise<{ readonly held: HeldExecution; readonly event: ExecutionEvent; readonly plan: CommitPlan; readonly create: SpawnActor }> {
    const { snapshot, actions, event, inputs } = await this.#decide(id, rawInput, lineage, element);
    const [decided, decisionActions] = this.#stepper.next(snapshot, event);
    const plan = mergePlans(planCommit(actions), planCommit(decisionActions));
    const held = newHeld(id, decided, 1, inputs, plan.effects);
    const create: SpawnActor = {
      id,
      reactor: this.#definition.name,
      input: inputs,
      commit: { snapshot: persist(decided), status: statusOf(decided.value), writes: plan.writes, outbox: plan.effects, signals: plan.signals },
    };
    return { held, event, plan, create };
  }

  /**
   * A fan-out element from its start job's payload (docs/design/map.md §19), not stored yet: held
   * at revision 0, the first event to drive with it, and its creation for its first commit
   * (`HeldActor.fromJob.create`), which creates it fenced by its absence. It is held `pending`:
   * an accepted input starts it (`element.start`, gated: a closed gate skips it, `element.skip`),
   * a rejected one fails it (`input.rejected`). Either way the element is created by the commit
   * of that one transition (one transition of the machine: `pending` takes a fan-out element's
   * start and skip as `queued` does, to the same snapshots).
   */
  async fromStart(id: string, start: ElementStart): Promise<{ readonly held: HeldExecution; readonly event: ExecutionEvent }> {
    const spawn = start.spawn;
    const lineage = { parentId: start.map.id, path: start.path };
    const { snapshot, actions, event, inputs } = await this.#decide(id, 'input' in spawn ? spawn.input : undefined, lineage, { map: start.map, ...('error' in spawn ? { rejected: spawn.error } : {}) });
    // The execution machine enters `pending` with no actions; a start commit would have nowhere to carry them.
    if (actions.length > 0) throw new XreactorError('element_start_unexpected', `element ${id}: the execution machine acts on entering its initial state (${actions.map((a) => a.type).join(', ')}), which an element's start commit does not carry; this build cannot start fan-out elements`);
    const held = newHeld(id, snapshot, 0, inputs, []);
    held.fromJob = { create: { reactor: this.#definition.name, input: inputs, parent: start.map.id } };
    // Its input accepted, the element starts from `pending` in one transition (gated by the
    // store: refused, `element.skip` applies to the same held snapshot).
    return { held, event: event.type === 'xreactor.input.accepted' ? { type: 'xreactor.element.start', at: event.at } : event };
  }

  /** A new actor's initial snapshot and actions, and the decision on its input (an element's rejected input fails it). */
  async #decide(
    id: string,
    rawInput: unknown,
    lineage: { readonly parentId: string | null; readonly path: readonly string[]; readonly async?: boolean },
    element: { readonly map: ElementMapLink; readonly rejected?: ErrorData } | undefined,
  ): Promise<{ readonly snapshot: Snapshot; readonly actions: MachineAction[]; readonly event: ExecutionEvent; readonly inputs: unknown }> {
    const { clock } = this.#deps;
    const reactor = this.#definition.name;
    const [snapshot, actions] = this.#stepper.initial({ executionId: id, reactor, at: clock.now(), ...lineage, ...(element === undefined ? {} : { map: element.map }) });
    if (element?.rejected !== undefined) {
      // A map element whose input could not be built from its item: it fails before its first step.
      return { snapshot, actions, event: { type: 'xreactor.input.rejected', at: clock.now(), error: element.rejected }, inputs: rawInput };
    }
    if (this.#definition.input === undefined) return { snapshot, actions, event: { type: 'xreactor.input.accepted', at: clock.now() }, inputs: rawInput };
    const checked = await validateWith(this.#definition.input, rawInput);
    if (checked.ok) return { snapshot, actions, event: { type: 'xreactor.input.accepted', at: clock.now() }, inputs: checked.value };
    const error = new InputValidationError(`reactor "${reactor}": input is invalid: ${describeIssues(checked.issues)}`, checked.issues, { reactor });
    return { snapshot, actions, event: { type: 'xreactor.input.rejected', at: clock.now(), error: serializeError(error) }, inputs: rawInput };
  }

  /**
   * Create a root execution actor, validate its input and drive it until it settles, waits, or
   * the signal fires.
   */
  async start(id: string, rawInput: unknown, signal: AbortSignal, place: Place = 'caller', lease?: HeldLease): Promise<HeldExecution> {
    const { store } = this.#deps;
    const { held, event, plan, create } = await this.creation(id, rawInput, { parentId: null, path: [] });
    const effects = plan.effects;
    // The lease is taken by the create itself, unless the run leaves this process at once.
    const takeLease = lease !== undefined && !leavesProcess(effects, place);
    held.lease = takeLease ? lease : undefined;
    // Listed for the sweeper with the create (in its atomic step where the store can).
    const created = store.create(create, { ...(takeLease ? { lease: lease.request } : {}), announce: settles(effects), list: true });
    if (place === 'caller') this.#sendHandOffEarly(held, effects, 1, create.commit.snapshot);
    held.revision = await created;
    if (takeLease) lease.taken();
    this.#inspect(held);
    if (event.type === 'xreactor.input.accepted') this.#deps.hooks.emit('reactorStart', { ...this.#base(held), input: held.inputs });
    await this.#afterCommit(held, event, effects);
    const call = newCall(signal, place);
    await this.loop.continueWith(held, await this.loop.performAll(held, effects, call), call);
    return held;
  }

  /** Load a stored execution into a held actor. */
  async load(id: string, already?: LoadedExecution, input?: { readonly value: unknown }): Promise<HeldExecution | undefined> {
    const loaded = already ?? (await this.#deps.store.load(id));
    if (loaded === undefined) return undefined;
    if (loaded.snapshot.kind !== 'execution' || !(EXECUTION_MACHINE_READABLE as readonly number[]).includes(loaded.snapshot.machineVersion)) {
      throw new DeserializationError(
        `actor ${id} was stored as ${loaded.snapshot.kind} machine version ${loaded.snapshot.machineVersion}; this build runs execution machine version ${EXECUTION_MACHINE_VERSION}`,
        { retryable: true },
      );
    }
    const snapshot = this.#machine.resolveState({ value: loaded.snapshot.value as never, context: upgradeExecutionContext(loaded.snapshot.context) });
    const inputs = input === undefined ? await this.#deps.store.readInput(id) : input.value;
    const held = newHeld(id, snapshot, loaded.revision, inputs, loaded.outbox);
    held.inbox = loaded.inbox;
    this.#inspect(held);
    return held;
  }

  /**
   * Feed `event` to the actor and keep going until it is idle: no effect produced another event
   * and its inbox holds nothing its state accepts. Returns whether the actor accepted `first` (a
   * stale or duplicate delivery is ignored without a commit, and nothing else is done).
   */
  drive(held: HeldExecution, first: ExecutionEvent, signal: AbortSignal, place: Place = 'caller', call: Call = newCall(signal, place)): Promise<boolean> {
    return this.loop.drive(held, first, call);
  }

  /**
   * Recover a loaded actor: apply its inbox first (a signal such as a cancel supersedes the pending
   * work), else perform its committed outbox again (after a crash or a lost job); then keep driving.
   */
  resume(held: HeldExecution, outbox: readonly OutboxEffect[], signal: AbortSignal, place: Place, call: Call = newCall(signal, place)): Promise<void> {
    return this.loop.resume(held, outbox, call);
  }

  adopt(held: HeldExecution, loaded: LoadedExecution): void {
    held.snapshot = this.#machine.resolveState({ value: loaded.snapshot.value as never, context: upgradeExecutionContext(loaded.snapshot.context) });
    held.revision = loaded.revision;
    held.outbox = loaded.outbox;
  }

  tags(value: unknown): ReadonlySet<ActorTag> {
    return executionTagsOf(value);
  }

  sweep(id: string, loaded: LoadedExecution, look: SweepLook): Promise<SweepVerdict> {
    return sweepExecution(id, loaded, look, this.#deps.clock.now());
  }

  persist(held: HeldExecution): { readonly snapshot: PersistedSnapshot; readonly status: ExecutionStatus } {
    return { snapshot: persist(held.snapshot), status: statusOf(held.snapshot.value) };
  }

  /**
   * The commit `event` leads to: the next snapshot with its writes and outbox, the signals it
   * sends, the children it spawns (each with its own lease), the lease it releases (the run leaves
   * this process) or takes (the first commit of a run built from a hand-off job's snapshot), and
   * the settle announcement.
   */
  transition(held: HeldExecution, input: SignalEvent, call: Call): Transition | undefined | Promise<Transition | undefined> {
    return this.#transition(held, input, call, false);
  }

  /**
   * The transition when it spawns nothing (a spawn builds its children first) and does not hand
   * the run off from the caller (whose job goes out as its commit is sent): sent ahead of the
   * signal carrying `input`.
   */
  transitionAhead(held: HeldExecution, input: SignalEvent, call: Call): Transition | undefined {
    const transition = this.#transition(held, input, call, true);
    if (transition === undefined || transition instanceof Promise) return undefined;
    return call.place === 'caller' && transition.effects.some((e) => e.type === 'xreactor.effect.handOff') ? undefined : transition;
  }

  #transition(held: HeldExecution, input: SignalEvent, call: Call, ahead: boolean): Transition | undefined | Promise<Transition | undefined> {
    const event = input as unknown as ExecutionEvent;
    const place = call.place;
    if (event.type === 'xreactor.execution.abort' && place === 'worker') {
      if (ahead) return undefined;
      throw new WorkInterruptedError(held.id, event.reason);
    }
    const [next, actions] = this.#stepper.next(held.snapshot, event);
    // XState returns the very same snapshot when no transition applies (stale or duplicate delivery).
    if (next === held.snapshot) return undefined;
    const plan = planCommit(actions);
    if (plan.spawns.length === 0) return this.#transitionOf(held, event, next, actions, plan, [], call);
    if (ahead) return undefined;
    return Promise.all(plan.spawns.map((s) => this.#spawnOf(held, s, place))).then((spawned) => this.#transitionOf(held, event, next, actions, plan, spawned, call));
  }

  #spawnOf(held: HeldExecution, s: SpawnParams, place: Place): Promise<SpawnedChild> {
    if (s.kind === 'map') return this.#spawnMap(held, s.step, s.child, s.input as MapSpawnArgs, place);
    if (s.kind === 'unit') return Promise.resolve(this.#spawnUnit(held, s.step, s.child, s.input));
    if (s.async === true) return this.#spawnAsyncChild(held, s.step, s.child, s.input);
    return this.#spawn(held, s.step, s.child, s.input);
  }

  #transitionOf(
    held: HeldExecution,
    event: ExecutionEvent,
    next: Snapshot,
    actions: readonly { type: string; params?: unknown }[],
    plan: CommitPlan,
    spawned: readonly SpawnedChild[],
    call: Call,
  ): Transition {
    const place = call.place;
    const { writes, effects } = plan;
    // A late async unit settle consumed with nothing to do: the stored outbox (the work pending
    // before it) is carried forward, not replaced by none.
    const keepsOutbox = event.type === 'xreactor.unit.settled' && effects.length === 0;
    const commit: Commit = {
      snapshot: persist(next),
      status: statusOf(next.value),
      writes,
      outbox: keepsOutbox ? held.outbox : effects,
      ...(plan.signals.length === 0 ? {} : { signals: plan.signals }),
      ...(plan.awaits === undefined ? {} : { awaits: plan.awaits }),
      ...(spawned.length === 0 ? {} : { spawn: spawned.map((s) => s.create) }),
    };
    const lease = commitLease(held, leavesProcess(effects, place));
    const announce = settles(effects);
    const options: CommitOptions | undefined =
      lease.options.takeLease === undefined && lease.options.releaseLease === undefined && !announce
        ? undefined
        : {
            ...lease.options,
            // Carried from its creating commit (a fan-out element's start, a run handed off at its
            // start), which gave every key its retention: the first commit here need not again.
            ...(lease.fromJob && held.revision === 1 ? { stampedAt: held.snapshot.context.origin.createdAt } : {}),
            announce,
            // A completed run's notification carries its returned result, so its waiters read nothing.
            ...(announce ? announcedResults(this.#definition, next) : {}),
            // A settle leaves the recovery index with the commit.
            ...(announce ? { unlist: true } : {}),
          };
    return {
      next,
      commit,
      options,
      effects,
      ...(keepsOutbox ? { keepsOutbox } : {}),
      // An actor becoming recoverable again (continued after a pause, undone after its end) and a
      // signal's recipient are listed for the sweeper (a spawned child is listed by the store).
      // (A conditional signal goes to a map, and an undone element's settle to its rollback actor:
      // both are listed from their creation or first commit until they settle.)
      listed: [
        ...(!isRecoverable(held.snapshot.value) && isRecoverable(next.value) ? [held.id] : []),
        ...plan.signals.filter((s) => s.condition === undefined && s.to !== next.context.ending.undoBy).map((s) => s.to),
      ],
      sent: (revision) => {
        if (place === 'caller') this.#sendHandOffEarly(held, effects, revision, commit.snapshot);
      },
      refused: lease.refused,
      instead: (error) =>
        error instanceof MapGateClosedError && event.type === 'xreactor.element.start'
          ? { type: 'xreactor.element.skip', at: this.#deps.clock.now(), reason: `skipped: its map no longer dispatches (${error.why})` }
          : undefined,
      landed: (landedIn, previous) => {
        lease.landed();
        this.#emitWaiting(held, previous as Snapshot, effects);
        const { inspector } = this.#deps;
        if (inspector.enabled) {
          // A signal names its sender: a child's report (`child`), a parent's undo (`from`).
          inspector.event(held.id, event, (event as { child?: string }).child ?? (event as { from?: string }).from);
          inspector.snapshot(held.id, next, event, actions);
          if (announce) inspector.stopped(held.id);
        }
        for (const [step, value] of writes.results) held.results.set(step, encode(value));
        for (const child of spawned) {
          child.lease?.taken();
          // An async unit is not advanced in this call: its own job (the dispatch effect's) does.
          if (child.start !== undefined) landedIn.spawned.set(child.held.id, { held: child.held, start: child.start });
        }
        return this.#afterCommit(held, event, effects);
      },
    };
  }

  /** Build a map step's map operation for its owner's commit (it takes its own lease with it). */
  async #spawnMap(owner: HeldExecution, step: string, child: string, input: MapSpawnArgs, place: Place): Promise<SpawnedChild> {
    const compiled = this.#byName.get(step);
    if (compiled?.map === undefined) throw new DefinitionError(`step "${step}" of reactor "${this.#definition.name}" is not a map step`);
    const spawned = await this.#deps.mapHost().creation(owner, this.#definition, compiled, child, input, place);
    return { held: spawned.held, create: spawned.create, lease: spawned.lease, start: spawned.start };
  }

  /** Build a composed child's creation for its parent's commit (the child takes its own lease with it). */
  async #spawn(parent: HeldExecution, step: string, child: string, input: unknown): Promise<SpawnedChild> {
    const definition = this.#byName.get(step)?.child;
    if (definition === undefined) throw new DefinitionError(`step "${step}" of reactor "${this.#definition.name}" is not a compose step`);
    const host = this.#deps.hostFor(definition);
    const { held, create, plan } = await host.creation(child, input, { parentId: parent.id, path: [...parent.snapshot.context.origin.path, step] });
    const lease = leavesProcess(plan.effects, 'worker') ? undefined : this.#deps.lease(child);
    held.lease = lease;
    return { held, create: { ...create, ...(lease === undefined ? {} : { lease: lease.request }) }, lease, start: (startIn) => host.startSpawned(held, startIn) };
  }

  /** Build an async step's unit for its owner's dispatch commit (queued: no lease, its job takes it up). */
  #spawnUnit(owner: HeldExecution, step: string, child: string, input: unknown): SpawnedChild {
    const compiled = this.#byName.get(step);
    if (compiled?.kind !== 'asyncStep') throw new DefinitionError(`step "${step}" of reactor "${this.#definition.name}" is not an async step`);
    const { held, create } = this.#deps.unitHost().creation({ id: owner.id, path: owner.snapshot.context.origin.path }, this.#definition, compiled, child, input);
    return { held, create, lease: undefined, start: undefined };
  }

  /** Build an async reactor's child execution for its parent's dispatch commit (independent: no lease, its job advances it). */
  async #spawnAsyncChild(parent: HeldExecution, step: string, child: string, input: unknown): Promise<SpawnedChild> {
    const definition = this.#byName.get(step)?.child;
    if (definition === undefined) throw new DefinitionError(`step "${step}" of reactor "${this.#definition.name}" is not an async reactor step`);
    const host = this.#deps.hostFor(definition);
    const { held, create } = await host.creation(child, input, { parentId: parent.id, path: [...parent.snapshot.context.origin.path, step], async: true });
    return { held, create, lease: undefined, start: undefined };
  }

  /** What the async-unit waits of this reactor's executions need (see async-units.ts). */
  #unitWaits(held: HeldExecution): UnitWaitDeps {
    const { store, clock, asyncWaitTimeoutMs, asyncParkTimeoutMs } = this.#deps;
    return {
      store,
      clock,
      reactor: this.#definition.name,
      asyncWaitTimeoutMs,
      asyncParkTimeoutMs,
      readResults: (steps) => this.#readResults(held, steps),
      enqueueTimeout: (id, event, delayMs) => this.#enqueue(held, id, event, delayMs),
      abortEvent: (signal) => this.#abortEvent(signal),
    };
  }

  /** Drive a child this call spawned, from its creating commit. */
  async startSpawned(held: HeldExecution, call: Call): Promise<void> {
    this.#inspect(held);
    const accepted = held.snapshot.context.ending.inputError === null;
    if (accepted) this.#deps.hooks.emit('reactorStart', { ...this.#base(held), input: held.inputs });
    await this.#afterCommit(held, { type: accepted ? 'xreactor.input.accepted' : 'xreactor.input.rejected', at: this.#deps.clock.now() } as ExecutionEvent, held.outbox as ExecutionEffect[]);
    await this.loop.continueWith(held, await this.loop.performAll(held, held.outbox, call), call);
  }

  async #enqueue(held: HeldExecution, id: string, event: ExecutionEvent, delayMs?: number, executionId = held.id, handoff?: JobSpec['handoff'], dedupeKey?: string): Promise<void> {
    const queue = this.#deps.queue;
    if (queue === undefined) throw new QueueRequiredError(this.#definition.name);
    this.#deps.hooks.emit('beforeEnqueue', { ...this.#base(held), job: id });
    await queue.enqueue([
      {
        id,
        kind: 'advance',
        actor: { kind: 'execution', id: executionId },
        event,
        ...(delayMs === undefined ? {} : { delayMs }),
        ...(handoff === undefined ? {} : { handoff }),
        ...(dedupeKey === undefined ? {} : { dedupeKey }),
      },
    ]);
  }

  #sendHandOff(held: HeldExecution, carried?: JobSpec['handoff']): Promise<void> {
    return this.#enqueue(held, jobId(held.id, 'handoff'), { type: 'xreactor.execution.resume', at: this.#deps.clock.now() }, undefined, held.id, carried);
  }

  /**
   * A hand-off's job is sent together with the commit that asks for it (right after it is issued;
   * a commit behind a group commit call in flight may reach Redis a round trip after the job),
   * without waiting for that commit to land: the job only wakes a worker, which finds the run as
   * the store has it (and waits a moment when the run is not there yet or still leased). This
   * takes the commit's round trip off the hand-off. If the commit is refused, the job wakes a worker
   * for nothing: its resume event is not accepted in any other state, and the job id is the one
   * the run's own hand-off uses.
   */
  #sendHandOffEarly(held: HeldExecution, effects: readonly ExecutionEffect[], revision: number, snapshot: PersistedSnapshot): void {
    if (!effects.some((e) => e.type === 'xreactor.effect.handOff')) return;
    // The job carries the state it is sent for (see JobSpec.handoff), unless the input is large.
    const input = encode(held.inputs);
    const carried = input.byteLength <= CARRIED_INPUT_MAX_BYTES ? { revision, snapshot: Uint8Array.from(encodeSnapshot(snapshot)), input: Uint8Array.from(input) } : undefined;
    const sent = this.#sendHandOff(held, carried);
    // Observed when the effect is performed; a refused commit leaves it unobserved.
    sent.catch(() => undefined);
    held.handOffSent = sent;
  }

  /** The results of `steps`, from what this host committed, else from the store (then remembered). */
  async #readResults(held: HeldExecution, steps: readonly string[]): Promise<Map<string, unknown>> {
    const out = new Map<string, unknown>();
    const missing = steps.filter((step) => !held.results.has(step));
    if (missing.length > 0) {
      for (const [step, value] of await this.#deps.store.readResults(held.id, missing)) held.results.set(step, encode(value));
    }
    for (const step of steps) {
      const bytes = held.results.get(step);
      if (bytes === undefined) continue;
      const value = decode(bytes);
      // A map step's results: a reader over the map's stored outcomes.
      out.set(step, isMapResultsRef(value) ? mapResultsOf(this.#deps.store, value, this.#byName.get(step)?.map?.element) : value);
    }
    return out;
  }

  /** Reads results of a held execution: what this host committed or read already, else from the store. */
  resultsOf(held: HeldExecution): Pick<Store, 'readResults'> {
    return {
      readResults: (id, steps) => (id === held.id && steps !== undefined ? this.#readResults(held, steps) : this.#deps.store.readResults(id, steps)),
    };
  }

  /** Fields every hook event of this execution carries. */
  #base(held: HeldExecution) {
    return { reactor: this.#definition.name, executionId: held.id, path: held.snapshot.context.origin.path };
  }

  /** Fields of a step's hook events. */
  #hook(held: HeldExecution, step: string) {
    return { ...this.#base(held), step, kind: this.#byName.get(step)?.kind ?? ('step' as const) };
  }

  #scope(held: HeldExecution, signal: AbortSignal): StepScope {
    return { executionId: held.id, reactor: this.#definition.name, inputs: held.inputs, signal };
  }

  #abortEvent(signal: AbortSignal): ExecutionEvent {
    const reason: unknown = signal.reason;
    const text = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted';
    return { type: 'xreactor.execution.abort', at: this.#deps.clock.now(), reason: text };
  }

  /** Resolve with the operation's value, or with the abort event when the signal fires first. */
  #unlessAborted<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T | { aborted: ExecutionEvent }> {
    if (signal.aborted) return Promise.resolve({ aborted: this.#abortEvent(signal) });
    // One listener per signal for every operation raced against it (adding and removing an
    // AbortSignal listener per step costs more than the rest of this race).
    const waiting = abortWaiters(signal);
    return new Promise((resolve, reject) => {
      const onAbort = () => resolve({ aborted: this.#abortEvent(signal) });
      waiting.add(onAbort);
      // `work` is an async function: it reports failures as rejections, never by throwing.
      work()
        .finally(() => waiting.delete(onAbort))
        .then(resolve, reject);
    });
  }

  perform(held: HeldExecution, outboxEffect: OutboxEffect, call: Call): Promise<SignalEvent | undefined> {
    return this.#perform(held, outboxEffect as ExecutionEffect, call);
  }

  async #perform(held: HeldExecution, effect: ExecutionEffect, call: Call): Promise<ExecutionEvent | undefined> {
    const { hooks, clock, store } = this.#deps;
    const { signal, place } = call;
    const reactor = this.#definition.name;
    const executionId = held.id;
    const scope = this.#scope(held, signal);
    const settle = (out: ExecutionEvent | { aborted: ExecutionEvent }): ExecutionEvent => ('aborted' in out ? out.aborted : out);
    switch (effect.type) {
      case 'xreactor.effect.runStep': {
        const step = this.#definition.plan[effect.params.index]!;
        const attempt = effect.params.attempt;
        let loadResults = () => this.#readResults(held, step.reads);
        const units = this.#unitReads[step.index]!;
        if (units.length > 0) {
          // It reads async units: once they all settled it receives their outcomes; else it waits.
          const read = await readUnits(this.#unitWaits(held), step, attempt, units);
          if ('event' in read) return read.event;
          loadResults = async () => {
            const results = await this.#readResults(held, step.reads);
            for (const [name, outcome] of read.outcomes) results.set(name, outcome);
            return results;
          };
        }
        if (isAsyncUnit(step)) return dispatchUnit(step, attempt, held.inputs, await loadResults(), reactor, () => clock.now());
        const progress: Attempt = {
          args: undefined,
          started: false,
          onStart: hooks.has('stepStart') ? (args) => hooks.emit('stepStart', { ...this.#hook(held, step.name), attempt, args }) : undefined,
        };
        const event =
          step.kind === 'map'
            ? await runMap(this.#composeDeps, held, step, attempt, loadResults, progress.onStart ?? (() => undefined), scope)
            : step.kind === 'compose'
            ? await runCompose(this.#composeDeps, held, step, attempt, loadResults, progress.onStart ?? (() => undefined))
            : settle(await this.#unlessAborted(signal, () => performStep(step, attempt, scope, loadResults, () => clock.now(), progress)));
        this.#emitStepOutcome(held, step, event);
        return event;
      }
      case 'xreactor.effect.paused':
        return this.#paused(held, effect.params);
      case 'xreactor.effect.wake':
        // Performed by the kernel loop (it knows which actors this call advances).
        return undefined;
      case 'xreactor.effect.awaitChild':
        // The child advanced here when nothing else does (one this call spawned, or whose lease is
        // free); its settle or pause signal reaches this actor in the call. One another process
        // advances signals when it is done.
        await this.loop.advanceAwaited(held, effect.params.child, call);
        return undefined;
      case 'xreactor.effect.dispatchUnit': {
        // The unit exists from the commit that asked for this: its own job takes it up (seed 001 §2.5).
        const { unit, kind } = effect.params;
        const queue = this.#deps.queue;
        if (queue === undefined) throw new QueueRequiredError(reactor);
        hooks.emit('beforeEnqueue', { ...this.#base(held), job: jobId(unit, 'dispatch') });
        await queue.enqueue([{ id: jobId(unit, 'dispatch'), kind: 'advance', actor: { kind, id: unit } }]);
        return undefined;
      }
      case 'xreactor.effect.awaitUnit':
        return awaitUnit(this.#unitWaits(held), held, this.#definition.plan[effect.params.index]!, this.#unitReads[effect.params.index] ?? [], effect.params, call);
      case 'xreactor.effect.element.gate':
        // A queued fan-out element's start job: it runs only while its map dispatches (an atomic
        // failure, a halt or a cancel stops it; elements already running finish). The start's
        // commit is gated in the store (one round trip): refused, the element skips itself.
        return { type: 'xreactor.element.start', at: clock.now() };
      case 'xreactor.effect.handOff': {
        // A worker never hands a run to itself through the queue (its own job id would swallow the
        // job): it goes on with the run at once.
        if (place === 'worker') return { type: 'xreactor.execution.resume', at: clock.now() };
        const sent = held.handOffSent;
        held.handOffSent = undefined;
        await (sent ?? this.#sendHandOff(held));
        return undefined;
      }
      case 'xreactor.effect.wait': {
        const { step, attempt, delayMs, error } = effect.params;
        hooks.emit('retryAttempt', { ...this.#hook(held, step), attempt, args: undefined, error: deserializeError(error), delayMs, nextAttempt: attempt + 1 });
        if (held.snapshot.context.handedOff || place === 'worker') {
          // In a worker, a retry backoff is a delayed job (the actor is parked): the worker is free in between.
          const fired: ExecutionEvent = { type: 'xreactor.timer.fired', at: clock.now(), index: effect.params.index, attempt };
          await this.#enqueue(held, jobId(executionId, 'timer', effect.params.index, attempt), fired, delayMs);
          return undefined;
        }
        const out = await this.#unlessAborted(signal, async () => {
          await clock.sleep(delayMs, signal);
          return { type: 'xreactor.timer.fired', at: clock.now(), index: effect.params.index, attempt } satisfies ExecutionEvent;
        }).catch(() => ({ aborted: this.#abortEvent(signal) }));
        return settle(out);
      }
      case 'xreactor.effect.compensate': {
        const { step: name, error, args, epoch } = effect.params;
        const step = this.#byName.get(name)!;
        if (step.kind === 'map') {
          // The map rolls its elements back; its compensation collects their rollback failures once it is undone.
          const event = await compensateMap(this.#composeDeps, held, name, epoch);
          if (event.type === 'xreactor.compensate.child') hooks.emit('compensateStart', { ...this.#hook(held, name), attempt: 1, args, error: deserializeError(error) });
          else hooks.emit('compensateComplete', { ...this.#hook(held, name), attempt: 1, args });
          return event;
        }
        const handler = step.compensate;
        const cause = deserializeError(error);
        hooks.emit('compensateStart', { ...this.#hook(held, name), attempt: 1, args, error: cause });
        const out = await this.#unlessAborted(signal, async () => {
          const failure = await performRollbackHandler(handler && (() => handler(cause, args, stepContext(scope, name, 1))), name, reactor);
          return { type: 'xreactor.compensate.finished', at: clock.now(), epoch, failure } satisfies ExecutionEvent;
        });
        const event = settle(out);
        if (event.type === 'xreactor.compensate.finished') {
          if (event.failure === null) hooks.emit('compensateComplete', { ...this.#hook(held, name), attempt: 1, args });
          else hooks.emit('compensateFail', { ...this.#hook(held, name), attempt: 1, args, error: deserializeError(event.failure.error) });
        }
        return event;
      }
      case 'xreactor.effect.undo': {
        const { position, epoch } = effect.params;
        const prefetched = held.undoTop;
        held.undoTop = undefined;
        const entry = prefetched?.position === position ? prefetched.entry : await store.readUndoEntry(executionId, position);
        if (entry === undefined) throw new DeserializationError(`execution ${executionId}: undo-stack entry ${position} is missing from the store`);
        const step = this.#byName.get(entry.step);
        if (step?.kind === 'map') {
          const event = await undoMap(this.#composeDeps, held, entry, position, epoch);
          if (event.type === 'xreactor.undo.child') hooks.emit('undoStart', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args, result: entry.result });
          if (event.type === 'xreactor.undo.finished') hooks.emit('undoComplete', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args });
          return event;
        }
        if (step?.kind === 'compose') {
          const composed = await undoCompose(this.#composeDeps, held, step, entry, position, epoch);
          if (composed.type !== 'xreactor.undo.child') hooks.emit('undoStart', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args, result: entry.result });
          if (composed.type === 'xreactor.undo.finished') hooks.emit('undoComplete', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args });
          return composed;
        }
        const handler = step?.undo;
        hooks.emit('undoStart', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args, result: entry.result });
        const out = await this.#unlessAborted(signal, async () => {
          const failure = await performRollbackHandler(handler && (() => handler(entry.result, entry.args, stepContext(scope, entry.step, 1))), entry.step, reactor);
          return { type: 'xreactor.undo.finished', at: clock.now(), epoch, position, step: entry.step, failure } satisfies ExecutionEvent;
        });
        const event = settle(out);
        if (event.type === 'xreactor.undo.finished') {
          if (event.failure === null) hooks.emit('undoComplete', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args });
          else hooks.emit('undoFail', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args, error: deserializeError(event.failure.error) });
        }
        return event;
      }
      case 'xreactor.effect.finished':
        // Its waiters were told by the commit that finished it, which also took it off the
        // recovery index; an execution settled by its creating commit leaves it here. Not waited
        // for: a settled execution still listed is dropped by the next sweep.
        if (held.revision > 1) return undefined;
        store.markActive(executionId, false).catch((error: unknown) => {
          this.#deps.logger.warn({ event: 'xreactor.index.remove_failed', executionId, err: error }, 'could not remove a settled execution from the recovery index');
        });
        return undefined;
    }
  }

  /**
   * Where an operator continues interrupt `name` of this execution: its tree's root and the path
   * below it. An async reactor's child (this one, or the nearest such ancestor) is a tree of its
   * own for operators: its owner never pauses for it.
   */
  async #operatorAddress(held: HeldExecution, name: string): Promise<{ readonly root: string; readonly path: readonly string[] }> {
    const { origin } = held.snapshot.context;
    if (origin.async === true) return { root: held.id, path: [name] };
    const root = rootIdOf(held.id, origin.path);
    // Ancestors below the root, nearest first: a composed child of an async reactor's child.
    for (let depth = origin.path.length - 1; depth >= 1; depth -= 1) {
      const ancestor = await this.#deps.store.load(descendantId(root, origin.path.slice(0, depth)));
      const ancestorOrigin = (ancestor?.snapshot.context as { origin?: { async?: boolean } } | undefined)?.origin;
      if (ancestorOrigin?.async === true) return { root: descendantId(root, origin.path.slice(0, depth)), path: [...origin.path.slice(depth), name] };
    }
    return { root, path: [...origin.path, name] };
  }

  /**
   * A run paused: claim the correlation ids of its ready interrupts, schedule
   * active timeouts, and wake whoever awaits the run.
   */
  async #paused(held: HeldExecution, pause: PauseRecord): Promise<ExecutionEvent | undefined> {
    const { store, clock } = this.#deps;
    const reactor = this.#definition.name;
    for (const { step: name, timeoutAt } of pause.ready) {
      const step = this.#byName.get(name)!;
      const interrupt = step.interrupt!;
      if (interrupt.correlationId !== undefined) {
        const results = await store.readResults(held.id, step.reads);
        const { id: correlationId } = (await resolveArguments({ ...step, args: interrupt.correlationId, contract: undefined }, held.inputs, results, reactor)) as { id: string };
        const target = JSON.stringify(await this.#operatorAddress(held, name));
        const owner = await store.claim(correlationKey(correlationId), target, CORRELATION_TTL_MS);
        if (owner !== target) {
          const error = new DefinitionError(`interrupt "${name}": correlation id "${correlationId}" is already used by another run (${owner}); correlation ids must be unique`, { step: name, reactor });
          return { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error) };
        }
      }
      if (interrupt.timeout?.strategy === 'active' && timeoutAt !== null) {
        // Delivered through this execution's inbox under the interrupt's key: a continue racing the
        // timeout is decided where they land, first writer wins.
        const error = new InterruptTimeoutError(held.id, name, interrupt.timeout.ms);
        const fail: ExecutionEvent = { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error) };
        await this.#enqueue(held, jobId(held.id, 'timeout', name), fail, Math.max(0, timeoutAt - clock.now()), held.id, undefined, interruptKey(name));
      }
    }
    await store.publishSettled(held.id);
    return undefined;
  }

  /** Show a live actor to the inspector (once per id while it lives). */
  #inspect(held: HeldExecution): void {
    const { inspector } = this.#deps;
    if (!inspector.enabled) return;
    inspector.actor({ id: held.id, kind: 'execution', parentId: held.snapshot.context.origin.parentId, machine: this.#machine }, held.snapshot);
  }

  /** Hooks of entering an `awaiting` or `parked` state. */
  #emitWaiting(held: HeldExecution, next: Snapshot, effects: readonly ExecutionEffect[]): void {
    const { hooks } = this.#deps;
    const before = executionTagsOf(held.snapshot.value);
    const after = executionTagsOf(next.value);
    const awaiting = next.context.awaiting;
    if (after.has('awaiting') && !before.has('awaiting') && awaiting !== null) hooks.emit('awaiting', { ...this.#base(held), step: awaiting.step, actors: [awaiting.child] });
    const wait = effects.find((e) => e.type === 'xreactor.effect.wait');
    if (after.has('parked') && wait !== undefined) hooks.emit('parked', { ...this.#base(held), step: wait.params.step, attempt: wait.params.attempt, delayMs: wait.params.delayMs });
  }

  #emitStepOutcome(held: HeldExecution, step: CompiledStep, event: ExecutionEvent): void {
    const { hooks } = this.#deps;
    if (!hooks.has('stepComplete')) return;
    const base = this.#hook(held, step.name);
    switch (event.type) {
      case 'xreactor.step.succeeded':
        hooks.emit('stepComplete', { ...base, attempt: event.attempt, args: event.args, outcome: 'succeeded', result: event.result });
        break;
      case 'xreactor.step.skipped':
        hooks.emit('stepComplete', { ...base, attempt: event.attempt, args: undefined, outcome: 'skipped', result: event.value });
        break;
      case 'xreactor.step.halted':
        hooks.emit('stepComplete', { ...base, attempt: event.attempt, args: undefined, outcome: 'halted', result: event.reason });
        break;
      default:
        break;
    }
  }

  /** Hooks that depend on where a transition led: a step's final failure, and the run's end. */
  /** Hooks that depend on where a transition led; a promise only when the run ended (its result is built). */
  #afterCommit(held: HeldExecution, event: ExecutionEvent, effects: readonly ExecutionEffect[]): Promise<void> | undefined {
    const { hooks } = this.#deps;
    if (event.type === 'xreactor.element.start') hooks.emit('reactorStart', { ...this.#base(held), input: held.inputs });
    if (event.type === 'xreactor.step.failed' && statusOf(held.snapshot.value) !== 'running' && hooks.has('stepFail')) {
      const step = this.#definition.plan[event.index]!.name;
      hooks.emit('stepFail', { ...this.#hook(held, step), attempt: event.attempt, args: event.args, error: deserializeError(event.error) });
    }
    const finished = effects.find((e) => e.type === 'xreactor.effect.finished');
    if (finished === undefined || !(hooks.has('reactorComplete') || hooks.has('reactorFail'))) return undefined;
    return this.#emitEnd(held, finished.params.status);
  }

  async #emitEnd(held: HeldExecution, status: ExecutionStatus): Promise<void> {
    const { hooks } = this.#deps;
    const result = await buildResult(this.#definition, status, held.snapshot.context, this.resultsOf(held));
    const base = this.#base(held);
    if (result?.status === 'failed') hooks.emit('reactorFail', { ...base, error: result.error });
    else if (result?.status === 'completed') hooks.emit('reactorComplete', { ...base, status: 'completed', value: result.value });
    else if (result?.status === 'halted') hooks.emit('reactorComplete', { ...base, status: 'halted', value: result.reason });
  }
}
