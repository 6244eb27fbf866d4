/** An error as plain data (what the serialization converter produces). Machines only ever hold this. */
export type { SerializedError as ErrorData } from '../serialization/errors.js';
