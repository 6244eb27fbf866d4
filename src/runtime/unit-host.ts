/**
 * The kind host of async unit actors (kind `unit`, `machines/unit.ts`): an `asyncStep`'s body run
 * in its own job. Its owner's commit spawns it (queued) and enqueues its job; the job takes its
 * lease, runs the body (retrying in the job), compensates once after the last attempt failed,
 * and settles with a commit that signals the owner and announces the settle (a caller waiting in
 * `result(name)` wakes).
 */
import type { ActorTag } from '../../machines/registry-types.js';
import { createUnitMachine, UNIT_MACHINE_VERSION, unitStatusOf, unitTagsOf } from '../../machines/unit.js';
import type { UnitContext, UnitEvent, UnitInput } from '../../machines/unit-types.js';
import type { ExecutionEvent } from '../../machines/execution-types.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { DefinitionError, DeserializationError, WorkInterruptedError } from '../errors/index.js';
import type { Hooks } from '../observability/middleware.js';
import type { ActorInspector } from '../observability/inspector.js';
import type { Snapshot } from 'xstate';
import { deserializeError } from '../serialization/index.js';
import type { Commit, CommitOptions, CommitWrites, LoadedExecution, OutboxEffect, PersistedSnapshot, Signal, SignalEvent, SpawnActor } from '../store/store.js';
import type { TraceEntry } from '../../machines/execution-types.js';
import type { ActorBehaviour, HeldActor, KernelDeps, KindHost, SweepLook, SweepVerdict, Transition } from './actor-host.js';
import { ActorHost } from './actor-host.js';
import type { Call } from './call.js';
import { createKindStepper } from './machine-stepper.js';
import type { KindSnapshot, MachineAction } from './machine-stepper.js';
import { checkArguments, performRollbackHandler, performStep, stepContext } from './step-performer.js';
import type { Attempt, StepScope } from './step-performer.js';
import { wakeParams } from './wake.js';

/** An async unit actor as its host holds it: its snapshot and its stored arguments. */
export interface HeldUnit extends HeldActor {
  snapshot: KindSnapshot;
  /** The step's arguments as its owner resolved them (before its input contract, applied per attempt). */
  readonly args: unknown;
  /** The owner's inputs (a handler's `ctx.inputs`), read once per job. */
  ownerInputs?: { readonly value: unknown } | undefined;
}

/** What the unit host needs besides the kernel's services. */
export interface UnitHostDeps extends KernelDeps {
  readonly hooks: Hooks;
  /** The owner's reactor at the version and plan it started with (the step's body is there). */
  readonly definitionOf: (ref: { reactor: string; version: number; fingerprint: string }) => AnyReactorDefinition;
  /** How long a queued unit waits for its job before a sweep sends it again (a lost job). */
  readonly stallMs: number;
  /** Where live actors are shown (XState inspection events); disabled when no observer was given. */
  readonly inspector: ActorInspector;
}

const NO_WRITES: CommitWrites = { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] };

/** The kind host of async unit actors. */
export class UnitHost implements ActorBehaviour<HeldUnit>, KindHost<HeldUnit> {
  readonly loop: ActorHost<HeldUnit>;
  readonly #deps: UnitHostDeps;
  readonly #machine = createUnitMachine();
  readonly #stepper = createKindStepper(this.#machine, undefined);

  constructor(deps: UnitHostDeps) {
    this.#deps = deps;
    this.loop = new ActorHost(deps, this);
  }

