/**
 * The one converter between Error objects and plain data. Everything that stores or sends an
 * error goes through `serializeError` / `deserializeError`, so xreactor classes come back as the
 * same class and user classes come back as a {@link RecordedError}.
 */
import type { FieldIssue, XreactorErrorOptions } from '../errors/index.js';
import {
  ArgumentResolutionError, CompensationError, DefinitionError, DependencyError, DeprecatedOptionError,
  DeserializationError, ExecutionAbortedError, ExecutionNotFoundError, InputValidationError, InvalidStateError,
  OutputValidationError, StaleRevisionError, StepFailure, UndoError, UnknownReactorError, XreactorError,
  WorkInterruptedError, AwaitTimeoutError, QueueRequiredError, InterruptTimeoutError, AsyncWaitTimeoutError, RedisUnavailableError,
} from '../errors/index.js';

/** An error as plain data: what is stored and sent instead of an Error object. */
export interface SerializedError {
  /** Registry key: the error's `name`, or its class name when `name` is only inherited from a built-in. */
  readonly name: string;
  readonly code?: string;
  readonly message: string;
  /** Capped at {@link MAX_STACK_FRAMES} frames. */
  readonly stack?: string;
  readonly step?: string;
  readonly reactor?: string;
  readonly retryable?: boolean;
  readonly cause?: SerializedError;
  readonly issues?: readonly FieldIssue[];
  /** StepFailure detail, or the thrown value when `name` is {@link NON_ERROR_THROWN}. Carried as given. */
  readonly detail?: unknown;
  readonly executionId?: string;
  /** Own enumerable properties the fields above do not cover. Values are carried as given. */
  readonly data?: Readonly<Record<string, unknown>>;
}

/** Builds an Error of a registered class from its serialized form. */
export type ErrorFactory = (serialized: SerializedError) => Error;

/** `name` of a serialized thrown value that was not an Error (a string, number, object, ...). */
export const NON_ERROR_THROWN = 'NonErrorThrown';
/** Persisted stacks keep at most this many frames, then a `... N more frames` line. */
export const MAX_STACK_FRAMES = 100;
/** At most this many levels of `cause` below the outermost error are kept; deeper or cyclic links are dropped. */
export const MAX_CAUSE_DEPTH = 8;

/**
 * An error of a class this process does not know (a user class such as `PaymentDeclined`, or a
 * thrown non-Error value), restored from its serialized form. `name` is the original name.
 */
export class RecordedError extends XreactorError {
  /** Name of the original class (also the value of `name`). */
  readonly originalName: string;
  /** The original's own enumerable properties. */
  readonly data: Readonly<Record<string, unknown>>;
  /** The thrown value, when the original was not an Error. */
  readonly detail: unknown;

  constructor(
    originalName: string,
    message: string,
    options: XreactorErrorOptions & { data?: Readonly<Record<string, unknown>>; detail?: unknown } = {},
  ) {
    super('recorded', message, options);
    this.name = originalName;
    this.originalName = originalName;
    this.data = options.data ?? {};
    this.detail = options.detail;
  }
}

const registry = new Map<string, ErrorFactory>();

/**
 * Registers how to rebuild errors whose serialized `name` is `name`. xreactor's own classes and
 * the JavaScript built-ins are registered here; other modules register their classes on load.
 * Message, stack, cause, step, reactor and retryable are restored after the factory returns.
 * @throws DefinitionError when `name` is already registered.
 */
export function registerErrorClass(name: string, factory: ErrorFactory): void {
  if (registry.has(name)) {
    throw new DefinitionError(`error class "${name}" is already registered for serialization; register each name once`);
  }
  registry.set(name, factory);
}

/**
 * Converts anything thrown into plain data. Errors keep their class name, message, capped
 * stack, cause chain and fields; other values become a {@link NON_ERROR_THROWN} entry whose
 * `detail` is the value. `detail` and `data` values are not converted (`encode` handles Errors
 * nested in them).
 */
export function serializeError(e: unknown): SerializedError {
  return toSerialized(e, 0, new Set());
}

/**
 * Rebuilds an Error from {@link serializeError}'s output: the same class for registered names
 * (`instanceof` works), a {@link RecordedError} otherwise. A cause that was not an Error comes
 * back as the original value.
 * @throws DeserializationError when `serialized` does not have the shape of a SerializedError.
 */
