import type { Logger } from 'pino';
import type { ExecutionMachine } from '../../machines/execution.js';
import { EXECUTION_MACHINE_VERSION } from '../../machines/execution.js';
import type { ExecutionContext, ExecutionEffect, ExecutionEvent, ExecutionStatus, ExecutionWrite, PauseRecord, TraceEntry } from '../../machines/execution-types.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { DefinitionError, DeserializationError, InputValidationError, InterruptTimeoutError, QueueRequiredError, WorkInterruptedError } from '../errors/index.js';
import { CORRELATION_TTL_MS, correlationKey, rootIdOf } from './lineage.js';
import type { JobSpec, Queue } from '../queue/queue.js';
import { jobId } from '../queue/job-ids.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import type { Hooks } from '../observability/middleware.js';
import { decode, deserializeError, encode, serializeError } from '../serialization/index.js';
import type { Commit, CommitOptions, CommitWrites, LoadedExecution, OutboxEffect, PersistedSnapshot, Store, UndoEntry } from '../store/store.js';
import { encodeSnapshot } from '../store/snapshot-codec.js';
import type { Clock } from '../internal/clock.js';
import type { Attempt, StepScope } from './step-performer.js';
import { performRollbackHandler, performStep, resolveArguments, stepContext } from './step-performer.js';
import { buildResult } from './results.js';
import { createMachineStepper } from './machine-stepper.js';
import type { HeldLease } from './lease.js';
import type { ExecutionSnapshot, MachineStepper } from './machine-stepper.js';
import type { ComposeDeps } from './compose.js';
import { runCompose, undoCompose } from './compose.js';

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
}

/**
 * Who is advancing the execution. A caller that is interrupted stores the run
 * `aborted`; a worker that is interrupted commits nothing, and the job is redelivered.
 */
export type Place = 'caller' | 'worker';

/** An execution actor held by a host: its snapshot, the revision it was loaded at, and its input. */
export interface HeldExecution {
  readonly id: string;
  snapshot: Snapshot;
  revision: number;
  readonly inputs: unknown;
  /** The outbox of the commit it was loaded at (empty for a new execution). */
  readonly outbox: readonly OutboxEffect[];
  /**
   * Encoded results this host committed or read, so a step does not read back
   * what was just written (decoded afresh each time: a step can never alias
   * another step's stored result).
   */
  readonly results: Map<string, Uint8Array>;
  /** This process's lease on the execution, when it holds one (a root it advances); a composed child runs under its root's. */
  lease: HeldLease | undefined;
  /** The hand-off job, sent alongside the commit that asked for it (awaited when the effect is performed). */
  handOffSent?: Promise<void> | undefined;
  /**
   * Built from a hand-off job's snapshot instead of the store: the first commit takes the lease
   * and applies only if the stored snapshot is still exactly these bytes.
   */
  fromJob?: { readonly ifSnapshot: Uint8Array } | undefined;
}

/** Hand-off jobs carry the run's input up to this size (encoded); a larger input is read from the store. */
const CARRIED_INPUT_MAX_BYTES = 16 * 1024;

/**
 * Whether a transition's effects take the run out of this process: its end, or a hand-off made by
 * a caller. A worker that reaches the hand-off (it redid the caller's part after the caller died
 * before its hand-off commit landed) carries on itself, under the lease it holds.
 */
function leavesProcess(effects: readonly ExecutionEffect[], place: Place): boolean {
  return effects.some((e) => e.type === 'xreactor.effect.finished' || (e.type === 'xreactor.effect.handOff' && place === 'caller'));
}

/** Statuses the sweeper recovers (re-enqueues when no live lease is held): the index lists runs in them. */
export const RECOVERABLE: readonly ExecutionStatus[] = ['running', 'rolling_back'];

function isRecoverable(status: ExecutionStatus): boolean {
  return RECOVERABLE.includes(status);
}

/** Whether a transition's effects settle the run (its waiters are told in the same commit). */
function settles(effects: readonly ExecutionEffect[]): boolean {
  return effects.some((e) => e.type === 'xreactor.effect.finished');
}

/** The status an execution snapshot is in. */
export function statusOf(value: unknown): ExecutionStatus {
  return (typeof value === 'string' ? value : Object.keys(value as object)[0]) as ExecutionStatus;
}

function persist(snapshot: Snapshot): PersistedSnapshot {
  return { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: snapshot.value, context: snapshot.context };
}

