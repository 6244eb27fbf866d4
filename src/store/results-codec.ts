/**
 * The results a load reads with the snapshot (`LoadOptions.results`), decoded the same way by
 * every adapter.
 */
import { DeserializationError } from '../errors/index.js';
import { decode } from '../serialization/index.js';

/**
 * Stored results, decoded; undefined when one cannot be decoded: the load itself stands (its
 * snapshot is readable), and `readResults` reports the bad value as it would without the option.
 */
export function decodeLoadedResults(stored: Iterable<readonly [step: string, bytes: Uint8Array]>): Map<string, unknown> | undefined {
  const results = new Map<string, unknown>();
  try {
    for (const [step, bytes] of stored) results.set(step, decode(bytes));
  } catch (error) {
    if (error instanceof DeserializationError) return undefined;
    throw error;
  }
  return results;
}