export function deserializeError(serialized: SerializedError): Error {
  return revive(serialized, 0);
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const BASE_FIELDS = ['name', 'message', 'stack', 'cause'];
const NATIVE_PROTOTYPES = new Set<unknown>(
  [Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError, AggregateError].map((c) => c.prototype),
);

function toSerialized(e: unknown, depth: number, seen: Set<unknown>): SerializedError {
  if (!isError(e)) {
    // A symbol cannot be encoded; its description is kept instead.
    return { name: NON_ERROR_THROWN, message: describeThrown(e), detail: typeof e === 'symbol' ? e.toString() : e };
  }
  seen.add(e);
  const out: Mutable<SerializedError> = { name: errorName(e), message: String(e.message) };
  if (typeof e.stack === 'string') out.stack = capStack(e.stack);
  const claimed = [...BASE_FIELDS];
  if (e instanceof XreactorError) {
    claimed.push('code', 'step', 'reactor', 'retryable');
    out.code = e.code;
    if (e.step !== undefined) out.step = e.step;
    if (e.reactor !== undefined) out.reactor = e.reactor;
    out.retryable = e.retryable;
  }
  if (e instanceof InputValidationError) {
    claimed.push('issues', 'fieldErrors');
    out.issues = e.issues.map((issue) => ({ path: [...issue.path], message: issue.message }));
  } else if (e instanceof StepFailure) {
    claimed.push('detail');
    if (e.detail !== undefined) out.detail = e.detail;
  } else if (e instanceof RecordedError) {
    claimed.push('detail', 'originalName', 'data');
    if (e.detail !== undefined) out.detail = e.detail;
  } else if (e instanceof ExecutionAbortedError || e instanceof StaleRevisionError) {
    claimed.push('executionId');
    out.executionId = e.executionId;
  }
  const entries = Object.keys(e)
    .filter((key) => !claimed.includes(key))
    .map((key) => [key, (e as unknown as Record<string, unknown>)[key]] as const);
  if (e instanceof AggregateError) entries.push(['errors', e.errors]);
  const data = e instanceof RecordedError ? { ...e.data, ...Object.fromEntries(entries) } : Object.fromEntries(entries);
  if (Object.keys(data).length > 0) out.data = data;
  const cause = (e as { cause?: unknown }).cause;
  if (cause !== undefined && depth < MAX_CAUSE_DEPTH && !seen.has(cause)) out.cause = toSerialized(cause, depth + 1, seen);
  return out;
}

function isError(e: unknown): e is Error {
  return e instanceof Error || Object.prototype.toString.call(e) === '[object Error]';
}

/** `class PaymentDeclined extends Error {}` inherits `name === 'Error'`; its class name says more. */
function errorName(e: Error): string {
  const className = typeof e.constructor === 'function' ? e.constructor.name : '';
  if (className !== '' && className !== e.name && !Object.hasOwn(e, 'name')) {
    let proto: unknown = Object.getPrototypeOf(e);
    while (proto !== null && !Object.hasOwn(proto as object, 'name')) proto = Object.getPrototypeOf(proto);
    if (NATIVE_PROTOTYPES.has(proto)) return className;
  }
  return typeof e.name === 'string' && e.name !== '' ? e.name : className || 'Error';
}

function describeThrown(value: unknown): string {
  if (typeof value === 'string') return value;
  let preview: string | undefined;
  try {
    preview = typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
  } catch {
    // Cyclic objects and bigint members cannot be stringified.
  }
  preview ??= Object.prototype.toString.call(value);
  return `non-Error value thrown: ${preview.length > 200 ? `${preview.slice(0, 200)}...` : preview}`;
}

function capStack(stack: string): string {
  const lines = stack.split('\n');
  let frames = 0;
  let cut = -1;
  for (let i = 0; i < lines.length; i++) {
    if (/^\s+at /.test(lines[i] ?? '') && ++frames === MAX_STACK_FRAMES + 1) cut = i;
  }
  if (cut < 0) return stack;
  return [...lines.slice(0, cut), `    ... ${frames - MAX_STACK_FRAMES} more frames`].join('\n');
}

function revive(s: SerializedError, depth: number): Error {
  assertSerializedError(s);
  const error = build(s);
  setHidden(error, 'message', s.message);
  if (s.stack === undefined) delete error.stack;
  else setHidden(error, 'stack', s.stack);
  if (s.cause !== undefined && depth < MAX_CAUSE_DEPTH) {
    setHidden(error, 'cause', s.cause.name === NON_ERROR_THROWN ? s.cause.detail : revive(s.cause, depth + 1));
  }
  if (error instanceof XreactorError) {
    Object.assign(error, { step: s.step, reactor: s.reactor, retryable: s.retryable ?? error.retryable });
  }
  return error;
}

function build(s: SerializedError): Error {
  const factory = registry.get(s.name);
  if (factory === undefined) return new RecordedError(s.name, s.message, { data: s.data, detail: s.detail });
  try {
    return factory(s);
  } catch (cause) {
    throw new DeserializationError(`a stored ${s.name} could not be rebuilt by its registered factory: the data is corrupt`, { cause });
  }
}

/** Same attributes as the engine gives `message`, `stack` and `cause`: writable, not enumerable. */
function setHidden(target: Error, key: 'message' | 'stack' | 'cause', value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, configurable: true, enumerable: false });
}

