/**
 * A middleware that writes one log line per step outcome that asks for attention at `info`
 * (`failed`, `retrying`, `halted`: the execution id, reactor, step, attempt, outcome, duration and
 * error), a failed undo or compensation (`undo_failed`, `compensate_failed`: something the
 * rollback left in place) at `warn`, and one per uneventful outcome (`succeeded`, `skipped`,
 * `undone`, `compensated`) at `debug` only; the step's arguments and result also only at `debug`,
 * and only through `redact` (a function that returns what may be logged of them). A line whose
 * level is off is not built. The worker CLI installs it; a runtime or worker of your own can too:
 * `middleware: [stepLog(logger)]`.
 *
 * Why successes are `debug`: a fan-out map of 10,000 elements would write 10,000 lines at `info`
 * forward and as many for its rollback, about 6 % of a worker's busy CPU in its profile
 * (docs/performance.md, session 27). Progress and outcomes of runs and maps are in the hooks, the
 * dashboard and `find(id)`.
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

/** What a line says of an error: its name, message and code. */
const errorFields = (error: Error) => ({ name: error.name, message: error.message, ...('code' in error ? { code: (error as { code: unknown }).code } : {}) });

/** An undo's or a compensation's line: no duration (see `line`). */
const UNTIMED = { untimed: true } as const;

/** Steps whose start is remembered at once (a step that never ends, its process killed, is forgotten oldest first). */
const OPEN_STEPS = 10_000;

export function stepLog(logger: Logger, options: StepLogOptions = {}): Middleware {
  const redact = options.redact ?? ((value: unknown) => value);
  const started = new Map<string, number>();
  const keyOf = (e: StepHook) => `${e.executionId}\u0000${e.step}\u0000${e.attempt}`;
  /**
   * One line. `result`: the step's result (logged at debug). `untimed`: an undo's or a
   * compensation's outcome, which has no remembered start (only a step's run does: `stepStart`).
   */
  const line = (level: 'warn' | 'info' | 'debug', e: StepHook, outcome: string, extra: Record<string, unknown>, how: { readonly result?: { readonly value: unknown }; readonly untimed?: true } = {}) => {
    const { result } = how;
    let at: number | undefined;
    if (how.untimed !== true) {
      const key = keyOf(e);
      at = started.get(key);
      started.delete(key);
    }
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
      line(e.outcome === 'halted' ? 'info' : 'debug', e, e.outcome, {}, { result: { value: e.result } });
    },
    retryAttempt(e) {
      line('info', e, 'retrying', { delayMs: e.delayMs, nextAttempt: e.nextAttempt, error: errorFields(e.error) });
    },
    stepFail(e) {
      line('info', e, 'failed', { error: errorFields(e.error) });
    },
    // The rollback: an undo or a compensation that failed left something in place (the run's
    // `rollbackFailures`): warn. One that succeeded: debug, as a step that succeeded. (No
    // duration: timing every undo's start would cost each rolled-back element for a debug field.)
    compensateComplete(e) {
      line('debug', e, 'compensated', {}, UNTIMED);
    },
    compensateFail(e) {
      line('warn', e, 'compensate_failed', { error: errorFields(e.error) }, UNTIMED);
    },
    undoComplete(e) {
      line('debug', e, 'undone', {}, UNTIMED);
    },
    undoFail(e) {
      line('warn', e, 'undo_failed', { error: errorFields(e.error) }, UNTIMED);
    },
  };
}
