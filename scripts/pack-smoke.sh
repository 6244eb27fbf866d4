#!/usr/bin/env bash
# Packs xreactor as `npm pack` would publish it, installs the tarball into a scratch app outside
# the repository, and runs from there what a new user runs first:
#   1. the embedded example (ESM, no Redis);
#   2. the same from a CommonJS app (require);
#   3. a Redis round trip: a caller process with connectRedis() and a worker started through
#      the package's own `xreactor worker` bin; the caller must exit by itself.
# Needs a built tree (npm run build) and redis-server on PATH. Usage: scripts/pack-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
worker_pid=''
redis_pid=''
cleanup() {
  [[ -n "$worker_pid" ]] && kill -9 "$worker_pid" 2>/dev/null || true
  [[ -n "$redis_pid" ]] && kill -9 "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "pack-smoke: FAILED: $*" >&2; exit 1; }

[[ -f dist/src/index.js ]] || fail "dist/ is missing: run npm run build first"
tarball=$(npm pack --silent --pack-destination "$work")
echo "pack-smoke: packed $tarball"

app="$work/app"
mkdir -p "$app"
cd "$app"
cat > package.json <<'JSON'
{ "name": "scratch-app", "version": "1.0.0", "private": true, "type": "module" }
JSON
# The dependencies come from npm's cache when npm ci already fetched them.
npm install --no-audit --no-fund --prefer-offline --silent "$work/$tarball" zod >/dev/null
echo "pack-smoke: installed into $app"

cat > embedded.mjs <<'JS'
import { z } from 'zod';
import { createRuntime, defineReactor, fail } from 'xreactor';
const checkout = defineReactor({ name: 'checkout', input: z.object({ card: z.string() }) })
  .step('reserve', { run: () => 'r-1', undo: () => undefined })
  .step('charge', { args: ({ input }) => ({ card: input('card') }), run: ({ card }) => (card === 'bad' ? fail(new Error('declined')) : 'ch-1') })
  .returns('charge')
  .build();
const runtime = createRuntime();
const ok = await runtime.run(checkout, { card: 'good' });
const declined = await runtime.run(checkout, { card: 'bad' });
console.log(JSON.stringify({ ok: ok.status, value: ok.value, declined: declined.status }));
await runtime.close();
JS
out=$(node embedded.mjs) || fail "the embedded example did not run: $out"
[[ "$out" == '{"ok":"completed","value":"ch-1","declined":"failed"}' ]] || fail "the embedded example printed $out"
echo "pack-smoke: ESM embedded example ok"

cat > embedded.cjs <<'JS'
const { createRuntime, defineReactor } = require('xreactor');
const hello = defineReactor({ name: 'hello' }).step('a', { run: () => 'hi' }).returns('a').build();
const runtime = createRuntime();
runtime.run(hello, undefined).then(async (result) => {
  console.log(result.status, result.value);
  await runtime.close();
});
JS
out=$(node embedded.cjs 2>&1) || fail "a CommonJS app could not use the package: $out"
[[ "$out" == 'completed hi' ]] || fail "the CommonJS example printed $out"
echo "pack-smoke: CommonJS require ok"

port=$(node -e "const s=require('node:net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})")
redis-server --port "$port" --save '' --appendonly no >/dev/null &
redis_pid=$!
disown "$redis_pid"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export XREACTOR_REDIS_URL="redis://127.0.0.1:$port"

cat > reactors.mjs <<'JS'
import { defineReactor } from 'xreactor';
export const shipping = defineReactor({ name: 'shipping' })
  .step('label', { run: () => ({ label: 'L-1', pid: process.pid }) })
  .background({ all: true })
  .returns('label')
  .build();
JS
cat > caller.mjs <<'JS'
import { createRuntime } from 'xreactor';
import { connectRedis } from 'xreactor/redis';
import { shipping } from './reactors.mjs';
const runtime = createRuntime({ backend: connectRedis(), reactors: [shipping] });
const dispatched = await runtime.run(shipping, undefined);
const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: 20000 });
console.log(JSON.stringify({ dispatched: dispatched.status, status: result.status, inWorker: result.value.pid !== process.pid }));
await runtime.close();
JS
./node_modules/.bin/xreactor worker --help | grep -q 'usage: xreactor worker' || fail "xreactor worker --help did not print its usage"

