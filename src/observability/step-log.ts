/**
 * A middleware that writes one log line per step outcome that asks for attention at `info`
 * (`failed`, `retrying`, `halted`: the execution id, reactor, step, attempt, outcome, duration and
 * error), and one per uneventful outcome (`succeeded`, `skipped`) at `debug` only; the step's
 * arguments and result also only at `debug`, and only through `redact` (a function that returns
 * what may be logged of them). A line whose level is off is not built. The worker CLI installs it;
 * a runtime or worker of your own can too: `middleware: [stepLog(logger)]`.
 *
 * Why successes are `debug`: a fan-out map of 10,000 elements would write 10,000 lines at `info`
 * forward and as many for its rollback; measured in paired rounds on a worker, those lines cost
 * about a tenth of its CPU per element and a sixth of a map's time (docs/performance.md, session
 * 27). Progress and outcomes of runs and maps are in the hooks, the dashboard and `find(id)`.
 */
import type { Logger } from 'pino';
import type { Middleware, StepHook } from './middleware.js';

/** Options of {@link stepLog}. */
export interface StepLogOptions {
  /**
   * What of a step's arguments or result may be logged (at `debug`). Return `undefined` to log
   * nothing of it.
   * @defaultValue the value itself
   */
  readonly redact?: (value: unknown, about: { readonly reactor: string; readonly step: string; readonly what: 'args' | 'result' }) => unknown;
}

/** Steps whose start is remembered at once (a step that never ends, its process killed, is forgotten oldest first). */
const OPEN_STEPS = 10_000;

export function stepLog(logger: Logger, options: StepLogOptions = {}): Middleware {
  const redact = options.redact ?? ((value: unknown) => value);
  const started = new Map<string, number>();
  const keyOf = (e: StepHook) => `${e.executionId}\u0000${e.step}\u0000${e.attempt}`;
  const line = (level: 'info' | 'debug', e: StepHook, outcome: string, extra: Record<string, unknown>, result?: { readonly value: unknown }) => {
    const key = keyOf(e);
    const at = started.get(key);
    started.delete(key);
    if (!logger.isLevelEnabled(level)) return;
    const fields: Record<string, unknown> = {
      event: 'xreactor.step',
      executionId: e.executionId,
      reactor: e.reactor,
      ...(e.path.length === 0 ? {} : { path: e.path }),
      step: e.step,
      attempt: e.attempt,
      outcome,
      ...(at === undefined ? {} : { durationMs: Math.round((performance.now() - at) * 1000) / 1000 }),
      ...extra,
    };
    if (logger.isLevelEnabled('debug')) {
      fields['args'] = redact(e.args, { reactor: e.reactor, step: e.step, what: 'args' });
      if (result !== undefined) fields['result'] = redact(result.value, { reactor: e.reactor, step: e.step, what: 'result' });
    }
    logger[level](fields, `step ${e.step} ${outcome}`);
  };
  return {
    stepStart(e) {
      started.set(keyOf(e), performance.now());
      if (started.size > OPEN_STEPS) started.delete(started.keys().next().value!);
    },
    stepComplete(e) {
      line(e.outcome === 'halted' ? 'info' : 'debug', e, e.outcome, {}, { value: e.result });
    },
    retryAttempt(e) {
      line('info', e, 'retrying', { delayMs: e.delayMs, nextAttempt: e.nextAttempt, error: { name: e.error.name, message: e.error.message } });
    },
    stepFail(e) {
      line('info', e, 'failed', { error: { name: e.error.name, message: e.error.message, ...('code' in e.error ? { code: (e.error as { code: unknown }).code } : {}) } });
    },
  };
}
