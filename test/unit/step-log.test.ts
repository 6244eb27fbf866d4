import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRuntime, defineReactor, fail, halt, stepLog } from '../../src/index.js';
import { middlewareOf, reactorsOf } from '../../src/cli/load-module.js';

/** A pino logger at `level` whose lines are collected as objects. */
function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

const reactor = defineReactor({ name: 'logged' })
  .step('a', { run: () => ({ card: '4242', total: 5 }) })
  .step('b', { args: ({ result }) => ({ a: result('a') }), run: () => fail(new Error('declined')) })
  .build();

describe('stepLog', () => {
  it('writes a failed step at info with id, reactor, step, outcome, duration and error, no values; a succeeded one only at debug', async () => {
    const { logger, lines } = capture('info');
    const runtime = createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(logger)] });
    const result = await runtime.run(reactor, undefined as never);
    const steps = lines.filter((l) => l['event'] === 'xreactor.step');
    expect(steps.map((l) => [l['step'], l['outcome']])).toEqual([['b', 'failed']]);
    expect(steps[0]).toMatchObject({ level: 30, executionId: result.executionId, reactor: 'logged', attempt: 1, error: { message: 'declined' } });
    expect(typeof steps[0]!['durationMs']).toBe('number');
    expect(steps[0]).not.toHaveProperty('args');
    expect(steps[0]).not.toHaveProperty('result');
  });

  it('writes every step outcome at debug, a succeeded one at level 20 with its duration', async () => {
    const { logger, lines } = capture('debug');
    const runtime = createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(logger)] });
    const result = await runtime.run(reactor, undefined as never);
    const steps = lines.filter((l) => l['event'] === 'xreactor.step');
    // The rollback passes through every step: b's compensation and a's undo (none declared) at debug too.
    expect(steps.map((l) => [l['step'], l['outcome'], l['level']])).toEqual([['a', 'succeeded', 20], ['b', 'failed', 30], ['b', 'compensated', 20], ['a', 'undone', 20]]);
    expect(steps[0]).toMatchObject({ executionId: result.executionId, reactor: 'logged', attempt: 1 });
    expect(typeof steps[0]!['durationMs']).toBe('number');
  });

  it('writes a halted step and a retry at info', async () => {
    const { logger, lines } = capture('info');
    let calls = 0;
    const retried = defineReactor({ name: 'retried' })
      .step('flaky', { retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 0 }, run: () => (++calls === 1 ? fail(new Error('blip'), { retry: true }) : 1) })
      .step('stop', { run: () => halt('enough') })
      .build();
    const runtime = createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(logger)] });
    await runtime.run(retried, undefined as never);
    const steps = lines.filter((l) => l['event'] === 'xreactor.step');
    expect(steps.map((l) => [l['step'], l['outcome'], l['level']])).toEqual([['flaky', 'retrying', 30], ['stop', 'halted', 30]]);
    expect(steps[0]).toMatchObject({ attempt: 1, nextAttempt: 2, error: { name: 'Error', message: 'blip' } });
  });

  it('writes a failed undo or compensation at warn, with its error, and a successful one only at debug', async () => {
    const failing = defineReactor({ name: 'unwound' })
      .step('a', { run: () => 1, undo: () => { throw new Error('refund down'); } })
      .step('b', { run: () => 2 })
      .step('c', { run: () => fail(new Error('declined')), compensate: () => { throw new Error('cleanup down'); } })
      .build();
    const atInfo = capture('info');
    const result = await createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(atInfo.logger)] }).run(failing, undefined as never);
    expect(result.status).toBe('failed');
    const lines = atInfo.lines.filter((l) => l['event'] === 'xreactor.step');
    expect(lines.map((l) => [l['step'], l['outcome'], l['level']]).sort()).toEqual([['a', 'undo_failed', 40], ['c', 'compensate_failed', 40], ['c', 'failed', 30]]);
    expect(lines.find((l) => l['outcome'] === 'undo_failed')).toMatchObject({ executionId: result.executionId, reactor: 'unwound', error: { message: 'refund down' } });
    expect(lines.find((l) => l['outcome'] === 'compensate_failed')).toMatchObject({ error: { message: 'cleanup down' } });

    const clean = defineReactor({ name: 'unwound_cleanly' })
      .step('a', { run: () => 1, undo: () => undefined })
      .step('c', { run: () => fail(new Error('declined')), compensate: () => undefined })
      .build();
    const atDebug = capture('debug');
    await createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(atDebug.logger)] }).run(clean, undefined as never);
    expect(atDebug.lines.filter((l) => l['event'] === 'xreactor.step').map((l) => [l['step'], l['outcome'], l['level']]).sort()).toEqual([
      ['a', 'succeeded', 20],
      ['a', 'undone', 20],
      ['c', 'compensated', 20],
      ['c', 'failed', 30],
    ]);
  });

  it('adds arguments and results at debug, through redact', async () => {
    const { logger, lines } = capture('debug');
    const redact = (value: unknown) => JSON.parse(JSON.stringify(value ?? null, (key, v: unknown) => (key === 'card' ? '****' : v))) as unknown;
    const runtime = createRuntime({ logger: pino({ level: 'silent' }), middleware: [stepLog(logger, { redact })] });
    await runtime.run(reactor, undefined as never);
    const a = lines.find((l) => l['step'] === 'a')!;
    expect(a['result']).toEqual({ card: '****', total: 5 });
    const b = lines.find((l) => l['step'] === 'b')!;
    expect(b['args']).toEqual({ a: { card: '****', total: 5 } });
  });
});

describe('the CLI\'s reactor modules', () => {
  it('finds every reactor a module exports, by name or in arrays, each definition once', () => {
    const other = defineReactor({ name: 'other' }).step('x', { run: () => 1 }).build();
    // `export const logged = ...; export default [logged, other]`: the worker lists each once.
    expect(reactorsOf({ logged: reactor, default: [reactor, other], notAReactor: { kind: 'step' } }).map((r) => r.name)).toEqual(['logged', 'other']);
  });
});

describe('the CLI\'s --middleware module', () => {
  it('takes the default export or the export named middleware, one object or an array', () => {
    const hooks = { stepStart: () => undefined };
    expect(middlewareOf({ default: hooks }, 'm.js')).toEqual([hooks]);
    expect(middlewareOf({ middleware: [hooks, hooks] }, 'm.js')).toEqual([hooks, hooks]);
    expect(() => middlewareOf({ other: hooks }, 'm.js')).toThrow(/middleware module m\.js must export its middleware as the default export or as "middleware"/);
    expect(() => middlewareOf({ default: [1] }, 'm.js')).toThrow(/must export/);
    expect(middlewareOf({ redact: () => undefined }, 'only-redact.js')).toEqual([]);
  });
});
