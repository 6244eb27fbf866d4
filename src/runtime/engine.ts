import { randomUUID } from 'node:crypto';
import pino from 'pino';
import type { Logger } from 'pino';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import { DefinitionError, DeserializationError, ExecutionNotFoundError, PlanMismatchError, StaleRevisionError, UnknownReactorError, XreactorError } from '../errors/index.js';
import { describePlanMismatch } from '../definition/fingerprint.js';
import { findMapStep } from '../definition/compile-map.js';
import { ElementRollbackHost, MapHost } from './map-host.js';
import { UnitHost } from './unit-host.js';
import { reactorMachine } from './reactor-machine.js';
import { jobId } from '../queue/job-ids.js';
import type { Middleware } from '../observability/middleware.js';
import { createActorInspector } from '../observability/inspector.js';
import type { InspectionObserver } from '../observability/inspector.js';
import { createHooks } from '../observability/middleware.js';
import type { Queue } from '../queue/queue.js';
import type { AcquireAndLoadOptions, LoadedActor, LoadedExecution, PersistedSnapshot, Store } from '../store/store.js';
import type { Clock } from '../internal/clock.js';
import { systemClock } from '../internal/clock.js';
import { ExecutionHost } from './host.js';
import { statusOf } from '../../machines/registry.js';
import type { HeldExecution } from './host.js';
import type { HeldActor, KernelDeps, KindHost, LeasedActor, SweepVerdict } from './actor-host.js';
import { sweepExecution } from './execution-sweep.js';
import { HeldLease } from './lease.js';

/** Options shared by runtimes and workers. */
export interface EngineOptions {
  readonly store: Store;
  readonly queue: Queue | undefined;
  /**
   * How an unknown reactor's error names this process and what to do (a worker, the CLI).
   * @internal
   * @defaultValue `{ who: 'this runtime', fix: 'pass it to createRuntime({ reactors })' }`
   */
  readonly unknownReactor?: { readonly who: string; readonly fix: string };
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
   * An XState inspection observer (the `inspect` of `@statelyai/inspect`'s inspectors, or any
   * observer of XState inspection events): every live actor this process advances appears as its
   * own actor, a composed child linked to its parent, with its events and committed snapshots.
   * See docs/inspector.md.
   */
  readonly inspect?: InspectionObserver;
  /**
   * How long a liveness lease lasts without renewal; renewed every third of it.
   * @defaultValue 30000
   */
  readonly leaseTtlMs?: number;
  /**
   * Fan-out maps: how long a map may wait with dispatched elements (or rollback positions)
   * unsettled and no report before the sweeper restarts the start jobs of those not started (lost
   * jobs, or jobs that failed for good). A restart is harmless when the job was only slow.
   * @defaultValue 5 × leaseTtlMs
   */
  readonly mapStallMs?: number;
  /**
   * Map rollbacks: lease checks of an element another process still holds before its rollback
   * reports `element_in_flight` (the element is then left as it is).
   * @defaultValue 20
   */
  readonly lockSnoozeMaxAttempts?: number;
  /**
   * Map rollbacks: the pause between two lease checks of a held element (a delayed job in a worker).
   * @defaultValue 5000
   */
  readonly lockSnoozeDelayMs?: number;
  /**
   * Async units: how long a step run in a caller (an inline `run()`, `continue()`) waits for an
   * async unit it reads to settle before it fails with an `AsyncWaitTimeoutError`.
   * @defaultValue 30000
   */
  readonly asyncWaitTimeoutMs?: number;
  /**
   * Async units: how long, from the unit's dispatch, a step run in a worker may wait for an async
   * unit it reads (the execution waits `awaiting`, holding no worker) before it fails with an
   * `AsyncWaitTimeoutError`. `Infinity`: no limit.
   * @defaultValue 3600000 (one hour)
   */
  readonly asyncParkTimeoutMs?: number;
}

