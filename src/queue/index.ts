/** The queue port and its adapters: BullMQ for production, in-process for the embedded default and tests. */
export type { ConsumeOptions, Consumer, EnqueueOptions, JobHandler, JobKind, JobSpec, Queue } from './queue.js';
export { createInProcessQueue } from './in-process-queue.js';
export type {
  DrainOptions,
  FailedJob,
  InProcessQueue,
  InProcessQueueMode,
  InProcessQueueOptions,
  JobFilter,
  PendingJob,
} from './in-process-queue.js';
export { createBullmqQueue, decodeJobId, encodeJobId } from './bullmq-queue.js';
export type { BullmqQueue, BullmqQueueOptions, BullmqWorkerOptions } from './bullmq-queue.js';
