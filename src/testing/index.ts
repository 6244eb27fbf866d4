/**
 * xreactor/testing: tools for testing reactors deterministically.
 */
export { createTestClock } from './test-clock.js';
export type { TestClock } from './test-clock.js';
export { recordEvents } from './event-recorder.js';
export type { EventRecorder } from './event-recorder.js';