/** The parts a runtime and a worker share: store, queue, hosts per reactor, leases. */
export interface Engine {
  readonly store: Store;
  readonly queue: Queue | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * This engine's id. Each lease it takes names its own owner, `<owner>:<n>`: two jobs of one run
   * handled at once by the same worker exclude each other exactly as two processes do, and one
   * job's release never drops a lease another job still works under.
   */
  readonly owner: string;
  register(definition: AnyReactorDefinition): ExecutionHost;
  /**
   * The registered definition of `reactor` at `version` (default: the highest registered).
   * @throws UnknownReactorError
   */
  definition(reactor: string, version?: number): AnyReactorDefinition;
  /**
   * The definition an execution must resume on: its reactor at the version it started with, with
   * the plan it started with.
   * @throws UnknownReactorError, PlanMismatchError (both retryable for a worker: another build may advance it)
   */
  definitionOf(context: { readonly reactor: string; readonly version?: number; readonly fingerprint?: string; readonly origin?: { readonly version: number; readonly fingerprint: string } }): AnyReactorDefinition;
  /** Load an execution with the host of its reactor. */
  load(id: string): Promise<{ definition: AnyReactorDefinition; host: ExecutionHost; held: HeldExecution }>;
  /** A lease on execution `id` for this process, not taken yet (see {@link HeldLease}). */
  lease(id: string): HeldLease;
  /**
   * Take an actor's lease and load it, in one store call, with the host of its kind (by the stored
   * snapshot's kind: an execution's is its reactor's host, at the version and plan it started
   * with). `busy`: another live owner holds the lease; `missing`: no such actor (yet: a hand-off
   * job can reach a worker before the commit that asked for it lands). Nothing is taken in
   * either case. The held actor carries the lease. With `undoTop`, an execution also carries its
   * undo stack's top entry (`HeldExecution.undoTop`), read in the same call. With `unlessExists`
   * (an actor not created yet, asking from its start job), nothing is taken when that actor
   * exists: StaleRevisionError for it, the refusal its creating commit would have met.
   * @throws DeserializationError (the lease is not kept), UnknownReactorError, PlanMismatchError,
   * XreactorError `actor_kind_unknown` (retryable) for a kind this engine has no host for
   */
  loadLeased(lease: HeldLease, options?: AcquireAndLoadOptions): Promise<LeasedActor | 'busy' | 'missing'>;
  /**
   * Register the host of a kind of actor other than executions (map operations, element
   * rollbacks): its jobs, wakes and sweeps go to it. `create` builds it on the engine's services.
   * Register a kind before a job handler is created on the engine (`createJobHandler`).
   * @throws DefinitionError when the kind is `execution` or registered already
   */
  registerKind<H extends HeldActor>(kind: string, create: (deps: KernelDeps) => KindHost<H>): KindHost<H>;
  /** The kinds of actor this engine advances: `execution` and every registered one. */
  kinds(): readonly string[];
  /** The host of a registered kind other than `execution` (undefined for one not registered). */
  kindHost(kind: string): KindHost | undefined;
  /**
   * Run `work` holding the execution's liveness lease, renewed while it runs.
   * Returns undefined (without running `work`) when another live owner holds it.
   */
  withLease<T>(id: string, work: (lease: HeldLease) => Promise<T>): Promise<{ value: T } | undefined>;
  /**
   * Re-enqueue up to `limit` executions that are running or rolling back with
   * no live lease (their process died). Aborted runs are never resumed.
   * Returns how many were re-enqueued.
   */
  sweepOnce(limit: number): Promise<number>;
}

