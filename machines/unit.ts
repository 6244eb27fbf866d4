/*
 * The async unit machine (kind `unit`): one `asyncStep` body, dispatched by its owner execution
 * (id `<owner>.<step>`) and run in its own job. Seed 001 §2.5 and §5:
 *
 * - Its retries loop inside its job (a backoff is a sleep there, not a delayed job): `retrying`.
 * - After its final attempt fails with the body started, it compensates itself once, in its job;
 *   a body that never started (input contract) is not compensated. A retried attempt, a halt and
 *   a success compensate nothing.
 * - It is never undone: nothing pushes it on an undo stack, and it accepts no operator signal (an
 *   owner's cancel or undo does not reach it).
 * - When it settles it signals its owner once (`xreactor.unit.settled`, keyed by its id): a reader
 *   waiting in the owner wakes; any other state of the owner consumes it.
 */
import { assign, enqueueActions, setup } from 'xstate';
import { backoffDelayMs } from '../src/definition/retry.js';
import { NO_RETRY } from '../src/definition/retry.js';
import type { ActorTag } from './registry-types.js';
import type { UnitContext, UnitEffect, UnitEvent, UnitInput, UnitStatus, UnitWrite } from './unit-types.js';

export * from './unit-types.js';

type EventOf<T extends UnitEvent['type']> = Extract<UnitEvent, { type: T }>;
type ParamsOf<U extends { type: string; params: unknown }, T extends U['type']> = Extract<U, { type: T }>['params'];

/** Tags of the unit machine's states, declared once (see {@link unitTagsOf}). */
export const UNIT_STATE_TAGS = {
  // Its start job is its owner's to send; a lost one is sent again by the unit's sweep.
  queued: [],
  running: ['recoverable'],
  retrying: ['recoverable'],
  compensating: ['recoverable'],
  completed: ['settled'],
  failed: ['settled'],
  halted: ['settled'],
} as const satisfies Record<string, readonly ActorTag[]>;

const TAG_SETS: ReadonlyMap<string, ReadonlySet<ActorTag>> = new Map(Object.entries(UNIT_STATE_TAGS).map(([path, tags]) => [path, new Set<ActorTag>(tags)]));
const NO_TAGS: ReadonlySet<ActorTag> = new Set();
const tagsAt = (state: keyof typeof UNIT_STATE_TAGS): ActorTag[] => [...UNIT_STATE_TAGS[state]];

/** The tags of a stored unit state value (its states are all top-level). */
export function unitTagsOf(value: unknown): ReadonlySet<ActorTag> {
  return typeof value === 'string' ? (TAG_SETS.get(value) ?? NO_TAGS) : NO_TAGS;
}

/** The stored status of a unit state value. */
export function unitStatusOf(value: unknown): UnitStatus {
  switch (value) {
    case 'queued':
    case 'completed':
    case 'failed':
    case 'halted':
      return value;
    default:
      return 'running';
  }
}

const hostPerformed = <P>() => (_: unknown, _params: P): void => undefined;

/**
 * The unit actor: pure. It runs its body (one attempt per transition), decides retries and the
 * backoff, compensates once after its last attempt failed, and tells its owner once when it
 * settles. Time arrives in events.
 */
