/**
 * The worker's opt-in health endpoint (`xreactor worker --health-port <port>`): `GET /health`
 * (or `/`) answers 200 `{"status":"ready"}` while the worker runs and its Redis connection is
 * ready, and 503 with `not_connected` (Redis unreachable, the reason) or `stopping` otherwise.
 * For a container orchestrator's readiness probe.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';

/** What the endpoint reports. */
export type Health = { readonly status: 'ready' } | { readonly status: 'not_connected'; readonly redis: string; readonly connection: string } | { readonly status: 'stopping' };

/** Starts the endpoint on `port` (all interfaces); resolves once it listens. */
export function startHealthServer(port: number, health: () => Health): Promise<Server> {
  const server = createServer((request, response) => {
    if (!['GET', 'HEAD'].includes(request.method ?? '') || !['/', '/health'].includes((request.url ?? '/').split('?')[0]!)) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found: GET /health"}');
      return;
    }
    const now = health();
    response.writeHead(now.status === 'ready' ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    response.end(request.method === 'HEAD' ? undefined : JSON.stringify(now));
  });
  // A probe never keeps the process alive on its own.
  server.unref();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