/** Build an engine. */
export function createEngine(options: EngineOptions): Engine {
  const { store, queue } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: process.env['XREACTOR_LOG_LEVEL'] ?? 'warn' });
  const hooks = createHooks(options.middleware ?? [], logger);
  const leaseTtlMs = options.leaseTtlMs ?? 30_000;
  const owner = randomUUID();
  const inspector = createActorInspector(options.inspect, {
    onError: (error) => logger.error({ event: 'xreactor.inspector.failed', err: error }, 'the inspection observer threw'),
  });
  let leases = 0;
  const reactors = new Map<string, Map<number, AnyReactorDefinition>>();
  const hosts = new WeakMap<AnyReactorDefinition, ExecutionHost>();
  /** The hosts of the kinds other than executions, by kind. */
  const kindHosts = new Map<string, KindHost>();
  /** The host of a stored actor, by its kind (an execution's: its reactor's). */
  const hostOf = (snapshot: PersistedSnapshot): KindHost => {
    if (snapshot.kind === 'execution') return engine.register(engine.definitionOf(snapshot.context as { reactor: string }));
    const host = kindHosts.get(snapshot.kind);
    if (host === undefined) throw actorKindUnknownError(snapshot.kind, engine.kinds());
    return host;
  };
  // The kernel's services, the same for every kind's host.
  const kernel = (): KernelDeps => ({ store, queue, clock, logger, lease: (id) => engine.lease(id), loadLeased: (lease, options) => engine.loadLeased(lease, options) });

  /**
   * The hosts of map operations and element rollbacks, registered with the first reactor that has
   * a map step (an engine without maps keeps only the kinds it was given).
   */
  let mapHosts: { readonly map: MapHost; readonly rollbacks: ElementRollbackHost } | undefined;
  const mapKinds = (): { readonly map: MapHost; readonly rollbacks: ElementRollbackHost } => {
    if (mapHosts !== undefined) return mapHosts;
    const deps = (kernelDeps: KernelDeps) => ({
      ...kernelDeps,
      definitionOf: (ref: { reactor: string; version: number; fingerprint: string }) => engine.definitionOf(ref),
      hostFor: (definition: AnyReactorDefinition) => engine.register(definition),
      rollbacks: () => rollbacks,
      hooks,
      stallMs: options.mapStallMs ?? 5 * leaseTtlMs,
      lockSnoozeMaxAttempts: options.lockSnoozeMaxAttempts ?? 20,
      lockSnoozeDelayMs: options.lockSnoozeDelayMs ?? 5_000,
    });
    const map = engine.registerKind('map', (kernelDeps) => new MapHost(deps(kernelDeps))) as MapHost;
    const rollbacks = engine.registerKind('element-rollback', (kernelDeps) => new ElementRollbackHost(deps(kernelDeps))) as ElementRollbackHost;
    mapHosts = { map, rollbacks };
    return mapHosts;
  };

  /** The host of async units, registered with the first reactor that has an async step (at any depth). */
  let unitHost: UnitHost | undefined;
  const unitKind = (): UnitHost => {
    unitHost ??= engine.registerKind(
      'unit',
      (kernelDeps) =>
        new UnitHost({
          ...kernelDeps,
          hooks,
          definitionOf: (ref) => engine.definitionOf(ref),
          stallMs: options.mapStallMs ?? 5 * leaseTtlMs,
          inspector,
        }),
    ) as UnitHost;
    return unitHost;
  };

  const engine: Engine = {
    sweepOnce: () => Promise.resolve(0),
    store,
    queue,
    clock,
    logger,
    owner,
    register(definition) {
      let host = hosts.get(definition);
      if (host === undefined) {
        if (findMapStep(definition) !== undefined) mapKinds();
        if (definition.plan.some((step) => step.kind === 'asyncStep')) unitKind();
        const machine = reactorMachine(definition);
        host = new ExecutionHost(definition, machine, {
          store,
          clock,
          hooks,
          logger,
          queue,
          inspector,
          hostFor: (child) => engine.register(child),
          lease: (id) => engine.lease(id),
          loadLeased: (lease, options) => engine.loadLeased(lease, options),
          mapHost: () => mapKinds().map,
          unitHost: unitKind,
          asyncWaitTimeoutMs: options.asyncWaitTimeoutMs ?? 30_000,
          asyncParkTimeoutMs: options.asyncParkTimeoutMs ?? 3_600_000,
        });
        hosts.set(definition, host);
        const versions = reactors.get(definition.name) ?? new Map<number, AnyReactorDefinition>();
        const other = versions.get(definition.version);
        if (other !== undefined && other !== definition && other.fingerprint !== definition.fingerprint) {
          throw new DefinitionError(
            `reactor "${definition.name}" version ${definition.version} is registered twice with different plans (${other.fingerprint}, ${definition.fingerprint}); give the changed definition its own version`,
            { reactor: definition.name },
          );
        }
        versions.set(definition.version, definition);
        reactors.set(definition.name, versions);
        // Composed children are addressable by id too (find, the dashboard).
        for (const step of definition.steps) if (step.child !== undefined) engine.register(step.child);
      }
      return host;
    },
    definition(reactor, version) {
      const versions = reactors.get(reactor);
      const known = [...(versions?.keys() ?? [])].sort((a, b) => a - b);
      const definition = version === undefined ? versions?.get(known.at(-1) ?? 0) : versions?.get(version);
      if (definition === undefined) throw new UnknownReactorError(reactor, version, known, options.unknownReactor);
      return definition;
    },
    definitionOf(context) {
      // An execution's context keeps them in `origin`; a map's element reference at the top.
      const version = context.origin?.version ?? context.version ?? 1;
      const fingerprint = context.origin?.fingerprint ?? context.fingerprint;
      const definition = engine.definition(context.reactor, version);
      if (fingerprint !== undefined && fingerprint !== '' && fingerprint !== definition.fingerprint) {
        throw new PlanMismatchError(describePlanMismatch(context.reactor, definition.version, fingerprint, definition.fingerprint), context.reactor);
      }
      return definition;
    },
    async load(id) {
      // The snapshot and the input in parallel: two reads, one round trip of waiting.
      const [loaded, input] = await Promise.all([
        store.load(id),
        store.readInput(id).then(
          (value) => ({ value }),
          () => undefined,
        ),
      ]);
      if (loaded === undefined) throw new ExecutionNotFoundError(id);
      const definition = engine.definitionOf(loaded.snapshot.context as { reactor: string });
      const host = engine.register(definition);
      const held = await host.load(id, loaded, input);
      if (held === undefined) throw new ExecutionNotFoundError(id);
      return { definition, host, held };
    },
    lease(id) {
      return new HeldLease({ store, clock, logger }, id, { owner: `${owner}:${(leases += 1)}`, ttlMs: leaseTtlMs });
    },
    async loadLeased(lease, options) {
      const found = await store.acquireAndLoad(lease.id, lease.request, options);
      if (found.status === 'exists') {
        const asker = options?.unlessExists ?? lease.id;
        throw new StaleRevisionError(asker, 0, 0, { code: 'stale_revision', message: `actor ${asker} exists already (its start job was delivered again): it is read from the store instead` });
      }
      if (found.status !== 'leased') return found.status;
      lease.taken();
      try {
        const { kind } = found.execution.snapshot;
        const host = hostOf(found.execution.snapshot);
        const held = await host.load(lease.id, found.execution, { value: found.input });
        if (held === undefined) throw new ExecutionNotFoundError(lease.id);
        held.lease = lease;
        if (found.undoTop !== undefined && kind === 'execution') (held as HeldExecution).undoTop = found.undoTop;
        return { kind, loop: host.loop, held };
      } catch (error) {
        await lease.end();
        throw error;
      }
    },
    registerKind(kind, create) {
      if (kind === 'execution' || kindHosts.has(kind)) throw new DefinitionError(`actor kind "${kind}" is registered already on this engine`);
      const host = create(kernel());
      kindHosts.set(kind, host);
      return host;
    },
    kinds() {
      return ['execution', ...kindHosts.keys()];
    },
    kindHost(kind) {
      return kindHosts.get(kind);
    },
    async withLease(id, work) {
      const lease = engine.lease(id);
      if (!(await store.acquireLease(id, lease.request.owner, leaseTtlMs))) return undefined;
      lease.taken();
      try {
        return { value: await work(lease) };
      } finally {
        await lease.end();
      }
    },
  };
  /**
   * What a sweep finds under `id`: the execution; undefined when it is unknown or unreadable
   * (logged, and failed in the store: `markUnreadable`); 'not_here' when it was written by a
   * build this one does not know (logged).
   */
  const look = async (id: string): Promise<LoadedActor | undefined | 'not_here'> => {
    try {
      return await store.load(id);
    } catch (error) {
      if (!(error instanceof DeserializationError)) throw error;
      if (error.retryable) {
        logger.warn({ event: 'xreactor.execution.not_here', executionId: id, err: error }, error.message);
        return 'not_here';
      }
      logger.error({ event: 'xreactor.sweeper.unreadable', executionId: id, err: error }, error.message);
      await store.markUnreadable(id, { code: error.code, message: error.message });
      return undefined;
    }
  };
  /**
   * What a sweep does for a listed actor with no live lease (see {@link SweepVerdict}): each kind
   * answers for its own actors; one this build cannot read, or of a kind it has no host for, is
   * kept for a build that can; one that is gone is dropped.
   */
  const verdict = async (id: string, found: LoadedExecution | undefined | 'not_here'): Promise<SweepVerdict> => {
    if (found === 'not_here') return { action: 'keep' };
    if (found === undefined) return { action: 'drop' };
    const { kind } = found.snapshot;
    // An execution's verdict reads only its stored snapshot: it does not need the reactor.
    if (kind === 'execution') return sweepExecution(id, found, look, clock.now());
    const host = kindHosts.get(kind);
    if (host === undefined) return { action: 'keep' };
    return host.sweep(id, found, look);
  };
  // Where the next sweep starts in the index: each sweep looks at the next `limit` entries, from
  // the oldest again after the last, so runs behind many live ones are reached too.
  let sweepFrom: string | undefined;
  engine.sweepOnce = async (limit) => {
    if (queue === undefined) return 0;
    let requeued = 0;
    const page = await store.listActive(limit, sweepFrom);
    sweepFrom = page.next;
    for (const id of page.ids) {
      const loaded = await look(id);
      const decision = await verdict(id, loaded);
      if (decision.action === 'drop') {
        await store.markActive(id, false);
        // Look again after the removal: an actor continued, undone or signalled meanwhile commits
        // first and lists itself again after; whichever of the two comes last, it stays listed.
        const again = await look(id);
        if ((await verdict(id, again)).action !== 'drop') await store.markActive(id, true);
        continue;
      }
      if (decision.action === 'keep' || loaded === undefined || loaded === 'not_here') continue;
      // Leased when it was read: a live process advances it.
      if (loaded.leased) continue;
      if (loaded.marked) {
        // Failed in the store though its snapshot reads (its input or outbox did not): no job can advance it.
        await store.markActive(id, false);
        continue;
      }
      // A delivered event is the verdict on this revision (the actor read, then what it waits for,
      // in two reads): it applies only while the actor is still there.
      const event = decision.action === 'deliver' ? decision.event : undefined;
      // One id per revision and lease period: sweeps within a lease TTL add nothing, and a sweep
      // job that failed for good (its worker died on every delivery) never blocks a later sweep.
      await queue.enqueue([{ id: jobId(id, 'sweep', loaded.revision, Math.floor(clock.now() / leaseTtlMs)), kind: 'advance', actor: { kind: loaded.snapshot.kind, id }, ...(event === undefined ? {} : { event, ifRevision: loaded.revision }) }]);
      logger.info({ event: 'xreactor.sweeper.requeued', executionId: id, kind: loaded.snapshot.kind, status: statusOf(loaded.snapshot.kind, loaded.snapshot.value), revision: loaded.revision }, 'requeued an actor with no live lease');
      requeued += 1;
    }
    return requeued;
  };
  for (const definition of options.reactors ?? []) engine.register(definition);
  return engine;
}

/** The error for an actor of a kind this engine has no host for (retryable: a build that has one advances it). */
function actorKindUnknownError(kind: string, known: readonly string[]): XreactorError {
  return new XreactorError('actor_kind_unknown', `this build advances actor kinds ${known.join(', ')}, not "${kind}"; a build that knows kind "${kind}" must advance it, and the actor is left as it is`, {
    retryable: true,
  });
}
