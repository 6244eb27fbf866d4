/**
 * xreactor: durable saga/workflow runtime. Define reactors (DAGs of steps with
 * run, compensate and undo) and run them embedded, with exact rollback semantics.
 */
export { defineReactor, ReactorBuilder } from './definition/reactor.js';
export type { DefineReactorOptions, InlineStepConfig, AsyncStepConfig, StepUse, RunArgs, ComposeMode } from './definition/reactor.js';
export type { AsyncOutcome } from './definition/async-unit.js';
export { paged } from './definition/map.js';
export type {
  MapOptions,
  ElementHelpers,
  PagedOptions,
  PagedSource,
  PageArgs,
  ElementArgs,
  ElementItemsCheck,
  ElementReactorCheck,
  MapValue,
  MapMode,
} from './definition/map.js';
export type { MapResults, ElementResult, CompletedElement } from './definition/map-results.js';
export { defineStep } from './definition/step.js';
export type {
  AnySchema,
  StepContext,
  StepDefinition,
  DefineStepOptions,
  RunHandler,
  CompensateHandler,
  UndoHandler,
} from './definition/step.js';
export { fail, halt, skip } from './definition/outcomes.js';
export type { Fail, Halt, Skip, StepValue } from './definition/outcomes.js';
export { ArgumentSource } from './definition/sources.js';
export type { SourceHelpers, Path, PathValue } from './definition/sources.js';
export type { RetryOptions, RetryPolicy, Backoff } from './definition/retry.js';
export type {
  ReactorDefinition,
  AnyReactorDefinition,
  CompiledStep,
  InputOf,
  OutputOf,
  ResultsOf,
  ModeOf,
  RunMode,
  BackgroundCut,
  Handoff,
  WithModes,
  CompiledMap,
  CompiledMapSource,
  PageContext,
  PageFn,
  CountFn,
  CollectFn,
  UndoAllFn,
} from './definition/compiled.js';
export { toGraph } from './definition/graph.js';
export { reactorMachine } from './runtime/reactor-machine.js';
export type { ExecutionMachine } from '../machines/execution.js';
export { planFingerprint, describePlanMismatch } from './definition/fingerprint.js';
export type { ReactorGraph, StepGraphNode, MapGraphNode } from './definition/graph.js';

export { createRuntime } from './runtime/runtime.js';
export type { Runtime, RuntimeOptions, RunOptions, RunInput, RunOutput, RunReturn, AwaitOptions } from './runtime/runtime.js';
export { createWorker } from './runtime/worker.js';
export type { Worker, WorkerOptions } from './runtime/worker.js';
export type { Backend } from './runtime/backend.js';
export { run, find, undo, defaultRuntime } from './runtime/default-runtime.js';
export type { Clock } from './internal/clock.js';
export { systemClock } from './internal/clock.js';
export type {
  RunResult,
  CompletedResult,
  FailedResult,
  HaltedResult,
  CancelledResult,
  DispatchedResult,
  ExecutionView,
  MapProgress,
  RollbackFailureReport,
} from './runtime/results.js';

export { createMemoryStore } from './store/memory-store.js';
export type { MemoryStoreOptions } from './store/memory-store.js';
export type {
  Store,
  UndoEntry,
  PersistedSnapshot,
  Commit,
  CommitWrites,
  LoadedActor,
  LoadedExecution,
  CreateExecution,
  OutboxEffect,
  LeaseRequest,
  CommitOptions,
  CreateOptions,
  AcquireAndLoadOptions,
  LeasedLoad,
  SettledWait,
  ActivePage,
  Signal,
  SignalEvent,
  InboxEntry,
  DeliveredSignal,
  Inbox,
  SpawnActor,
  SignalReceipt,
  UnreadableRecord,
  UnreadableMark,
  MapWrites,
  MapStats,
  MapGate,
  MapPageEntry,
  ElementOutcome,
  RollbackOutcome,
  SignalCondition,
} from './store/store.js';
export type { Queue, JobSpec, JobHandler, Consumer, ConsumeOptions, EnqueueOptions, ActorAddress, JobKind } from './queue/queue.js';

export type { Middleware, HookBase, StepHook, HookName, MapProgressHook } from './observability/middleware.js';
export { stepLog } from './observability/step-log.js';
export type { StepLogOptions } from './observability/step-log.js';
export { createActorInspector } from './observability/inspector.js';
export type { ActorInspector, ActorInspectorOptions, InspectedActor, InspectedActorRef, InspectionObserver } from './observability/inspector.js';
export { EXECUTION_STATE_TAGS, executionTagsOf } from '../machines/execution.js';
export type { ActorStatus, ActorTag } from '../machines/registry-types.js';
export type { ExecutionStatus, TraceEntry, RollbackFailure } from '../machines/execution-types.js';
export { EXECUTION_MACHINE_VERSION } from '../machines/execution-types.js';
export type { ExecutionId } from './internal/ids.js';

export * from './errors/index.js';
export { RecordedError } from './serialization/errors.js';
