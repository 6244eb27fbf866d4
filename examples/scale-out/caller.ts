/**
 * The caller of the scale-out example (needs Redis, and a worker running):
 *
 *   XREACTOR_REDIS_URL=redis://127.0.0.1:6379 npx tsx src/cli/xreactor.ts worker examples/scale-out/reactors.ts
 *   XREACTOR_REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/scale-out/caller.ts
 *
 * (In an app with the package installed: `npx xreactor worker ./reactors.ts`.)
 */
import { createRuntime } from 'xreactor';
import { connectRedis } from 'xreactor/redis';
import { order } from './reactors.js';

const runtime = createRuntime({ backend: connectRedis(), reactors: [order] });

for (const cardToken of ['tok_ok', 'tok_declined']) {
  const dispatched = await runtime.run(order, { sku: 'A1', quantity: 2, cardToken });
  console.log(`run(${cardToken}): ${dispatched.status} ${dispatched.executionId}`);
  const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: 30_000 });
  console.log(`  -> ${result.status}${result.status === 'completed' ? ` ${JSON.stringify(result.value)} (caller is ${process.pid})` : result.status === 'failed' ? `: ${result.message}` : ''}`);
}

await runtime.close(); // closes the queue, the store and the connection: the process exits by itself
