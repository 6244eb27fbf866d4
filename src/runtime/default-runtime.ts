import type { AnyReactorDefinition } from '../definition/compiled.js';
import type { CancelledResult, DispatchedResult, ExecutionView } from './results.js';
import type { Runtime, RunInput, RunOptions, RunReturn } from './runtime.js';
import { createRuntime } from './runtime.js';

let current: Runtime | undefined;

/** The process-wide embedded runtime (memory store), created on first use. */
export function defaultRuntime(): Runtime {
  current ??= createRuntime();
  return current;
}

/**
 * Run a reactor on the embedded default runtime.
 * @example
 * const result = await run(checkout, { sku: 'A1', cents: 1200 });
 */
export function run<R extends AnyReactorDefinition>(reactor: R, input: RunInput<R>, options?: RunOptions): Promise<RunReturn<R>> {
  return defaultRuntime().run(reactor, input, options);
}

/** Find an execution of the embedded default runtime. */
export function find(id: string): Promise<ExecutionView> {
  return defaultRuntime().find(id);
}

/** Undo an execution of the embedded default runtime (`dispatched` while workers finish its rollback: see `Runtime.undo`). */
export function undo(id: string): Promise<CancelledResult | DispatchedResult> {
  return defaultRuntime().undo(id);
}
