/** Correlation ids live as long as an execution's data does by default (24 h). */
export const CORRELATION_TTL_MS = 86_400_000;

/**
 * The root execution id of an execution: composed children are named
 * `<root>.<compose step>...`, one segment per step of their path.
 */
export function rootIdOf(id: string, path: readonly string[]): string {
  if (path.length === 0) return id;
  return id.slice(0, id.length - path.join('.').length - 1);
}

/** The execution id reached from `root` through compose steps `path`. */
export function descendantId(root: string, path: readonly string[]): string {
  return [root, ...path].join('.');
}

/** The claim key of a correlation id (unique per store: it names one paused interrupt). */
export function correlationKey(correlationId: string): string {
  return `correlation:${correlationId}`;
}

/**
 * The dedupe key of a resume or failure of interrupt `name`, delivered to its execution's inbox:
 * whichever lands first (a continue, a timeout) is the only one that ever lands.
 */
export function interruptKey(name: string): string {
  return `interrupt.${name}`;
}
