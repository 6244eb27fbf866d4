import { randomUUID } from 'node:crypto';
import pino from 'pino';
import type { Logger } from 'pino';
import { createExecutionMachine } from '../../machines/execution.js';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import { ExecutionNotFoundError, UnknownReactorError } from '../errors/index.js';
import type { Middleware } from '../observability/middleware.js';
import { createHooks } from '../observability/middleware.js';
import type { Queue } from '../queue/queue.js';
import type { Store } from '../store/store.js';
import type { Clock } from '../internal/clock.js';
import { systemClock } from '../internal/clock.js';
import { ExecutionHost } from './host.js';
import type { HeldExecution } from './host.js';

/** Options shared by runtimes and workers. */
export interface EngineOptions {
  readonly store: Store;
  readonly queue: Queue | undefined;
  /**
   * Time source for retries, leases and timestamps.
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
  /** Reactors this process can advance, find and undo. */
  readonly reactors?: readonly AnyReactorDefinition[];
  /**
   * How long a liveness lease lasts without renewal; renewed every third of it.
   * @defaultValue 30000
   */
  readonly leaseTtlMs?: number;
}

/** The parts a runtime and a worker share: store, queue, hosts per reactor, leases. */
export interface Engine {
  readonly store: Store;
  readonly queue: Queue | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Unique owner id of this process's leases. */
  readonly owner: string;
  register(definition: AnyReactorDefinition): ExecutionHost;
  definition(reactor: string): AnyReactorDefinition;
  /** Load an execution with the host of its reactor. */
  load(id: string): Promise<{ definition: AnyReactorDefinition; host: ExecutionHost; held: HeldExecution }>;
  /**
   * Run `work` holding the execution's liveness lease, renewed while it runs.
   * Returns undefined (without running `work`) when another live owner holds it.
   */
  withLease<T>(id: string, work: () => Promise<T>): Promise<{ value: T } | undefined>;
}

/** Build an engine. */
export function createEngine(options: EngineOptions): Engine {
  const { store, queue } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: process.env['XREACTOR_LOG_LEVEL'] ?? 'warn' });
  const hooks = createHooks(options.middleware ?? [], logger);
  const leaseTtlMs = options.leaseTtlMs ?? 30_000;
  const owner = randomUUID();
  const reactors = new Map<string, AnyReactorDefinition>();
  const hosts = new WeakMap<AnyReactorDefinition, ExecutionHost>();

  const engine: Engine = {
    store,
    queue,
    clock,
    logger,
    owner,
    register(definition) {
      let host = hosts.get(definition);
      if (host === undefined) {
        const machine = createExecutionMachine({
          reactor: definition.name,
          steps: definition.plan.map((s) => ({ name: s.name, retry: s.retry, tracked: s.tracked })),
          handoffIndex: definition.handoff?.index ?? null,
        });
        host = new ExecutionHost(definition, machine, { store, clock, hooks, logger, queue });
        hosts.set(definition, host);
        reactors.set(definition.name, definition);
      }
      return host;
    },
    definition(reactor) {
      const definition = reactors.get(reactor);
      if (definition === undefined) throw new UnknownReactorError(reactor);
      return definition;
    },
    async load(id) {
      const loaded = await store.load(id);
      if (loaded === undefined) throw new ExecutionNotFoundError(id);
      const definition = engine.definition((loaded.snapshot.context as { reactor: string }).reactor);
      const host = engine.register(definition);
      const held = await host.load(id);
      if (held === undefined) throw new ExecutionNotFoundError(id);
      return { definition, host, held };
    },
    async withLease(id, work) {
      if (!(await store.acquireLease(id, owner, leaseTtlMs))) return undefined;
      const stopRenewing = clock.every(Math.max(1, Math.floor(leaseTtlMs / 3)), () => {
        store.acquireLease(id, owner, leaseTtlMs).then(
          (renewed) => {
            if (!renewed) logger.error({ event: 'xreactor.lease.lost', executionId: id, owner }, 'lease taken by another owner');
          },
          (error: unknown) => logger.warn({ event: 'xreactor.lease.renew_failed', executionId: id, err: error }, 'lease renewal failed'),
        );
      });
      try {
        return { value: await work() };
      } finally {
        stopRenewing();
        await store.releaseLease(id, owner);
      }
    },
  };
  for (const definition of options.reactors ?? []) engine.register(definition);
  return engine;
}
