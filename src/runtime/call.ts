import type { AheadLoop, HeldActor } from './actor-host.js';

/**
 * Who is advancing the actors of a call. A caller that is interrupted stores the run `aborted`; a
 * worker that is interrupted commits nothing, and the job is redelivered.
 */
export type Place = 'caller' | 'worker';

/**
 * One call into the runtime advancing actors in this process: a `run()`, a `continue()`, a job.
 * Actors it spawns are advanced in the same call, and signals between actors it advances are
 * applied within it: an inline run returns its final outcome.
 */
export interface Call {
  readonly signal: AbortSignal;
  readonly place: Place;
  /** Actors this call is advancing right now (on its stack), by id: a signal to one of them is applied when its turn comes back. */
  readonly active: Map<string, HeldActor>;
  /** How many frames of this call's stack advance each active actor (a nested frame leaving keeps it active for the outer one). */
  readonly depth: Map<string, number>;
  /** Actors created by commits of this call and not driven yet, by id, with how to start them. */
  readonly spawned: Map<string, { readonly held: HeldActor; readonly start: (call: Call) => Promise<void> }>;
  /** Recipients of signals this call sent that it is not advancing, by id, with their kind; they are woken when the sender is idle. */
  readonly woken: Map<string, string>;
  /**
   * Actors this call took with their lease and loaded before signalling them (an element its
   * rollback actor found undoable), by id, with how to resume them: a signal to one of them is
   * handed to it, and the call advances it from there, without loading it again. Any left when
   * the call's outermost frame is done have their leases released.
   */
  readonly leased: Map<string, { readonly held: HeldActor; readonly resume: (call: Call) => Promise<void>; readonly loop: AheadLoop }>;
  /**
   * The kernel loops of the actors in {@link active}, by id: a commit signalling one of them that
   * waits for exactly that signal sends the recipient's commit for it right behind its own
   * (`ActorHost.sendAhead`).
   */
  readonly loops: Map<string, AheadLoop>;
  /**
   * Actors this call signalled and left to the process holding their lease (a wake job was
   * queued for each): what follows from those signals happens there, not in this call.
   */
  readonly leftToOthers: Set<string>;
}

/** A new call. */
export function newCall(signal: AbortSignal, place: Place): Call {
  return { signal, place, active: new Map(), depth: new Map(), spawned: new Map(), woken: new Map(), leased: new Map(), loops: new Map(), leftToOthers: new Set() };
}

/** A frame of `call` starts advancing `held`, with `loop` (its kind's kernel loop). */
export function enterActor(call: Call, held: HeldActor, loop: AheadLoop): void {
  call.active.set(held.id, held);
  call.loops.set(held.id, loop);
  call.depth.set(held.id, (call.depth.get(held.id) ?? 0) + 1);
}

/** That frame is done: `held` stays active while an outer frame still advances it. */
export function leaveActor(call: Call, held: HeldActor): void {
  const depth = (call.depth.get(held.id) ?? 1) - 1;
  if (depth > 0) {
    call.depth.set(held.id, depth);
    return;
  }
  call.depth.delete(held.id);
  call.active.delete(held.id);
  call.loops.delete(held.id);
}