export function createUnitMachine() {
  return setup({
    types: {
      context: {} as UnitContext,
      events: {} as UnitEvent,
      input: {} as UnitInput,
    },
    actions: {
      'xreactor.effect.unit.start': hostPerformed<ParamsOf<UnitEffect, 'xreactor.effect.unit.start'>>(),
      'xreactor.effect.unit.run': hostPerformed<ParamsOf<UnitEffect, 'xreactor.effect.unit.run'>>(),
      'xreactor.effect.unit.wait': hostPerformed<ParamsOf<UnitEffect, 'xreactor.effect.unit.wait'>>(),
      'xreactor.effect.unit.compensate': hostPerformed<ParamsOf<UnitEffect, 'xreactor.effect.unit.compensate'>>(),
      'xreactor.effect.finished': hostPerformed<ParamsOf<UnitEffect, 'xreactor.effect.finished'>>(),
      'xreactor.write.result': hostPerformed<ParamsOf<UnitWrite, 'xreactor.write.result'>>(),
      'xreactor.write.trace': hostPerformed<ParamsOf<UnitWrite, 'xreactor.write.trace'>>(),
      'xreactor.write.signal': hostPerformed<ParamsOf<UnitWrite, 'xreactor.write.signal'>>(),
      /** Settled: its owner is told once (keyed by the unit's id), whatever state the owner is in. */
      settle: enqueueActions(({ context, enqueue }, params: unknown) => {
        const { status } = params as { readonly status: UnitStatus };
        enqueue({ type: 'xreactor.effect.finished', params: { status } });
        enqueue({
          type: 'xreactor.write.signal',
          params: { to: context.owner, event: { type: 'xreactor.unit.settled', at: context.updatedAt, child: context.unitId }, dedupeKey: `${context.unitId}.settled` },
        });
      }),
    },
    guards: {
      isCurrent: ({ context, event }) => (event as EventOf<'xreactor.unit.succeeded'>).attempt === context.attempt,
      canRetry: ({ context, event }) => {
        const e = event as EventOf<'xreactor.unit.failed'>;
        return e.attempt === context.attempt && e.started && e.retryable && context.attempt < context.retry.maxAttempts;
      },
      startedAndCurrent: ({ context, event }) => {
        const e = event as EventOf<'xreactor.unit.failed'>;
        return e.attempt === context.attempt && e.started;
      },
    },
  }).createMachine({
    id: 'unit',
    // XState's transition() resolves the initial state without input on every call; tolerate it.
    context: ({ input }: { input: UnitInput | undefined }) => ({
      unitId: input?.unitId ?? '',
      owner: input?.owner ?? '',
      ownerPath: input?.ownerPath ?? [],
      reactor: input?.reactor ?? '',
      version: input?.version ?? 1,
      fingerprint: input?.fingerprint ?? '',
      step: input?.step ?? '',
      attempt: 1,
      retry: input?.retry ?? NO_RETRY,
      failure: null,
      end: null,
      compensation: null,
      dispatchedAt: input?.at ?? 0,
      updatedAt: input?.at ?? 0,
    }),
    initial: 'queued',
    states: {
      queued: {
        tags: tagsAt('queued'),
        entry: { type: 'xreactor.effect.unit.start', params: {} },
        on: { 'xreactor.unit.start': { target: 'running', actions: assign(({ event }) => ({ updatedAt: event.at })) } },
      },
      running: {
        tags: tagsAt('running'),
        entry: { type: 'xreactor.effect.unit.run', params: ({ context }) => ({ attempt: context.attempt }) },
        on: {
          'xreactor.unit.succeeded': {
            guard: 'isCurrent',
            target: 'completed',
            actions: [
              { type: 'xreactor.write.trace', params: ({ context, event }) => ({ type: 'run', step: context.step, attempt: event.attempt, at: event.at }) },
              { type: 'xreactor.write.result', params: ({ event }) => ({ step: 'value' as const, value: event.value }) },
              assign(({ event }) => ({ end: { status: 'completed' as const }, updatedAt: event.at })),
            ],
          },
          'xreactor.unit.halted': {
            guard: 'isCurrent',
            target: 'halted',
            actions: [
              { type: 'xreactor.write.trace', params: ({ context, event }) => ({ type: 'halt', step: context.step, reason: event.reason, at: event.at }) },
              assign(({ event }) => ({ end: { status: 'halted' as const, reason: event.reason }, updatedAt: event.at })),
            ],
          },
          'xreactor.unit.failed': [
            {
              guard: 'canRetry',
              target: 'retrying',
              actions: [
                {
                  type: 'xreactor.write.trace',
                  params: ({ context, event }) => ({ type: 'retry', step: context.step, attempt: event.attempt, at: event.at, delayMs: backoffDelayMs(context.retry, event.attempt), error: event.error }),
                },
                assign(({ event }) => ({ failure: event.error, updatedAt: event.at })),
              ],
            },
            {
              // The last attempt failed with its body started: it compensates itself, once.
              guard: 'startedAndCurrent',
              target: 'compensating',
              actions: [
                { type: 'xreactor.write.trace', params: ({ context, event }) => ({ type: 'failed', step: context.step, attempt: event.attempt, at: event.at, error: event.error }) },
                assign(({ event }) => ({ failure: event.error, updatedAt: event.at })),
              ],
            },
            {
              // Never started (its input contract): nothing to compensate.
              guard: 'isCurrent',
              target: 'failed',
              actions: [
                { type: 'xreactor.write.trace', params: ({ context, event }) => ({ type: 'failed', step: context.step, attempt: event.attempt, at: event.at, error: event.error }) },
                assign(({ event }) => ({ end: { status: 'failed' as const, error: event.error }, updatedAt: event.at })),
              ],
            },
          ],
        },
      },
      retrying: {
        tags: tagsAt('retrying'),
        entry: { type: 'xreactor.effect.unit.wait', params: ({ context }) => ({ attempt: context.attempt, delayMs: backoffDelayMs(context.retry, context.attempt), error: context.failure! }) },
        on: {
          'xreactor.timer.fired': {
            guard: ({ context, event }) => event.attempt === context.attempt,
            target: 'running',
            actions: assign(({ context, event }) => ({ attempt: context.attempt + 1, failure: null, updatedAt: event.at })),
          },
        },
      },
      compensating: {
        tags: tagsAt('compensating'),
        entry: { type: 'xreactor.effect.unit.compensate', params: ({ context }) => ({ attempt: context.attempt, error: context.failure! }) },
        on: {
          'xreactor.unit.compensated': {
            target: 'failed',
            actions: [
              // A step without compensate has none to trace (its compensation is `skipped`).
              enqueueActions(({ context, event, enqueue }) => {
                if (event.skipped) return;
                enqueue({
                  type: 'xreactor.write.trace',
                  params: {
                    type: event.failure === null ? 'compensate' : 'compensate_failure',
                    step: context.step,
                    at: event.at,
                    ...(event.failure === null ? {} : { error: event.failure.error, reason: event.failure.reason }),
                  },
                });
              }),
              assign(({ context, event }) => ({
                end: { status: 'failed' as const, error: context.failure! },
                compensation: {
                  status: event.skipped ? ('skipped' as const) : event.failure === null ? ('completed' as const) : ('failed' as const),
                  failure: event.failure === null ? null : { step: context.step, kind: 'compensate' as const, ...event.failure },
                },
                updatedAt: event.at,
              })),
            ],
          },
        },
      },
      completed: { type: 'final', tags: tagsAt('completed'), entry: { type: 'settle', params: { status: 'completed' } } },
      failed: { type: 'final', tags: tagsAt('failed'), entry: { type: 'settle', params: { status: 'failed' } } },
      halted: { type: 'final', tags: tagsAt('halted'), entry: { type: 'settle', params: { status: 'halted' } } },
    },
  });
}

/** The unit machine. */
export type UnitMachine = ReturnType<typeof createUnitMachine>;
