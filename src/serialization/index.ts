/** Serialization: the one msgpackr Packr, the error converter and the stored-snapshot envelope. */
export { decode, encode } from './packr.js';
export {
  deserializeError,
  MAX_CAUSE_DEPTH,
  MAX_STACK_FRAMES,
  NON_ERROR_THROWN,
  RecordedError,
  registerErrorClass,
  serializeError,
} from './errors.js';
export type { ErrorFactory, SerializedError } from './errors.js';
export { decodeEnvelope, encodeEnvelope } from './envelope.js';
export type { Envelope, EnvelopeExpectation } from './envelope.js';
