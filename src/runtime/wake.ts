/**
 * The kernel's wake effect, `xreactor.effect.wake { actor, kind, ifLanded? }`: after a commit that
 * signalled another actor, the sender's host advances the recipient in the same call when its
 * lease is free, else enqueues a wake job addressed to the recipient's kind. The wake of a
 * conditional signal names its dedupe key (`ifLanded`) and is performed only when the commit's
 * receipt (`CommitOptions.landedSignals`) lists it; an outbox performed again after a crash has no
 * receipt and wakes anyway (a spurious wake finds nothing to apply). Every kind's outbox may hold
 * it; the kernel loop (`ActorHost`) performs it.
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
  /** Wake only if the commit's conditional signal with this dedupe key landed (when the commit's receipt is known). */
  readonly ifLanded?: string;
}

/** The actor kind a wake that names none addresses: outboxes written before wakes carried a kind woke executions only. */
export const DEFAULT_WAKE_KIND = 'execution';

/** The parameters of a wake of `actor`, of kind `kind` (only if the conditional signal keyed `ifLanded` landed, when given). */
export function wakeParams(actor: string, kind: string = DEFAULT_WAKE_KIND, ifLanded?: string): WakeParams {
  return ifLanded === undefined ? { actor, kind } : { actor, kind, ifLanded };
}

/** The wake parameters of a committed wake effect (one committed without a kind wakes an execution). */
export function wakeOf(effect: OutboxEffect): WakeParams {
  const { actor, kind, ifLanded } = effect.params as { readonly actor: string; readonly kind?: unknown; readonly ifLanded?: unknown };
  return { actor, kind: typeof kind === 'string' && kind !== '' ? kind : DEFAULT_WAKE_KIND, ...(typeof ifLanded === 'string' ? { ifLanded } : {}) };
}

/** Whether an effect is a wake that depends on a conditional signal's landing. */
export function isConditionalWake(effect: OutboxEffect): boolean {
  return effect.type === WAKE_EFFECT && typeof (effect.params as { readonly ifLanded?: unknown } | null)?.ifLanded === 'string';
}
