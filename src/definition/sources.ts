/**
 * Argument sources: where a step argument's value comes from. `result(...)`
 * sources are data dependencies (DAG edges).
 */

type Prev = [never, 0, 1, 2, 3];

/** Dotted paths into `T` (object types and interfaces alike), up to four levels deep. Arrays and functions are leaves. */
export type Path<T, D extends number = 4> = [D] extends [never]
  ? never
  : NonNullable<T> extends readonly unknown[] | ((...args: never[]) => unknown)
    ? never
    : NonNullable<T> extends object
      ? {
          [K in keyof NonNullable<T> & string]: K | `${K}.${Path<NonNullable<T>[K], Prev[D]>}`;
        }[keyof NonNullable<T> & string]
      : never;

/** The type found at dotted path `P` in `T`. */
export type PathValue<T, P extends string> = P extends `${infer K}.${infer Rest}`
  ? K extends keyof NonNullable<T>
    ? PathValue<NonNullable<T>[K], Rest>
    : never
  : P extends keyof NonNullable<T>
    ? NonNullable<T>[P]
    : never;

/** The plain-data description of a source. */
export type SourceSpec =
  | { readonly kind: 'input'; readonly name: string; readonly path: readonly string[]; readonly transforms: readonly Transform[] }
  | { readonly kind: 'result'; readonly name: string; readonly path: readonly string[]; readonly transforms: readonly Transform[] }
  | { readonly kind: 'value'; readonly value: unknown; readonly transforms: readonly Transform[] }
  /** The item a map element runs on (`element(path?)`), only in a map's `args`. */
  | { readonly kind: 'element'; readonly path: readonly string[]; readonly transforms: readonly Transform[] };

/** A transform applied to a resolved argument value. */
export type Transform = (value: any) => unknown;

/** A typed argument source. `T` is the type the step receives. */
export class ArgumentSource<T> {
  /** Phantom: the value type this source yields. */
  declare readonly __value: T;
  /** The source as plain data. */
  readonly spec: SourceSpec;

  constructor(spec: SourceSpec) {
    this.spec = spec;
  }

  /**
   * Map the resolved value before the step receives it. A transform that
   * throws fails the step before its body (not compensated, never retried).
   * @example
   * amountCents: input('amount').transform((amount) => Math.round(amount * 100))
   */
  transform<U>(fn: (value: T) => U): ArgumentSource<U> {
    return new ArgumentSource<U>({ ...this.spec, transforms: [...this.spec.transforms, fn] });
  }
}

/** Any source, whatever it yields. */
export type AnySource = ArgumentSource<any>;

/** A record of named argument sources. */
export type ArgsRecord = Readonly<Record<string, AnySource>>;

/** The argument object a step receives for sources `A`. */
export type ArgsOf<A extends ArgsRecord> = { -readonly [K in keyof A]: A[K] extends ArgumentSource<infer T> ? T : never };

/** Typed source constructors handed to a step's `args` callback. */
export interface SourceHelpers<TInput, TResults> {
  /** A reactor input, optionally a dotted path into it. */
  input<K extends keyof TInput & string>(name: K): ArgumentSource<TInput[K]>;
  input<K extends keyof TInput & string, P extends Path<TInput[K]>>(
    name: K,
    path: P,
  ): ArgumentSource<PathValue<TInput[K], P>>;
  /** A completed step's result, optionally a dotted path into it. Adds a dependency on that step. */
  result<K extends keyof TResults & string>(step: K): ArgumentSource<TResults[K]>;
  result<K extends keyof TResults & string, P extends Path<TResults[K]>>(
    step: K,
    path: P,
  ): ArgumentSource<PathValue<TResults[K], P>>;
  /** A constant. */
  value<V>(value: V): ArgumentSource<V>;
}

/** Split a dotted path (`'a.b'`) into its segments; none for an absent or empty path. */
export function splitPath(path: string | undefined): readonly string[] {
  return path === undefined || path === '' ? [] : path.split('.');
}

/** The untyped helpers used at run time; the types above are the promise. */
export const sourceHelpers: SourceHelpers<any, any> = {
  input: (name: string, path?: string) =>
    new ArgumentSource({ kind: 'input', name, path: splitPath(path), transforms: [] }),
  result: (step: string, path?: string) =>
    new ArgumentSource({ kind: 'result', name: step, path: splitPath(path), transforms: [] }),
  value: (value: unknown) => new ArgumentSource({ kind: 'value', value, transforms: [] }),
} as SourceHelpers<any, any>;

/** The step names a source record reads results of. */
export function resultDependencies(args: ArgsRecord | undefined): string[] {
  if (args === undefined) return [];
  const names: string[] = [];
  for (const source of Object.values(args)) {
    if (source.spec.kind === 'result' && !names.includes(source.spec.name)) names.push(source.spec.name);
  }
  return names;
}

/** The key of the first `element()` source in a source record, if any. */
export function elementSourceKey(args: ArgsRecord | undefined): string | undefined {
  if (args === undefined) return undefined;
  return Object.keys(args).find((key) => {
    const source: unknown = args[key];
    return source instanceof ArgumentSource && source.spec.kind === 'element';
  });
}