# A TypeScript reactor module: without tsx in the app the worker says what to install; with it,
# it loads the module. Middleware from --middleware runs beside the built-in step log.
cat > reactors.ts <<'TS'
import { defineReactor } from 'xreactor';
const label = (): { label: string; pid: number } => ({ label: 'L-1', pid: process.pid });
export const shipping = defineReactor({ name: 'shipping' }).step('label', { run: label }).background({ all: true }).returns('label').build();
TS
cat > hooks.mjs <<'JS'
import { appendFileSync } from 'node:fs';
export default { stepComplete: (e) => appendFileSync('hooks.log', `${e.reactor}.${e.step} ${e.outcome}\n`) };
export const redact = () => '[redacted]';
JS
if out=$(./node_modules/.bin/xreactor worker ./reactors.ts 2>&1); then fail "a TypeScript module loaded without tsx: $out"; fi
[[ "$out" == *"is TypeScript"*"npm install --save-dev tsx"* ]] || fail "without tsx, the worker said: $out"
echo "pack-smoke: a TypeScript module without tsx is refused with what to install"
npm install --no-audit --no-fund --prefer-offline --silent tsx >/dev/null

./node_modules/.bin/xreactor worker --concurrency 2 --log-level debug --middleware ./hooks.mjs ./reactors.ts > worker.log 2>&1 &
worker_pid=$!
for _ in $(seq 100); do grep -q 'xreactor.worker.started' worker.log && break; sleep 0.1; done
grep -q 'xreactor.worker.started' worker.log || fail "the worker did not start: $(cat worker.log)"
out=$(timeout 30 node caller.mjs) || fail "the caller did not finish and exit by itself within 30 s (rc $?): $out; worker: $(tail -5 worker.log)"
[[ "$out" == '{"dispatched":"dispatched","status":"completed","inWorker":true}' ]] || fail "the Redis round trip printed $out"
echo "pack-smoke: Redis round trip through the packaged worker ok; the caller exited by itself"
grep -q '"event":"xreactor.step".*"step":"label".*"outcome":"succeeded".*"durationMs"' worker.log || fail "no step log line in the worker's log: $(tail -5 worker.log)"
[[ "$(cat hooks.log 2>/dev/null)" == "shipping.label succeeded" ]] || fail "the --middleware hook did not run: $(cat hooks.log 2>/dev/null)"
grep -q '"event":"xreactor.step".*"result":"\[redacted\]"' worker.log || fail "the middleware module's redact did not filter the debug step log: $(grep xreactor.step worker.log | tail -2)"
! grep -q '"label":"L-1"' worker.log || fail "the step log wrote a result its redact should have hidden"
echo "pack-smoke: TypeScript reactors through tsx, the step log line and --middleware ok"
kill -TERM "$worker_pid"
for _ in $(seq 100); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$worker_pid" 2>/dev/null && fail "the worker did not stop within 10 s of SIGTERM"
worker_pid=''
echo "pack-smoke: the worker stopped on SIGTERM"

# Started through npx and through an npm script, SIGTERM to npm still stops the worker.
node -e "const p=require('./package.json');p.scripts={worker:'xreactor worker ./reactors.mjs'};require('fs').writeFileSync('package.json',JSON.stringify(p))"
for how in "npx xreactor worker ./reactors.mjs" "npm run --silent worker"; do
  $how > via.log 2>&1 &
  launcher=$!
  # npm itself can take seconds to start on a loaded machine: up to 30 s.
  for _ in $(seq 300); do grep -q 'xreactor.worker.started' via.log && break; sleep 0.1; done
  grep -q 'xreactor.worker.started' via.log || fail "the worker did not start through '$how' within 30 s: $(cat via.log)"
  kill -TERM "$launcher"
  for _ in $(seq 100); do grep -q 'xreactor.worker.stopped' via.log && break; sleep 0.1; done
  grep -q 'xreactor.worker.stopped' via.log || { pkill -9 -f 'xreactor worker ./reactors.mjs' || true; fail "SIGTERM to '$how' did not reach the worker: $(tail -3 via.log)"; }
  wait "$launcher" 2>/dev/null || true
  echo "pack-smoke: SIGTERM reaches the worker started through '$how'"
done
echo "pack-smoke: all ok"
