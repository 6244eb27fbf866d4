/**
 * The kernel's wake effect, `xreactor.effect.wake { actor, kind }`: after a commit that signalled
 * another actor, the sender's host advances the recipient in the same call when its lease is
 * free, else enqueues a wake job addressed to the recipient's kind. Every kind's outbox may hold
 * it; the kernel loop performs it ({@link ActorHost}).
 */
import type { OutboxEffect } from '../store/store.js';

/** The type of the wake effect. */
export const WAKE_EFFECT = 'xreactor.effect.wake';

/** The parameters of a wake effect. */
export interface WakeParams {
  /** The signalled actor's id. */
  readonly actor: string;
  /** Its kind: the job router's key for a wake job (the machine registry's kind). */
  readonly kind: string;
}

/** The actor kind a wake that names none addresses: outboxes written before wakes carried a kind woke executions only. */
export const DEFAULT_WAKE_KIND = 'execution';

/** The parameters of a wake of `actor`, of kind `kind`. */
export function wakeParams(actor: string, kind: string = DEFAULT_WAKE_KIND): WakeParams {
  return { actor, kind };
}

/** The wake parameters of a committed wake effect (one committed without a kind wakes an execution). */
export function wakeOf(effect: OutboxEffect): WakeParams {
  const { actor, kind } = effect.params as { readonly actor: string; readonly kind?: unknown };
  return { actor, kind: typeof kind === 'string' && kind !== '' ? kind : DEFAULT_WAKE_KIND };
}