function assertSerializedError(s: unknown): asserts s is SerializedError {
  const r = s as Record<string, unknown> | null;
  const problem =
    typeof r !== 'object' || r === null ? `is ${r === null ? 'null' : typeof r}, not an object`
    : typeof r.name !== 'string' ? 'has no string "name"'
    : typeof r.message !== 'string' ? 'has no string "message"'
    : r.stack !== undefined && typeof r.stack !== 'string' ? 'has a non-string "stack"'
    : r.issues !== undefined && !Array.isArray(r.issues) ? 'has non-array "issues"'
    : r.data !== undefined && (typeof r.data !== 'object' || r.data === null) ? 'has non-object "data"'
    : r.cause !== undefined && (typeof r.cause !== 'object' || r.cause === null) ? 'has a non-object "cause"'
    : undefined;
  if (problem !== undefined) {
    throw new DeserializationError(`a stored error ${problem}: the data is corrupt or was not written by xreactor; discard it`);
  }
}

function registerBuiltIns(): void {
  const natives = [Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError];
  for (const Native of natives) registerErrorClass(Native.name, (s) => new Native(s.message));
  registerErrorClass('AggregateError', (s) => {
    const errors = s.data?.errors;
    return new AggregateError(Array.isArray(errors) ? errors : [], s.message);
  });
  const messageOnly = [DefinitionError, DeprecatedOptionError, DependencyError, ArgumentResolutionError,
    CompensationError, UndoError, InvalidStateError, DeserializationError];
  for (const Class of messageOnly) registerErrorClass(Class.name, (s) => new Class(s.message));
  registerErrorClass(XreactorError.name, (s) => new XreactorError(s.code ?? 'unknown', s.message));
  registerErrorClass(InputValidationError.name, (s) => new InputValidationError(s.message, s.issues ?? []));
  registerErrorClass(OutputValidationError.name, (s) => new OutputValidationError(s.message, s.issues ?? []));
  registerErrorClass(StepFailure.name, (s) => new StepFailure(s.message, { detail: s.detail }));
  // These constructors compose their own message; revive() puts the recorded one back.
  registerErrorClass(StaleRevisionError.name, (s) => new StaleRevisionError(s.executionId ?? '', 0, 0));
  registerErrorClass(ExecutionNotFoundError.name, () => new ExecutionNotFoundError(''));
  registerErrorClass(ExecutionAbortedError.name, (s) => new ExecutionAbortedError(s.executionId ?? '', s.reactor ?? ''));
  registerErrorClass(UnknownReactorError.name, () => new UnknownReactorError(''));
  registerErrorClass(WorkInterruptedError.name, () => new WorkInterruptedError('', ''));
  registerErrorClass(AwaitTimeoutError.name, () => new AwaitTimeoutError('', 0, ''));
  registerErrorClass(RedisUnavailableError.name, () => new RedisUnavailableError('', '', 0, ''));
  registerErrorClass(QueueRequiredError.name, () => new QueueRequiredError(''));
  registerErrorClass(InterruptTimeoutError.name, (s) => new InterruptTimeoutError('', s.step ?? '', 0));
  registerErrorClass(AsyncWaitTimeoutError.name, (s) => new AsyncWaitTimeoutError('', s.step ?? '', 0, 'asyncWaitTimeoutMs'));
}

registerBuiltIns();
