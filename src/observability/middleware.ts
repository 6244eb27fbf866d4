import type { Logger } from 'pino';

/** Fields every middleware event carries. */
export interface HookBase {
  readonly reactor: string;
  readonly executionId: string;
  /** Compose steps from the root to this execution (empty for a root execution). */
  readonly path: readonly string[];
}

/** Events of a step's body and rollback handlers. */
export interface StepHook extends HookBase {
  readonly step: string;
  /**
   * `compose` for a compose step, `map` for a map step (a child's or element's own steps report
   * their own events); `asyncStep` for an async step's body and compensate, reported from the
   * unit's own job with its owner's reactor, execution and path; `asyncReactor` for its dispatch.
   */
  readonly kind: 'step' | 'compose' | 'interrupt' | 'map' | 'asyncStep' | 'asyncReactor';
  readonly attempt: number;
  readonly args: unknown;
}

/**
 * Observers of an execution. Every hook is optional; return values are
 * ignored; a hook that throws (or rejects) is logged and never breaks the run.
 */
export interface Middleware {
  readonly reactorStart?: (event: HookBase & { readonly input: unknown }) => unknown;
  readonly reactorComplete?: (event: HookBase & { readonly status: 'completed' | 'halted'; readonly value: unknown }) => unknown;
  readonly reactorFail?: (event: HookBase & { readonly error: Error }) => unknown;
  readonly stepStart?: (event: StepHook) => unknown;
  readonly stepComplete?: (event: StepHook & { readonly outcome: 'succeeded' | 'skipped' | 'halted'; readonly result: unknown }) => unknown;
  readonly stepFail?: (event: StepHook & { readonly error: Error }) => unknown;
  readonly retryAttempt?: (event: StepHook & { readonly error: Error; readonly delayMs: number; readonly nextAttempt: number }) => unknown;
  readonly compensateStart?: (event: StepHook & { readonly error: Error }) => unknown;
  readonly compensateComplete?: (event: StepHook) => unknown;
  readonly compensateFail?: (event: StepHook & { readonly error: Error }) => unknown;
  readonly undoStart?: (event: StepHook & { readonly result: unknown }) => unknown;
  readonly undoComplete?: (event: StepHook) => unknown;
  readonly undoFail?: (event: StepHook & { readonly error: Error }) => unknown;
  /**
   * Before a job is enqueued for this execution (background hand-off, resume, retry, fan-out).
   * A hand-off job is sent alongside the commit that asks for it: for a run handed off at its
   * start (`background: { all: true }`) this hook fires before `reactorStart`, and it fires
   * even when that creating commit is then refused (an id that exists).
   */
  readonly beforeEnqueue?: (event: HookBase & { readonly job: string }) => unknown;
  /** The execution waits for other actors (a compose step's child, later a map or a unit) and holds no worker. */
  readonly awaiting?: (event: HookBase & { readonly step: string; readonly actors: readonly string[] }) => unknown;
  /** The execution waits for time (a retry backoff) with a delayed wake. */
  readonly parked?: (event: HookBase & { readonly step: string; readonly attempt: number; readonly delayMs: number }) => unknown;
  /**
   * A map step's progress, once per map commit that changes it (bounded: about two per throw),
   * from the process advancing the map. `HookBase` is the execution holding the map step.
   */
  readonly mapProgress?: (event: MapProgressHook) => unknown;
}

/** The event of the `mapProgress` hook. */
export interface MapProgressHook extends HookBase {
  readonly step: string;
  /** The map operation actor (`<execution>.<step>`). */
  readonly map: string;
  /**
   * `throw`: a throw created its elements; `settled`: every dispatched position settled (the
   * forward phase ended: see `outcome`); `rollback_started`, `rollback_throw`, `rolled_back`: the
   * same for its rollback.
   */
  readonly event: 'throw' | 'settled' | 'rollback_started' | 'rollback_throw' | 'rolled_back';
  /** The throw (forward or rollback) this event is about. */
  readonly throw?: number;
  /** Elements in the source (null while a paged source without a count has not ended). */
  readonly total: number | null;
  /** Positions dispatched so far. */
  readonly dispatched: number;
  /** Positions settled (reported) so far. */
  readonly settled: number;
  /** How the forward phase ended (`settled` only). */
  readonly outcome?: 'completed' | 'failed' | 'halted' | 'aborted';
  /** The rollback's positions and how many reported (rollback events). */
  readonly rollback?: { readonly total: number; readonly settled: number };
}

/** The name of a middleware hook. */
export type HookName = keyof Middleware;
/** The event a hook receives. */
export type HookEvent<K extends HookName> = Parameters<NonNullable<Middleware[K]>>[0];

/** Calls every middleware's hook, isolating failures. */
export interface Hooks {
  emit<K extends HookName>(name: K, event: HookEvent<K>): void;
  /** Whether any middleware implements the hook (so callers can skip building the event). */
  has(name: HookName): boolean;
}

/** Build the hook dispatcher for a list of middlewares. */
export function createHooks(middlewares: readonly Middleware[], logger: Logger): Hooks {
  const report = (name: HookName, error: unknown) =>
    logger.error({ event: 'xreactor.middleware.failed', hook: name, err: error }, `middleware failed during ${name}`);
  const implemented = new Set<HookName>();
  for (const m of middlewares) for (const key of Object.keys(m)) implemented.add(key as HookName);
  return {
    has: (name) => implemented.has(name),
    emit(name, event) {
      if (!implemented.has(name)) return;
      for (const m of middlewares) {
        const hook = m[name] as ((e: typeof event) => unknown) | undefined;
        if (hook === undefined) continue;
        try {
          const out = hook.call(m, event);
          if (out instanceof Promise) out.catch((error: unknown) => report(name, error));
        } catch (error) {
          report(name, error);
        }
      }
    },
  };
}