function partition(actions: readonly { type: string; params?: unknown }[]): { writes: CommitWrites; effects: ExecutionEffect[] } {
  const results: [string, unknown][] = [];
  const pushUndo: (UndoEntry & { position: number })[] = [];
  const trace: TraceEntry[] = [];
  const effects: ExecutionEffect[] = [];
  let truncateUndoTo: number | undefined;
  for (const action of actions as (ExecutionWrite | ExecutionEffect)[]) {
    switch (action.type) {
      case 'xreactor.write.result':
        results.push([action.params.step, action.params.value]);
        break;
      case 'xreactor.write.pushUndo':
        pushUndo.push(action.params);
        break;
      case 'xreactor.write.popUndo':
        truncateUndoTo = action.params.position;
        break;
      case 'xreactor.write.trace':
        trace.push(action.params);
        break;
      default:
        // Only the effect's data: XState's action objects also carry the whole context and event.
        if (action.type.startsWith('xreactor.effect.')) effects.push({ type: action.type, params: action.params } as ExecutionEffect);
    }
  }
  return { writes: { results, pushUndo, truncateUndoTo, trace }, effects };
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
 * The host loop for one reactor: event → pure transition → one fenced commit
 * of snapshot, writes and outbox → perform the effects → their outcome is the
 * next event. The same loop serves every process that advances an execution.
 */
export class ExecutionHost {
  readonly #definition: AnyReactorDefinition;
  readonly #machine: ExecutionMachine;
  readonly #stepper: MachineStepper;
  readonly #deps: HostDeps;
  readonly #byName: ReadonlyMap<string, CompiledStep>;

  readonly #composeDeps: ComposeDeps;

  constructor(definition: AnyReactorDefinition, machine: ExecutionMachine, deps: HostDeps) {
    this.#definition = definition;
    this.#machine = machine;
    this.#stepper = createMachineStepper(machine);
    this.#deps = deps;
    this.#composeDeps = { store: deps.store, clock: deps.clock, hostFor: deps.hostFor };
    this.#byName = new Map(definition.steps.map((s) => [s.name, s]));
  }

  /**
   * Create the execution actor, validate its input and drive it until it settles
   * or the signal fires. A composed child names its parent and path in `lineage`.
   */
  async start(
    id: string,
    rawInput: unknown,
    signal: AbortSignal,
    lineage: { readonly parentId: string | null; readonly path: readonly string[] } = { parentId: null, path: [] },
    place: Place = 'caller',
    lease?: HeldLease,
  ): Promise<HeldExecution> {
    const { store, clock } = this.#deps;
    const reactor = this.#definition.name;
    const [snapshot, actions] = this.#stepper.initial({ executionId: id, reactor, at: clock.now(), ...lineage });
    let event: ExecutionEvent;
    let inputs: unknown = rawInput;
    if (this.#definition.input === undefined) {
      event = { type: 'xreactor.input.accepted', at: clock.now() };
    } else {
      const checked = await validateWith(this.#definition.input, rawInput);
      if (checked.ok) {
        inputs = checked.value;
        event = { type: 'xreactor.input.accepted', at: clock.now() };
      } else {
        const error = new InputValidationError(`reactor "${reactor}": input is invalid: ${describeIssues(checked.issues)}`, checked.issues, { reactor });
        event = { type: 'xreactor.input.rejected', at: clock.now(), error: serializeError(error) };
      }
    }
    // The execution is created in the state its input decides: the creation and the
    // input's verdict are one commit (one round trip fewer per run).
    const [decided, decisionActions] = this.#stepper.next(snapshot, event);
    const first = partition(actions);
    const second = partition(decisionActions);
    const writes: CommitWrites = {
      results: [...first.writes.results, ...second.writes.results],
      pushUndo: [...first.writes.pushUndo, ...second.writes.pushUndo],
      truncateUndoTo: second.writes.truncateUndoTo ?? first.writes.truncateUndoTo,
      trace: [...first.writes.trace, ...second.writes.trace],
    };
    const effects = [...first.effects, ...second.effects];
    // The lease is taken by the create itself, unless the run leaves this process at once.
    const takeLease = lease !== undefined && !leavesProcess(effects, place);
    const held: HeldExecution = { id, snapshot: decided, revision: 0, inputs, outbox: effects, results: new Map(), lease: takeLease ? lease : undefined };
    const persisted = persist(decided);
    const create = store.create(
      { id, reactor, input: inputs, commit: { snapshot: persisted, status: statusOf(decided.value), writes, outbox: effects } },
      { ...(takeLease ? { lease: lease.request } : {}), announce: settles(effects) },
    );
    if (place === 'caller') this.#sendHandOffEarly(held, effects, 1, persisted);
    // Only roots are recovered by the sweeper: a composed child is advanced by its parent. The
    // index entry is written alongside the create (one round trip of waiting): an entry whose
    // execution was never created is dropped by the sweeper.
    const indexed = lineage.parentId === null ? store.markActive(id, true) : undefined;
    [held.revision] = await Promise.all([create, indexed]);
    if (takeLease) lease.taken();
    // A composed child created just as its parent was cancelled: cancel it before it runs
    // anything (the cancel looked for it before it existed; see cancelUnderLease).
    if (lineage.parentId !== null && (await this.#isCancelled(lineage.parentId))) {
      await this.drive(held, { type: 'xreactor.operator.cancel', at: clock.now(), reason: `its parent ${lineage.parentId} was cancelled` }, signal, place);
      return held;
    }
    if (event.type === 'xreactor.input.accepted') this.#deps.hooks.emit('reactorStart', { ...this.#base(held), input: inputs });
    await this.#afterCommit(held, event, effects);
    const next = await this.#performAll(held, effects, signal, place);
    if (next !== undefined) await this.drive(held, next, signal, place);
    return held;
  }

  async #isCancelled(id: string): Promise<boolean> {
    const stored = await this.#deps.store.load(id);
    return stored !== undefined && statusOf(stored.snapshot.value) === 'cancelled';
  }

  /** Load a stored execution into a held actor. */
  async load(id: string, already?: LoadedExecution, input?: { readonly value: unknown }): Promise<HeldExecution | undefined> {
    const loaded = already ?? (await this.#deps.store.load(id));
    if (loaded === undefined) return undefined;
    if (loaded.snapshot.machineVersion !== EXECUTION_MACHINE_VERSION) {
      throw new DeserializationError(`execution ${id} was stored by execution machine version ${loaded.snapshot.machineVersion}; this build runs version ${EXECUTION_MACHINE_VERSION}`, {
        retryable: true,
      });
    }
    const snapshot = this.#machine.resolveState({ value: loaded.snapshot.value as never, context: loaded.snapshot.context as ExecutionContext });
    const inputs = input === undefined ? await this.#deps.store.readInput(id) : input.value;
    return { id, snapshot, revision: loaded.revision, inputs, outbox: loaded.outbox, results: new Map(), lease: undefined };
  }

  /**
   * Feed `event` to the actor and keep going until no effect produces another
   * event. Returns whether the actor accepted `first` (a stale or duplicate
   * delivery is ignored without a commit).
   */
  async drive(held: HeldExecution, first: ExecutionEvent, signal: AbortSignal, place: Place = 'caller'): Promise<boolean> {
    let event: ExecutionEvent | undefined = first;
    let accepted = false;
    while (event !== undefined) {
      if (event.type === 'xreactor.execution.abort' && place === 'worker') throw new WorkInterruptedError(held.id, event.reason);
      const [next, actions] = this.#stepper.next(held.snapshot, event);
      // XState returns the very same snapshot when no transition applies (stale or duplicate delivery).
      if (next === held.snapshot) {
        this.#deps.logger.debug({ event: 'xreactor.event.ignored', executionId: held.id, type: event.type }, 'event not accepted in this state');
        return accepted;
      }
      if (event === first) accepted = true;
      const { writes, effects } = partition(actions);
      const commit: Commit = { snapshot: persist(next), status: statusOf(next.value), writes, outbox: effects };
      // A commit that takes the run out of this process releases the lease and tells the run's
      // waiters, in the same atomic step. The first commit of a run built from a hand-off job's
      // snapshot takes the lease, fenced by that snapshot.
      const lease = held.lease?.held === true && leavesProcess(effects, place) ? held.lease : undefined;
      const announce = settles(effects);
      const fromJob = held.fromJob;
      const options: CommitOptions | undefined =
        lease === undefined && !announce && fromJob === undefined
          ? undefined
          : {
              ...(lease === undefined ? {} : { releaseLease: lease.letGo() }),
              ...(fromJob === undefined || held.lease === undefined ? {} : { takeLease: held.lease.request, ifSnapshot: fromJob.ifSnapshot }),
              announce,
            };
      // A root becoming recoverable again (continued after a pause, undone after its end) is listed
      // for the sweeper before this commit (should the process die right after it) and again
      // after it (a sweep that dropped it meanwhile may have removed the first entry).
      const relist = held.snapshot.context.parentId === null && !isRecoverable(statusOf(held.snapshot.value)) && isRecoverable(commit.status);
      if (relist) await this.#deps.store.markActive(held.id, true);
      const committing = this.#deps.store.commit(held.id, held.revision, commit, options);
      if (place === 'caller') this.#sendHandOffEarly(held, effects, held.revision + 1, commit.snapshot);
      held.revision = await committing;
      lease?.released();
      if (relist) await this.#deps.store.markActive(held.id, true);
      if (fromJob !== undefined) {
        held.fromJob = undefined;
        held.lease?.taken();
      }
      held.snapshot = next;
      for (const [step, value] of writes.results) held.results.set(step, encode(value));
      await this.#afterCommit(held, event, effects);
      event = await this.#performAll(held, effects, signal, place);
    }
    return accepted;
  }

  /** Perform the committed outbox again (recovery after a crash or a lost job), then keep driving. */
  async resume(held: HeldExecution, outbox: readonly OutboxEffect[], signal: AbortSignal, place: Place): Promise<void> {
    const event = await this.#performAll(held, outbox as readonly ExecutionEffect[], signal, place);
    if (event !== undefined) await this.drive(held, event, signal, place);
  }

  async #performAll(held: HeldExecution, effects: readonly ExecutionEffect[], signal: AbortSignal, place: Place): Promise<ExecutionEvent | undefined> {
    let event: ExecutionEvent | undefined;
    for (const effect of effects) {
      const produced = await this.#perform(held, effect, signal, place);
      if (produced !== undefined) event = produced;
    }
    return event;
  }

  async #enqueue(held: HeldExecution, id: string, event: ExecutionEvent, delayMs?: number, executionId = held.id, handoff?: JobSpec['handoff']): Promise<void> {
    const queue = this.#deps.queue;
    if (queue === undefined) throw new QueueRequiredError(this.#definition.name);
    this.#deps.hooks.emit('beforeEnqueue', { ...this.#base(held), job: id });
    await queue.enqueue([
      { id, kind: 'advance', executionId, reactor: this.#definition.name, event, ...(delayMs === undefined ? {} : { delayMs }), ...(handoff === undefined ? {} : { handoff }) },
    ]);
  }

  #sendHandOff(held: HeldExecution, carried?: JobSpec['handoff']): Promise<void> {
    return this.#enqueue(held, jobId(held.id, 'handoff'), { type: 'xreactor.execution.resume', at: this.#deps.clock.now() }, undefined, held.id, carried);
  }

  /**
   * A hand-off's job is sent together with the commit that asks for it (right after it), without
   * waiting for that commit to land: the job only wakes a worker, which finds the run as the
   * store has it (and waits a moment when the run is not there yet or still leased). This takes
   * the commit's round trip off the hand-off. If the commit is refused, the job wakes a worker
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
      if (bytes !== undefined) out.set(step, decode(bytes));
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
    return { reactor: this.#definition.name, executionId: held.id, path: held.snapshot.context.path };
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

  async #perform(held: HeldExecution, effect: ExecutionEffect, signal: AbortSignal, place: Place): Promise<ExecutionEvent | undefined> {
    const { hooks, clock, store } = this.#deps;
    const reactor = this.#definition.name;
    const executionId = held.id;
    const scope = this.#scope(held, signal);
    const settle = (out: ExecutionEvent | { aborted: ExecutionEvent }): ExecutionEvent => ('aborted' in out ? out.aborted : out);
    switch (effect.type) {
      case 'xreactor.effect.runStep': {
        const step = this.#definition.plan[effect.params.index]!;
        const loadResults = () => this.#readResults(held, step.reads);
        const attempt = effect.params.attempt;
        const progress: Attempt = {
          args: undefined,
          started: false,
          onStart: hooks.has('stepStart') ? (args) => hooks.emit('stepStart', { ...this.#hook(held, step.name), attempt, args }) : undefined,
        };
        const event =
          step.kind === 'compose'
            ? await runCompose(this.#composeDeps, held, step, attempt, signal, place, loadResults, progress.onStart ?? (() => undefined))
            : settle(await this.#unlessAborted(signal, () => performStep(step, attempt, scope, loadResults, () => clock.now(), progress)));
        this.#emitStepOutcome(held, step, event);
        return event;
      }
      case 'xreactor.effect.paused':
        return this.#paused(held, effect.params, place);
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
        if (held.snapshot.context.handedOff) {
          // In a worker, a retry backoff is a delayed job: the worker is free in between.
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
        const entry = await store.readUndoEntry(executionId, position);
        if (entry === undefined) throw new DeserializationError(`execution ${executionId}: undo-stack entry ${position} is missing from the store`);
        const step = this.#byName.get(entry.step);
        if (step?.kind === 'compose') {
          hooks.emit('undoStart', { ...this.#hook(held, entry.step), attempt: 1, args: entry.args, result: entry.result });
          const composed = await undoCompose(this.#composeDeps, held, step, entry, position, epoch, signal, place);
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
        // Its waiters were told by the commit that finished it. Leaving the recovery index is
        // not waited for: a settled execution still listed is dropped by the next sweep.
        store.markActive(executionId, false).catch((error: unknown) => {
          this.#deps.logger.warn({ event: 'xreactor.index.remove_failed', executionId, err: error }, 'could not remove a settled execution from the recovery index');
        });
        return undefined;
    }
  }

  /**
   * A run paused: claim the correlation ids of its ready interrupts, schedule
   * active timeouts, and wake whoever awaits the run.
   */
  async #paused(held: HeldExecution, pause: PauseRecord, _place: Place): Promise<ExecutionEvent | undefined> {
    const { store, clock } = this.#deps;
    const reactor = this.#definition.name;
    for (const { step: name, timeoutAt } of pause.ready) {
      const step = this.#byName.get(name)!;
      const interrupt = step.interrupt!;
      if (interrupt.correlationId !== undefined) {
        const results = await store.readResults(held.id, step.reads);
        const { id: correlationId } = (await resolveArguments({ ...step, args: interrupt.correlationId, contract: undefined }, held.inputs, results, reactor)) as { id: string };
        const target = JSON.stringify({ root: rootIdOf(held.id, held.snapshot.context.path), path: [...held.snapshot.context.path, name] });
        const owner = await store.claim(correlationKey(correlationId), target, CORRELATION_TTL_MS);
        if (owner !== target) {
          const error = new DefinitionError(`interrupt "${name}": correlation id "${correlationId}" is already used by another run (${owner}); correlation ids must be unique`, { step: name, reactor });
          return { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error) };
        }
      }
      if (interrupt.timeout?.strategy === 'active' && timeoutAt !== null) {
        // Delivered to the root with the interrupt's path: the root's lease covers the whole tree.
        const error = new InterruptTimeoutError(held.id, name, interrupt.timeout.ms);
        const path = [...held.snapshot.context.path, name];
        const fail = { type: 'xreactor.interrupt.fail', at: clock.now(), step: name, error: serializeError(error), path } as ExecutionEvent;
        await this.#enqueue(held, jobId(held.id, 'timeout', name), fail, Math.max(0, timeoutAt - clock.now()), rootIdOf(held.id, held.snapshot.context.path));
      }
    }
    await store.publishSettled(held.id);
    return undefined;
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
  async #afterCommit(held: HeldExecution, event: ExecutionEvent, effects: readonly ExecutionEffect[]): Promise<void> {
    const { hooks } = this.#deps;
    if (event.type === 'xreactor.step.failed' && statusOf(held.snapshot.value) !== 'running' && hooks.has('stepFail')) {
      const step = this.#definition.plan[event.index]!.name;
      hooks.emit('stepFail', { ...this.#hook(held, step), attempt: event.attempt, args: event.args, error: deserializeError(event.error) });
    }
    const finished = effects.find((e) => e.type === 'xreactor.effect.finished');
    if (finished === undefined || !(hooks.has('reactorComplete') || hooks.has('reactorFail'))) return;
    const status = finished.params.status;
    const result = await buildResult(this.#definition, status, held.snapshot.context, this.resultsOf(held));
    const base = this.#base(held);
    if (result?.status === 'failed') hooks.emit('reactorFail', { ...base, error: result.error });
    else if (result?.status === 'completed') hooks.emit('reactorComplete', { ...base, status: 'completed', value: result.value });
    else if (result?.status === 'halted') hooks.emit('reactorComplete', { ...base, status: 'halted', value: result.reason });
  }
}