  #persist(snapshot: KindSnapshot): PersistedSnapshot {
    return { kind: 'unit', machineVersion: UNIT_MACHINE_VERSION, value: snapshot.value, context: snapshot.context };
  }

  /**
   * The creation of the unit of `owner`'s async step `step`, for the owner's dispatch commit: it
   * is created queued (no lease: its own job takes it up) and listed for the sweeper, and shares
   * its owner's retention (a reader reads its end as long as the owner lives).
   */
  creation(owner: { readonly id: string; readonly path: readonly string[] }, definition: AnyReactorDefinition, step: CompiledStep, id: string, args: unknown): { readonly held: HeldUnit; readonly create: SpawnActor } {
    const input: UnitInput = {
      unitId: id,
      owner: owner.id,
      ownerPath: owner.path,
      reactor: definition.name,
      version: definition.version,
      fingerprint: definition.fingerprint,
      step: step.name,
      retry: step.retry,
      at: this.#deps.clock.now(),
    };
    const [snapshot, actions] = this.#stepper.initial(input);
    const effects = actions.filter((a) => a.type.startsWith('xreactor.effect.')).map((a) => ({ type: a.type, params: a.params }));
    const held: HeldUnit = { id, snapshot, revision: 1, outbox: effects, inbox: { entries: [], seq: 0 }, declined: new Set(), inboxStale: false, lease: undefined, args };
    const create: SpawnActor = {
      id,
      reactor: definition.name,
      input: args,
      kind: 'unit',
      commit: { snapshot: this.#persist(snapshot), status: unitStatusOf(snapshot.value), writes: NO_WRITES, outbox: effects },
    };
    return { held, create };
  }

  async load(id: string, loaded: LoadedExecution, input: { readonly value: unknown } | undefined): Promise<HeldUnit | undefined> {
    if (loaded.snapshot.kind !== 'unit' || loaded.snapshot.machineVersion !== UNIT_MACHINE_VERSION) {
      throw new DeserializationError(`actor ${id} was stored as ${loaded.snapshot.kind} machine version ${loaded.snapshot.machineVersion}; this host runs unit machine version ${UNIT_MACHINE_VERSION}`, { retryable: true });
    }
    const args = input === undefined ? await this.#deps.store.readInput(id) : input.value;
    const held: HeldUnit = {
      id,
      snapshot: this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context),
      revision: loaded.revision,
      outbox: loaded.outbox,
      inbox: loaded.inbox,
      declined: new Set(),
      inboxStale: false,
      lease: undefined,
      args,
    };
    this.#inspect(held);
    return held;
  }

  /** Show a live unit to the inspector, as a child of its owner (once per id while it lives). */
  #inspect(held: HeldUnit): void {
    const { inspector } = this.#deps;
    if (!inspector.enabled || unitTagsOf(held.snapshot.value).has('settled')) return;
    const context = held.snapshot.context as UnitContext;
    inspector.actor({ id: held.id, kind: 'unit', parentId: context.owner, machine: this.#machine }, held.snapshot as unknown as Snapshot<unknown>);
  }

  adopt(held: HeldUnit, loaded: LoadedExecution): void {
    held.snapshot = this.#stepper.resolve(loaded.snapshot.value, loaded.snapshot.context);
    held.revision = loaded.revision;
    held.outbox = loaded.outbox;
  }

  tags(value: unknown): ReadonlySet<ActorTag> {
    return unitTagsOf(value);
  }

  persist(held: HeldUnit) {
    return { snapshot: this.#persist(held.snapshot), status: unitStatusOf(held.snapshot.value) };
  }

  /**
   * A unit with no live lease: settled → dropped; working (its process died) → a job; queued for
   * longer than `stallMs` (its job was lost or failed for good) → a job; else kept.
   */
  sweep(_id: string, loaded: LoadedExecution, _look: SweepLook): SweepVerdict {
    const tags = unitTagsOf(loaded.snapshot.value);
    if (tags.has('settled')) return { action: 'drop' };
    if (loaded.inbox.entries.length > 0 || tags.has('recoverable')) return { action: 'job' };
    const context = loaded.snapshot.context as UnitContext;
    return this.#deps.clock.now() - context.updatedAt >= this.#deps.stallMs ? { action: 'job' } : { action: 'keep' };
  }

  transition(held: HeldUnit, event: SignalEvent, call: Call): Transition | undefined {
    // An interruption (a worker shutting down): its job is delivered again and the unit resumes.
    if (event.type === 'xreactor.execution.abort') {
      const reason = (event as { reason?: unknown }).reason;
      throw new WorkInterruptedError(held.id, typeof reason === 'string' ? reason : 'aborted');
    }
    void call;
    const [next, actions] = this.#stepper.next(held.snapshot, event);
    if (next === held.snapshot) return undefined;
    const { writes, effects, signals } = planOf(actions);
    const finished = effects.some((e) => e.type === 'xreactor.effect.finished');
    const commit: Commit = {
      snapshot: this.#persist(next),
      status: unitStatusOf(next.value),
      writes,
      outbox: effects,
      ...(signals.length === 0 ? {} : { signals }),
    };
    // The settling commit announces the settle (a caller waiting in a reader wakes), leaves the
    // recovery index and releases the lease with it.
    const lease = finished && held.lease?.held === true ? held.lease : undefined;
    const options: CommitOptions | undefined = finished ? { announce: true, unlist: true, ...(lease === undefined ? {} : { releaseLease: lease.letGo() }) } : undefined;
    return {
      next,
      commit,
      options,
      effects,
      // The owner it signals is listed, so a sweep applies the signal should its wake be lost.
      listed: signals.map((s) => s.to),
      refused: () => lease?.taken(),
      landed: () => {
        lease?.released();
        const { inspector } = this.#deps;
        if (inspector.enabled) {
          inspector.event(held.id, event);
          inspector.snapshot(held.id, next as unknown as Snapshot<unknown>, event, actions);
          if (finished) inspector.stopped(held.id);
        }
        return undefined;
      },
    };
  }

  perform(held: HeldUnit, effect: OutboxEffect, call: Call): Promise<SignalEvent | undefined> {
    return this.#perform(held, effect, call);
  }

  async #perform(held: HeldUnit, effect: OutboxEffect, call: Call): Promise<UnitEvent | undefined> {
    const { clock, hooks } = this.#deps;
    const context = held.snapshot.context as UnitContext;
    switch (effect.type) {
      case 'xreactor.effect.unit.start':
        return { type: 'xreactor.unit.start', at: clock.now() };
      case 'xreactor.effect.unit.run': {
        const { attempt } = effect.params as { attempt: number };
        const { step, scope } = await this.#bodyOf(held, context, call);
        if (call.signal.aborted) throw new WorkInterruptedError(held.id, 'the worker is shutting down');
        const progress: Attempt = {
          args: undefined,
          started: false,
          onStart: (args) => hooks.emit('stepStart', { ...this.#hook(context), attempt, args }),
        };
        const event = await performStep(step, attempt, scope, () => Promise.resolve(new Map()), () => clock.now(), progress, () => checkArguments(step, held.args, context.reactor));
        return this.#unitEvent(context, event, attempt);
      }
      case 'xreactor.effect.unit.wait': {
        const { attempt, delayMs, error } = effect.params as { attempt: number; delayMs: number; error: never };
        hooks.emit('retryAttempt', { ...this.#hook(context), attempt, args: undefined, error: deserializeError(error), delayMs, nextAttempt: attempt + 1 });
        // A unit's retries loop in its job (seed 001 §5): the backoff is a sleep here.
        try {
          await clock.sleep(delayMs, call.signal);
        } catch {
          throw new WorkInterruptedError(held.id, 'the worker is shutting down');
        }
        return { type: 'xreactor.timer.fired', at: clock.now(), attempt };
      }
      case 'xreactor.effect.unit.compensate': {
        const { attempt, error } = effect.params as { attempt: number; error: never };
        const { step, scope } = await this.#bodyOf(held, context, call);
        const handler = step.compensate;
        if (handler === undefined) return { type: 'xreactor.unit.compensated', at: clock.now(), failure: null, skipped: true };
        const cause = deserializeError(error);
        // The arguments the failed attempt ran with: its stored ones through its contract.
        const args = await checkArguments(step, held.args, context.reactor).catch(() => held.args);
        const base = { ...this.#hook(context), attempt, args };
        hooks.emit('compensateStart', { ...base, error: cause });
        const failure = await performRollbackHandler(() => handler(cause, args, stepContext(scope, step.name, 1)), step.name, context.reactor);
        if (failure === null) hooks.emit('compensateComplete', base);
        else hooks.emit('compensateFail', { ...base, error: deserializeError(failure.error) });
        return { type: 'xreactor.unit.compensated', at: clock.now(), failure, skipped: false };
      }
      default:
        // `finished`: the settling commit took it off the recovery index; wakes are the kernel's.
        return undefined;
    }
  }

  /** The unit's step (in its owner's reactor, at the version and plan it was dispatched with) and what its handlers run against. */
  async #bodyOf(held: HeldUnit, context: UnitContext, call: Call): Promise<{ readonly step: CompiledStep; readonly scope: StepScope }> {
    const definition = this.#deps.definitionOf({ reactor: context.reactor, version: context.version, fingerprint: context.fingerprint });
    const step = definition.steps.find((s) => s.name === context.step && s.kind === 'asyncStep');
    if (step === undefined) throw new DefinitionError(`reactor "${context.reactor}" version ${context.version} has no async step "${context.step}" (unit ${held.id})`, { reactor: context.reactor, step: context.step });
    held.ownerInputs ??= { value: await this.#deps.store.readInput(context.owner).catch(() => undefined) };
    return { step, scope: { executionId: context.owner, reactor: context.reactor, inputs: held.ownerInputs.value, signal: call.signal } };
  }

  /** A body attempt's outcome, as the execution's performer classified it, as the unit's event (and its hooks). */
  #unitEvent(context: UnitContext, event: ExecutionEvent, attempt: number): UnitEvent {
    const { hooks } = this.#deps;
    const base = { ...this.#hook(context), attempt };
    switch (event.type) {
      case 'xreactor.step.succeeded':
        hooks.emit('stepComplete', { ...base, args: event.args, outcome: 'succeeded', result: event.result });
        return { type: 'xreactor.unit.succeeded', at: event.at, attempt, value: event.result };
      case 'xreactor.step.skipped':
        hooks.emit('stepComplete', { ...base, args: undefined, outcome: 'skipped', result: event.value });
        return { type: 'xreactor.unit.succeeded', at: event.at, attempt, value: event.value };
      case 'xreactor.step.halted':
        hooks.emit('stepComplete', { ...base, args: undefined, outcome: 'halted', result: event.reason });
        return { type: 'xreactor.unit.halted', at: event.at, attempt, reason: event.reason };
      case 'xreactor.step.failed': {
        const last = !(event.started && event.retryable && attempt < context.retry.maxAttempts);
        if (last) hooks.emit('stepFail', { ...base, args: event.args, error: deserializeError(event.error) });
        return { type: 'xreactor.unit.failed', at: event.at, attempt, error: event.error, started: event.started, retryable: event.retryable };
      }
      default:
        throw new Error(`unexpected step outcome ${event.type} for async unit ${context.unitId}`);
    }
  }

  /** Fields of the unit's step hooks: its owner's reactor, execution and path. */
  #hook(context: UnitContext) {
    return { reactor: context.reactor, executionId: context.owner, path: context.ownerPath, step: context.step, kind: 'asyncStep' as const };
  }
}

/** A unit transition's actions as a commit: its writes (value, trace), outbox (wakes first) and its signal to its owner. */
function planOf(actions: readonly MachineAction[]): { writes: CommitWrites; effects: OutboxEffect[]; signals: Signal[] } {
  const results: [string, unknown][] = [];
  const trace: TraceEntry[] = [];
  const effects: OutboxEffect[] = [];
  const wakes: OutboxEffect[] = [];
  const signals: Signal[] = [];
  for (const action of actions) {
    const p = action.params as never;
    switch (action.type) {
      case 'xreactor.write.result': {
        const r = p as { step: string; value: unknown };
        results.push([r.step, r.value]);
        break;
      }
      case 'xreactor.write.trace':
        trace.push(p);
        break;
      case 'xreactor.write.signal': {
        const s = p as { to: string; event: SignalEvent; dedupeKey: string };
        signals.push({ to: s.to, event: s.event, dedupeKey: s.dedupeKey });
        wakes.push({ type: 'xreactor.effect.wake', params: wakeParams(s.to, 'execution') });
        break;
      }
      default:
        if (action.type.startsWith('xreactor.effect.')) effects.push({ type: action.type, params: action.params });
    }
  }
  return { writes: { results, pushUndo: [], truncateUndoTo: undefined, trace }, effects: [...wakes, ...effects], signals };
}
