/**
 * Deterministic job ids: the same committed effect always produces the same
 * id, so performing it twice never enqueues twice. Parts are joined with '.'
 * (BullMQ reserves ':' in custom ids).
 */
export function jobId(executionId: string, ...parts: readonly (string | number)[]): string {
  return [executionId, ...parts].join('.');
}
