/**
 * xreactor/testing: tools for testing reactors deterministically.
 */
export { createTestClock } from './test-clock.js';
export type { TestClock } from './test-clock.js';
export { recordEvents } from './event-recorder.js';
export type { EventRecorder } from './event-recorder.js';
export { createInProcessQueue } from '../queue/in-process-queue.js';
export type { InProcessQueue, InProcessQueueOptions, InProcessQueueMode, DrainOptions, JobFilter, PendingJob, FailedJob } from '../queue/in-process-queue.js';
export { JOB_PURPOSES, jobPurpose } from '../queue/purpose.js';
export type { DelayedDelivery, DrainRoundsOptions, DrainRoundsResult, JobPurpose } from '../queue/purpose.js';
