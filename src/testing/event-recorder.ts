import type { Middleware } from '../observability/middleware.js';

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
 * `compensate:<step>`, `undo:<step>` when those handlers start.
 */
export function recordEvents(): EventRecorder {
  const events: string[] = [];
  return {
    events,
    clear: () => void events.splice(0),
    middleware: {
      stepStart: (e) => void events.push(`run:${e.step}`),
      retryAttempt: (e) => void events.push(`retry:${e.step}#${e.attempt}`),
      compensateStart: (e) => void events.push(`compensate:${e.step}`),
      undoStart: (e) => void events.push(`undo:${e.step}`),
    },
  };
}
