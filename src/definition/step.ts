import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { ExecutionId } from '../internal/ids.js';
import type { StepValue } from './outcomes.js';
import type { RetryOptions } from './retry.js';

/** Any Standard Schema validator (zod, valibot, arktype, ...). */
export type AnySchema = StandardSchemaV1<any, any>;

/** The output type of a Standard Schema. */
export type SchemaOutput<S> = S extends StandardSchemaV1<any, infer O> ? O : never;

/** The input type of a Standard Schema: what it accepts before validation. */
export type SchemaInput<S> = S extends StandardSchemaV1<infer I, any> ? I : never;

/** What a step handler receives besides its arguments. */
export interface StepContext<TInput = unknown> {
  /** The execution being advanced. */
  readonly executionId: ExecutionId;
  /** The reactor's name. */
  readonly reactor: string;
  /** This step's name. */
  readonly step: string;
  /** 1-based attempt number of the body (always 1 in compensate / undo). */
  readonly attempt: number;
  /** Fires when the run is interrupted; long bodies should stop early. */
  readonly signal: AbortSignal;
  /** All reactor inputs. */
  readonly inputs: Readonly<TInput>;
}

/** A step body. Returns a value, or an outcome built with `fail`, `halt` or `skip`. */
export type RunHandler<TArgs, TInput, R> = (args: TArgs, ctx: StepContext<TInput>) => R | Promise<R>;

/**
 * The failing step's own cleanup, called once after its last attempt failed
 * (only if its body started). Returning `fail(...)` or throwing is reported in
 * `rollbackFailures` and does not stop the rollback.
 */
export type CompensateHandler<TArgs, TInput> = (
  error: Error,
  args: TArgs,
  ctx: StepContext<TInput>,
) => unknown;

/** Rollback of a completed step when a later step fails. Failures are reported, never fatal. */
export type UndoHandler<TValue, TArgs, TInput> = (
  result: TValue,
  args: TArgs,
  ctx: StepContext<TInput>,
) => unknown;

/** Handlers and policies a step carries, whether inline or reusable. */
export interface StepHandlers<TArgs, TInput, R> {
  /** The step body. */
  readonly run: RunHandler<TArgs, TInput, R>;
  /** Cleanup when this step fails. */
  readonly compensate?: CompensateHandler<TArgs, TInput>;
  /** Rollback when a later step fails. */
  readonly undo?: UndoHandler<StepValue<Awaited<R>>, TArgs, TInput>;
  /** Validates the value the body returned; a violation fails the step after its body ran (compensated). */
  readonly output?: AnySchema;
  /** Retry policy. Absent: one attempt. */
  readonly retries?: RetryOptions;
}

/** Plain data describing a reusable step (the gem's step classes). */
export interface StepDefinition<TArgs = any, TValue = any> {
  readonly kind: 'step-definition';
  /** Name used in error messages. */
  readonly name: string;
  /** Input contract applied to the step's arguments before every attempt. */
  readonly input: AnySchema | undefined;
  readonly handlers: StepHandlers<TArgs, any, any>;
  /** Phantom: the value the step produces. */
  readonly __value?: TValue;
}

/** Options of {@link defineStep}. */
export interface DefineStepOptions<S extends AnySchema | undefined, TArgs, R> extends StepHandlers<TArgs, unknown, R> {
  /** Name used in error messages. */
  readonly name: string;
  /** Input contract. The step receives its output. */
  readonly input?: S;
}

/**
 * Define a reusable step with its own input contract and retry policy, to use
 * in many reactors via `builder.step(name, definition, { args })`.
 * @example
 * const chargeCard = defineStep({
 *   name: 'chargeCard',
 *   input: z.object({ cardToken: z.string(), amountCents: z.number().int().positive() }),
 *   retries: { maxAttempts: 3, backoff: 'exponential', baseDelayMs: 200 },
 *   run: ({ cardToken, amountCents }) => payments.charge(cardToken, amountCents),
 *   undo: (charge) => payments.refund(charge.id),
 * });
 */
export function defineStep<S extends AnySchema, R>(
  options: DefineStepOptions<S, SchemaOutput<S>, R> & { readonly input: S },
): StepDefinition<SchemaOutput<S>, StepValue<Awaited<R>>>;
export function defineStep<TArgs, R>(
  options: DefineStepOptions<undefined, TArgs, R>,
): StepDefinition<TArgs, StepValue<Awaited<R>>>;
export function defineStep(options: DefineStepOptions<AnySchema | undefined, any, any>): StepDefinition {
  const { name, input, ...handlers } = options;
  return Object.freeze({ kind: 'step-definition', name, input, handlers });
}
