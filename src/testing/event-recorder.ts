import type { Middleware, StepHook } from '../observability/middleware.js';

/**
 * A step's name with the compose steps leading to it: `payment.charge`. A map element's steps are
 * named without the map step, with the element's index after the name: `e1[2]`, `k.k1[2]`.
 */
const name = (e: Pick<StepHook, 'path' | 'step'>) => {
  const segments: string[] = [];
  let suffix = '';
  for (const segment of e.path) {
    if (/^\d+$/.test(segment) && segments.length > 0) {
      segments.pop();
      suffix += `[${segment}]`;
    } else segments.push(segment);
  }
  return [...segments, e.step].join('.') + suffix;
};

/** A step with a body of its own: a step, or an async step (whose body runs in its unit's job). */
const hasBody = (e: Pick<StepHook, 'kind'>) => e.kind === 'step' || e.kind === 'asyncStep';

/** A middleware that records what happened as `kind:step` strings, in order. */
export interface EventRecorder {
  readonly middleware: Middleware;
  /** Recorded events, e.g. `run:a`, `retry:b#1`, `compensate:b`, `undo:a`. */
  readonly events: string[];
  /** Forget recorded events. */
  clear(): void;
}

/**
 * Record the seeds' event vocabulary from middleware hooks: `run:<step>` when a
 * body starts, `retry:<step>#<attempt>` when a failed attempt will be retried,
 * `compensate:<step>`, `undo:<step>` when those handlers start. Steps of a
 * composed child are named by path (`run:payment.charge`); compose steps
 * themselves are containers and record nothing. An async step's body and
 * compensate are recorded when its unit runs them (`run:sendEmail`), not at its dispatch.
 */
export function recordEvents(): EventRecorder {
  const events: string[] = [];
  return {
    events,
    clear: () => void events.splice(0),
    middleware: {
      stepStart: (e) => void (hasBody(e) && events.push(`run:${name(e)}`)),
      retryAttempt: (e) => void events.push(`retry:${name(e)}#${e.attempt}`),
      compensateStart: (e) => void (hasBody(e) && events.push(`compensate:${name(e)}`)),
      undoStart: (e) => void (e.kind === 'step' && events.push(`undo:${name(e)}`)),
    },
  };
}
