import { randomUUID } from 'node:crypto';
import pino from 'pino';
import type { Logger } from 'pino';
import { createExecutionMachine } from '../../machines/execution.js';
import type { ExecutionMachine } from '../../machines/execution.js';
import type { AnyReactorDefinition, ReactorDefinition } from '../definition/compiled.js';
import { ExecutionAbortedError, ExecutionNotFoundError, InvalidStateError, UnknownReactorError } from '../errors/index.js';
import type { ExecutionId, IdGenerator } from '../internal/ids.js';
import type { Middleware } from '../observability/middleware.js';
import { createHooks } from '../observability/middleware.js';
import { createMemoryStore } from '../store/memory-store.js';
import type { Store } from '../store/store.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import { ExecutionHost, statusOf } from './host.js';
import type { HeldExecution } from './host.js';
import type { CancelledResult, ExecutionView, RunResult } from './results.js';
import { buildResult } from './results.js';

/** Options of {@link createRuntime}. All optional: the default is fully embedded. */
export interface RuntimeOptions {
  /**
   * Where execution actors live.
   * @defaultValue an in-memory store
   */
  readonly store?: Store;
  /**
   * Time source for retries and timestamps.
   * @defaultValue the system clock
   */
  readonly clock?: Clock;
  /** Observers of every execution, in order. */
  readonly middleware?: readonly Middleware[];
  /**
   * Structured logger.
   * @defaultValue pino at level `warn` (or `XREACTOR_LOG_LEVEL`)
   */
  readonly logger?: Logger;
  /**
   * Execution id generator.
   * @defaultValue `crypto.randomUUID`
   */
  readonly generateId?: IdGenerator;
  /** Reactors this runtime can find and undo without having run them (e.g. after a restart). */
  readonly reactors?: readonly AnyReactorDefinition[];
}

/** Options of a single run. */
export interface RunOptions {
  /** Interrupts the run: no rollback runs, the execution is stored `aborted` and `run` rejects with ExecutionAbortedError. */
  readonly signal?: AbortSignal;
  /** Use this id instead of a generated one. */
  readonly executionId?: string;
}

/** The caller's input type of a reactor definition. */
export type RunInput<R> = R extends ReactorDefinition<string, infer I, any, any> ? I : never;
/** The completed value type of a reactor definition. */
export type RunOutput<R> = R extends ReactorDefinition<string, any, any, infer O> ? O : never;

/** A runtime: runs reactors, finds executions, undoes them. */
export interface Runtime {
  /**
   * Run a reactor to its end in this process.
   * @example
   * const result = await runtime.run(checkout, { sku: 'A1', cents: 1200 });
   * if (result.status === 'completed') console.log(result.value);
   */
  run<R extends AnyReactorDefinition>(reactor: R, input: RunInput<R>, options?: RunOptions): Promise<RunResult<RunOutput<R>>>;
  /** Status, outcome, undo stack and trace of an execution. */
  find(id: string): Promise<ExecutionView>;
  /** Roll back a completed, halted or aborted execution (re-running a cut-off compensate first); it ends `cancelled`. */
  undo(id: string, options?: { readonly signal?: AbortSignal }): Promise<CancelledResult>;
  /** Interrupt every run in progress (as on SIGTERM): they are stored `aborted`, no rollback runs. */
  shutdown(reason?: string): void;
}

/**
 * Create a runtime. With no options it is fully embedded: memory store,
 * system clock, no server needed.
 * @example
 * const runtime = createRuntime();
 * process.once('SIGTERM', () => runtime.shutdown('SIGTERM'));
 */
export function createRuntime(options: RuntimeOptions = {}): Runtime {
  const store = options.store ?? createMemoryStore();
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: process.env['XREACTOR_LOG_LEVEL'] ?? 'warn' });
  const hooks = createHooks(options.middleware ?? [], logger);
  const generateId = options.generateId ?? randomUUID;
  const reactors = new Map<string, AnyReactorDefinition>();
  const hosts = new WeakMap<AnyReactorDefinition, ExecutionHost>();
  const stopping = new AbortController();

  const register = (definition: AnyReactorDefinition): ExecutionHost => {
    let host = hosts.get(definition);
    if (host === undefined) {
      const machine: ExecutionMachine = createExecutionMachine({
        reactor: definition.name,
        steps: definition.plan.map((s) => ({ name: s.name, retry: s.retry, tracked: s.tracked })),
      });
      host = new ExecutionHost(definition, machine, { store, clock, hooks, logger });
      hosts.set(definition, host);
      reactors.set(definition.name, definition);
    }
    return host;
  };
  for (const definition of options.reactors ?? []) register(definition);

  const signalFor = (signal: AbortSignal | undefined) => (signal === undefined ? stopping.signal : AbortSignal.any([signal, stopping.signal]));

  const settle = async (definition: AnyReactorDefinition, held: HeldExecution) => {
    const status = statusOf(held.snapshot.value);
    if (status === 'aborted') throw new ExecutionAbortedError(held.id, definition.name);
    return buildResult(definition, status, held.snapshot.context, store);
  };

  const loadHeld = async (id: string) => {
    const loaded = await store.load(id);
    if (loaded === undefined) throw new ExecutionNotFoundError(id);
    const reactor = (loaded.snapshot.context as { reactor: string }).reactor;
    const definition = reactors.get(reactor);
    if (definition === undefined) throw new UnknownReactorError(reactor);
    const host = register(definition);
    const held = await host.load(id);
    if (held === undefined) throw new ExecutionNotFoundError(id);
    return { definition, host, held };
  };

  return {
    async run(reactor, input, runOptions = {}) {
      const host = register(reactor);
      const id = runOptions.executionId ?? generateId();
      const held = await host.start(id, input, signalFor(runOptions.signal));
      return (await settle(reactor, held)) as RunResult<RunOutput<typeof reactor>>;
    },

    async find(id) {
      const loaded = await store.load(id);
      if (loaded === undefined) throw new ExecutionNotFoundError(id);
      const context = loaded.snapshot.context as HeldExecution['snapshot']['context'];
      const status = statusOf(loaded.snapshot.value);
      const [undoStack, trace] = await Promise.all([store.readUndoStack(id), store.readTrace(id)]);
      const failure = context.failure;
      return {
        id: id as ExecutionId,
        reactor: context.reactor,
        status,
        revision: loaded.revision,
        result: await buildResult(reactors.get(context.reactor), status, context, store),
        undoStack,
        trace,
        pendingCompensation: failure?.compensationPending === true && status === 'aborted' ? { step: failure.step } : undefined,
        createdAt: context.createdAt,
        updatedAt: context.updatedAt,
      };
    },

    async undo(id, undoOptions = {}) {
      const { definition, host, held } = await loadHeld(id);
      const status = statusOf(held.snapshot.value);
      if (status === 'rolling_back') throw new InvalidStateError(`execution ${id} is rolling back already; wait for it to finish`);
      if (status !== 'completed' && status !== 'halted' && status !== 'aborted') {
        throw new InvalidStateError(`execution ${id} is ${status}; only completed, halted or aborted executions can be undone`);
      }
      await host.drive(held, { type: 'xreactor.operator.undo', at: clock.now() }, signalFor(undoOptions.signal));
      return (await settle(definition, held)) as CancelledResult;
    },

    shutdown(reason = 'runtime shutdown') {
      stopping.abort(new Error(reason));
    },
  };
}
