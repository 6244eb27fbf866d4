/** A branded execution id. */
export type ExecutionId = string & { readonly __brand: 'ExecutionId' };

/** Produces fresh execution ids. Injected so tests can make ids deterministic. */
export type IdGenerator = () => string;
