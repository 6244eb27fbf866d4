/**
 * xreactor/redis: the production adapters. A Redis (or Redis Cluster) store
 * and a BullMQ queue, for runtimes and workers spread over many processes.
 */
export { createRedisStore, DEFAULT_CONTEXT_TTL_MS } from './store/redis-store.js';
export type { RedisStoreOptions } from './store/redis-store.js';
export { createBullmqQueue } from './queue/bullmq-queue.js';
export type { BullmqQueue, BullmqQueueOptions, BullmqWorkerOptions } from './queue/bullmq-queue.js';
export { createInProcessQueue } from './queue/in-process-queue.js';
export { connectRedis, DEFAULT_REDIS_URL, REDIS_URL_ENV } from './backend/redis-backend.js';
export type { RedisBackend, RedisBackendOptions } from './backend/redis-backend.js';
