import type { ExecutionEffect, ExecutionWrite, TraceEntry } from '../../machines/execution-types.js';
import type { CommitWrites, MapWrites, Signal, UndoEntry } from '../store/store.js';
import { DEFAULT_WAKE_KIND, wakeParams } from './wake.js';

/** The kind of a signal's recipient, when the machine names it (an execution's parent and children are executions). */
function recipientKind(params: { readonly to: string | null }): string {
  const { kind } = params as { readonly kind?: string };
  return kind ?? DEFAULT_WAKE_KIND;
}

/** An actor a commit spawns, as the machine asks for it. */
export type SpawnParams = Extract<ExecutionWrite, { type: 'xreactor.write.spawn' }>['params'];

/** What a transition's actions ask of its commit, sorted by kind. */
export interface CommitPlan {
  readonly writes: CommitWrites;
  /** Effects performed after the commit (its outbox). */
  readonly effects: ExecutionEffect[];
  /** Signals landing in other actors' inboxes with the commit. */
  readonly signals: Signal[];
  /** Composed children, map operations and async units created with the commit (built by the host). */
  readonly spawns: SpawnParams[];
  /** The actors awaited from this commit on (undefined: unchanged). */
  readonly awaits: readonly string[] | undefined;
}

/** Sort a transition's actions into writes, effects, signals, spawns and awaits. */
export function planCommit(actions: readonly { type: string; params?: unknown }[]): CommitPlan {
  const results: [string, unknown][] = [];
  const pushUndo: (UndoEntry & { position: number })[] = [];
  const trace: TraceEntry[] = [];
  const effects: ExecutionEffect[] = [];
  const signals: Signal[] = [];
  const spawns: SpawnParams[] = [];
  let map: MapWrites | undefined;
  const wakes: ExecutionEffect[] = [];
  let awaits: readonly string[] | undefined;
  let truncateUndoTo: number | undefined;
  for (const action of actions as (ExecutionWrite | ExecutionEffect)[]) {
    switch (action.type) {
      case 'xreactor.write.result':
        results.push([action.params.step, action.params.value]);
        break;
      case 'xreactor.write.pushUndo':
        pushUndo.push(action.params);
        break;
      case 'xreactor.write.popUndo':
        truncateUndoTo = action.params.position;
        break;
      case 'xreactor.write.trace':
        trace.push(action.params);
        break;
      case 'xreactor.write.signal':
        // A root has no parent: its settle and pause signals go nowhere.
        if (action.params.to !== null) {
          signals.push({ to: action.params.to, event: action.params.event, dedupeKey: action.params.dedupeKey });
          // The recipient's wake goes through the outbox: performed again when the outbox is.
          wakes.push({ type: 'xreactor.effect.wake', params: wakeParams(action.params.to, recipientKind(action.params)) });
        }
        break;
      case 'xreactor.write.mapSignal':
        signals.push({ to: action.params.to, event: action.params.event, dedupeKey: action.params.dedupeKey, condition: action.params.condition });
        wakes.push({ type: 'xreactor.effect.wake', params: wakeParams(action.params.to, 'map', action.params.dedupeKey) });
        break;
      case 'xreactor.write.mapReport':
        map = { ...map, ...action.params };
        break;
      case 'xreactor.write.spawn':
        spawns.push(action.params);
        break;
      case 'xreactor.write.awaits':
        awaits = action.params.actors;
        break;
      default:
        // Only the effect's data: XState's action objects also carry the whole context and event.
        if (action.type.startsWith('xreactor.effect.')) effects.push({ type: action.type, params: action.params } as ExecutionEffect);
    }
  }
  // Wakes first: they only note the recipients (woken when this actor is idle), so an effect that
  // advances a recipient in this call (awaitChild) takes it off that list instead of waking it twice.
  return { writes: { results, pushUndo, truncateUndoTo, trace, ...(map === undefined ? {} : { map }) }, effects: [...wakes, ...effects], signals, spawns, awaits };
}

/** Two plans of one creating commit (the creation and the input's verdict), as one. */
export function mergePlans(first: CommitPlan, second: CommitPlan): CommitPlan {
  return {
    writes: {
      results: [...first.writes.results, ...second.writes.results],
      pushUndo: [...first.writes.pushUndo, ...second.writes.pushUndo],
      truncateUndoTo: second.writes.truncateUndoTo ?? first.writes.truncateUndoTo,
      trace: [...first.writes.trace, ...second.writes.trace],
      ...(first.writes.map === undefined && second.writes.map === undefined ? {} : { map: { ...first.writes.map, ...second.writes.map } }),
    },
    effects: [...first.effects, ...second.effects],
    signals: [...first.signals, ...second.signals],
    spawns: [...first.spawns, ...second.spawns],
    awaits: second.awaits ?? first.awaits,
  };
}
