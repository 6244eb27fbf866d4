import type { Logger } from 'pino';
import type { ActorTag } from '../../machines/registry-types.js';
import { InboxPendingError, StaleRevisionError } from '../errors/index.js';
import type { Clock } from '../internal/clock.js';
import { jobId } from '../queue/job-ids.js';
import type { JobSpec, Queue } from '../queue/queue.js';
import { isCommitRefusal } from '../store/store.js';
import type { Commit, CommitOptions, DeliveredSignal, Inbox, InboxEntry, LoadedActor, LoadedExecution, OutboxEffect, PersistedSnapshot, Signal, SignalEvent, Store, AcquireAndLoadOptions } from '../store/store.js';
import type { Call } from './call.js';
import { enterActor, leaveActor } from './call.js';
import type { HeldLease } from './lease.js';
import { isConditionalWake, WAKE_EFFECT, wakeOf } from './wake.js';

/** An actor held by this process: its snapshot, the revision it was read at, its outbox and inbox. */
export interface HeldActor {
  readonly id: string;
  snapshot: { readonly value: unknown; readonly context: unknown };
  revision: number;
  /** The outbox of its last commit: the work pending after it. */
  outbox: readonly OutboxEffect[];
  /** Its inbox as last read: unconsumed entries and the highest seq seen (a commit names it). */
  inbox: Inbox;
  /** Entries its current state did not accept (tried again after its next transition). */
  readonly declined: Set<number>;
  /** Signals may have landed since the inbox was read (after waiting for another actor): read it again before going idle. */
  inboxStale: boolean;
  /**
   * Stale only for the signal of this actor, which it waits for (see {@link awaitActor}): when
   * that signal is handed to it in the call, it need not read its inbox again.
   */
  expects?: string | undefined;
  /** The last commit's effects wait for the inbox entries that landed meanwhile (which may supersede them). */
  outboxPending?: boolean;
  /** This process's lease on the actor, when it holds one. */
  lease: HeldLease | undefined;
  /**
   * The receipt of the last commit this process made of the actor: the dedupe keys of its
   * conditional signals that landed (`CommitOptions.landedSignals`); undefined when unknown (the
   * outbox was loaded, or the commit asked for none), and then a conditional wake is performed.
   */
  landed?: ReadonlySet<string> | undefined;
  /**
   * Recipients this call is advancing that the last commit's signals were handed to in-process
   * (`CommitOptions.delivered`): their wakes have nothing left to do.
   */
  handed?: ReadonlySet<string> | undefined;
  /**
   * An entry another actor of this call handed to this one is in its inbox, not applied yet: the
   * next event's commit would have been refused for it, so it is applied first (as that refusal would).
   */
  handedPending?: boolean;
  /**
   * Taken up from the state its job carries instead of the store: its first commit takes the
   * lease and applies only if the stored snapshot is still exactly `ifSnapshot` (a hand-off, a
   * rollback actor's start), or creates the actor, fenced by its absence (`create`: a fan-out
   * element's start, docs/design/map.md §19). See {@link commitLease}.
   */
  fromJob?: { readonly ifSnapshot: Uint8Array; readonly create?: undefined } | { readonly create: NonNullable<CommitOptions['create']>; readonly ifSnapshot?: undefined } | undefined;
  /**
   * Its commit for a signal another actor of this call is sending it, sent right behind the
   * sender's before either was answered ({@link ActorHost.sendAhead}); taken up when its turn
   * comes to apply that entry.
   */
  ahead?: AheadStep | undefined;
}

/**
 * A commit sent ahead of the signal it applies: the entry it predicted (the seq after the last
 * one the actor has seen), the transition, the receipts its commit fills, and what the commit
 * reports: the new revision, or the failure (`SignalNotLandedError` when the signal did not land
 * under that seq), which the actor's turn takes up (`#takeAhead`).
 */
export interface AheadStep {
  readonly entry: InboxEntry;
  readonly transition: Transition;
  readonly receipt: string[] | undefined;
  readonly delivered: DeliveredSignal[] | undefined;
  readonly outcome: Promise<number | { readonly refused: unknown }>;
}

/** What a kernel loop offers another actor's loop in the same call: {@link ActorHost.sendAhead}. */
export interface AheadLoop {
  sendAhead(held: HeldActor, signal: Signal, call: Call): void;
}

const noop = (): void => undefined;

/** A commit that neither takes nor releases the lease. */
const NO_LEASE_CHANGE: CommitLease = { options: {}, fromJob: false, refused: noop, landed: noop };

/** The lease side of one commit (see {@link commitLease}). */
export interface CommitLease {
  /** The commit's lease options (none when the commit neither takes nor releases the lease). */
  readonly options: Pick<CommitOptions, 'takeLease' | 'ifSnapshot' | 'create' | 'releaseLease'>;
  /** The commit is the first from a carried state. */
  readonly fromJob: boolean;
  /** The commit was refused: a lease held before it is renewed again (one it was to take was never taken). */
  readonly refused: () => void;
  /** The commit landed: the held lease records what it did. */
  readonly landed: () => void;
}

/**
 * The lease side of a commit of `held`: one that leaves this process (`leaves`: a settle, a
 * hand-off from the caller) releases the lease in the same step; the first commit of an actor
 * taken up from its job's carried state takes it, fenced by those bytes, and, when it also leaves,
 * gives it back in that same step (no release call after the job).
 */
export function commitLease(held: HeldActor, leaves: boolean): CommitLease {
  // The per-step commit of a held actor: nothing to take or release (no allocation on that path).
  if (!leaves && held.fromJob === undefined) return NO_LEASE_CHANGE;
  const fromJob = held.fromJob !== undefined && held.lease !== undefined ? { lease: held.lease, fence: held.fromJob } : undefined;
  const releasing = leaves && held.lease?.held === true ? held.lease : undefined;
  const release = releasing ?? (leaves ? fromJob?.lease : undefined);
  return {
    options: {
      ...(release === undefined ? {} : { releaseLease: release.letGo() }),
      ...(fromJob === undefined ? {} : { takeLease: fromJob.lease.request, ...(fromJob.fence.create === undefined ? { ifSnapshot: fromJob.fence.ifSnapshot } : { create: fromJob.fence.create }) }),
    },
    fromJob: fromJob !== undefined,
    refused: () => releasing?.taken(),
    landed: () => {
      release?.released();
      if (fromJob === undefined) return;
      held.fromJob = undefined;
      // Taken by this commit, and kept unless the same commit gave it back.
      if (release === undefined) fromJob.lease.taken();
    },
  };
}

/** A transition of one actor, computed by its kind and committed by the kernel. */
export interface Transition {
  readonly next: HeldActor['snapshot'];
  /** The commit, without the inbox fields (the kernel adds `inboxSeen` and `consumed`). */
  readonly commit: Commit;
  readonly options: CommitOptions | undefined;
  readonly effects: readonly OutboxEffect[];
  /**
   * Actors listed for the sweeper with the commit (`CommitOptions.list`: no later than it lands,
   * and still once it has). (Actors the commit spawns are listed by the store, see `SpawnActor.listed`.)
   */
  readonly listed: readonly string[];
  /** Called right after the commit is sent, before it lands (with the revision it will have). */
  readonly sent?: (revision: number) => void;
  /** The commit was refused: give back what preparing it took (a lease it was to release). */
  readonly refused?: () => void;
  /**
   * A refusal the kind answers with another event instead of failing (nothing was written): a
   * fan-out element's gated start refused because its map stopped → its skip.
   */
  readonly instead?: (error: unknown) => SignalEvent | undefined;
  /** The commit landed (the held actor has its new snapshot): the kind records what it keeps beside it and emits its observations. */
  readonly landed: (call: Call, previous: HeldActor['snapshot']) => Promise<void> | undefined;
  /**
   * The transition only consumes a signal (a late async unit settle): its commit carries the
   * actor's stored outbox forward unchanged (`commit.outbox` is it), the kernel performs nothing
   * for it, and the work pending before it is still pending after it (a recovery performs it).
   */
  readonly keepsOutbox?: boolean;
}

/** What the kernel needs of one kind of actor: its pure transition and its performers. */
export interface ActorBehaviour<H extends HeldActor> {
  /** The commit `event` leads to, or undefined when the actor's state does not accept it. */
  transition(held: H, event: SignalEvent, call: Call): Transition | undefined | Promise<Transition | undefined>;
  /**
   * The transition `event` leads to, computed at once and with nothing done that its `refused`
   * does not give back (no actor spawned, nothing read), or undefined when there is none such: the
   * kernel then sends its commit ahead of the signal that carries `event` ({@link ActorHost.sendAhead}).
   * Absent: this kind's commits are never sent ahead.
   */
  transitionAhead?(held: H, event: SignalEvent, call: Call): Transition | undefined;
  /** Perform one committed effect; its outcome is the actor's next event. */
  perform(held: H, effect: OutboxEffect, call: Call): Promise<SignalEvent | undefined>;
  /** The tags of a state value (settled, undoable, ...), as its machine declares them. */
  tags(value: unknown): ReadonlySet<ActorTag>;
  /** Take on the actor as another process left it (its snapshot moved on while this one held an older one). */
  adopt(held: H, loaded: LoadedExecution): void;
  /** The held snapshot as stored. */
  persist(held: H): { readonly snapshot: PersistedSnapshot; readonly status: Commit['status'] };
  /**
   * What a sweep does for a stored actor of this kind that is listed active and has no live
   * lease (its process died, or its wake was lost). `look` loads another actor (one it awaits).
   */
  sweep(id: string, loaded: LoadedExecution, look: SweepLook): SweepVerdict | Promise<SweepVerdict>;
}

/**
 * A sweep's look at an actor: the actor as stored; undefined when it is unknown or unreadable
 * (the sweep marks it failed in the store); `'not_here'` when this build cannot read it (a kind
 * or machine version another build wrote).
 */
export type SweepLook = (id: string) => Promise<LoadedActor | undefined | 'not_here'>;

/**
 * What a sweep does for a listed actor with no live lease: `job` enqueues a job that applies its
 * inbox or performs its outbox again; `deliver` enqueues a job delivering `event` (what a wake
 * lost on the way would have brought: a timer, an awaited actor's end); `keep` leaves it listed;
 * `drop` removes it from the index.
 */
export type SweepVerdict = { readonly action: 'job' | 'keep' | 'drop' } | { readonly action: 'deliver'; readonly event: SignalEvent };

/** The kernel loop of one kind's host, with the type of its held actors erased. */
export type AnyActorLoop = Pick<ActorHost<never>, 'drive' | 'resume' | 'sendAhead'>;

/**
 * A kind of actor as the engine keeps it: how a stored actor of the kind is loaded, advanced (its
 * kernel loop) and swept. Jobs, wakes and sweeps addressed to the kind go to it.
 */
export interface KindHost<H extends HeldActor = HeldActor> {
  readonly loop: Pick<ActorHost<H>, 'drive' | 'resume' | 'sendAhead'>;
  /** The held actor of a stored one (as `load` or `acquireAndLoad` read it; `input` when read with it), or undefined when it is gone. */
  load(id: string, loaded: LoadedExecution, input: { readonly value: unknown } | undefined): Promise<H | undefined>;
  /** See {@link ActorBehaviour.sweep}. */
  sweep(id: string, loaded: LoadedExecution, look: SweepLook): SweepVerdict | Promise<SweepVerdict>;
  /**
   * The held actor a start job (`JobSpec.start`) builds, not stored yet, for a kind whose first
   * work is its creation's outbox: held at revision 0 with `fromJob.create`, so the commit its
   * first work leads to creates it, fenced by its absence, and takes the lease. Absent: such
   * jobs read the store.
   */
  fromStartJob?(id: string, start: NonNullable<JobSpec['start']>): H;
}

/** An actor taken with its lease and loaded with the host of its kind. */
export interface LeasedActor {
  readonly kind: string;
  /** The kernel loop of its kind's host. */
  readonly loop: AnyActorLoop;
  readonly held: HeldActor;
}

/** Services of the kernel. */
export interface KernelDeps {
  readonly store: Store;
  readonly queue: Queue | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  /** A lease on an actor for this process, not taken yet. */
  readonly lease: (id: string) => HeldLease;
  /** Take an actor's lease and load it with the host of its kind, in one store call (see Engine.loadLeased). */
  readonly loadLeased: (lease: HeldLease, options?: AcquireAndLoadOptions) => Promise<LeasedActor | 'busy' | 'missing'>;
}

/**
 * `committed` and `replaced` (the commit was refused for a reason its kind answers with another
 * event, nothing written) go on with `next`; `refused` delivers the event again after the inbox.
 */
type StepOutcome =
  | { readonly status: 'ignored' }
  | { readonly status: 'refused' }
  /** A signal consumed with nothing to do (`Transition.keepsOutbox`): the work pending before it is still pending. */
  | { readonly status: 'kept' }
  | { readonly status: 'committed' | 'replaced'; readonly next: SignalEvent | undefined };

/**
 * The kernel's host loop, the same for every kind of actor: event → the kind's pure transition →
 * one fenced commit (snapshot, writes, outbox, signals, spawned actors, the inbox entry applied) →
 * perform the effects → their outcome is the next event; when idle, the inbox. A commit refused
 * for a signal it had not seen applies that signal first. Actors this call signalled and does not
 * advance are woken when the sender is idle.
 */
export class ActorHost<H extends HeldActor> {
  readonly #deps: KernelDeps;
  readonly #kind: ActorBehaviour<H>;

  constructor(deps: KernelDeps, kind: ActorBehaviour<H>) {
    this.#deps = deps;
    this.#kind = kind;
  }

  /**
   * Feed `first` to the actor and keep going until it is idle. Returns whether the actor accepted
   * `first` (a stale or duplicate delivery is ignored without a commit, and nothing else is done).
   */
  drive(held: H, first: SignalEvent, call: Call): Promise<boolean> {
    return releasingLeftOver(call, async () => {
      const outcome = await this.#step(held, first, undefined, call);
      if (outcome.status === 'ignored') {
        this.#ignored(held, first);
        return false;
      }
      await this.continueWith(held, outcome.status === 'refused' ? first : outcome.status === 'kept' ? undefined : outcome.next, call);
      return true;
    });
  }

  /**
   * Recover a loaded actor: apply its inbox first (a signal such as a cancel supersedes the pending
   * work), else perform its committed outbox again (after a crash or a lost job); then keep driving.
   */
  resume(held: H, outbox: readonly OutboxEffect[], call: Call): Promise<void> {
    return releasingLeftOver(call, async () => {
      let applied: boolean;
      let next: SignalEvent | undefined;
      enterActor(call, held, this);
      try {
        applied = await this.#applyInbox(held, call);
        next = applied ? undefined : await this.performAll(held, outbox, call);
      } finally {
        leaveActor(call, held);
      }
      // Not within this frame: continueWith wakes others once the actor is idle, and a wake of this
      // actor by one of them must not find it "active" in a frame that is about to end.
      await this.continueWith(held, next, call);
    });
  }

  /** Drive from `event` (when set) until idle, then wake the actors it signalled that this call is not advancing. */
  continueWith(held: H, event: SignalEvent | undefined, call: Call): Promise<void> {
    return releasingLeftOver(call, async () => {
      enterActor(call, held, this);
      try {
        let next = event;
        for (;;) {
          while (next !== undefined) {
            const outcome = await this.#step(held, next, undefined, call);
            if (outcome.status === 'ignored') {
              this.#ignored(held, next);
              break;
            }
            // Refused for a signal it had not seen: the inbox was applied; deliver the event again.
            next = outcome.status === 'refused' ? next : outcome.status === 'kept' ? undefined : outcome.next;
          }
          if (await this.#applyInbox(held, call)) {
            next = undefined;
            continue;
          }
          // No signal superseded the last commit's work: perform it now.
          if (held.outboxPending !== true) break;
          held.outboxPending = false;
          next = await this.performAll(held, held.outbox, call);
          if (next === undefined) break;
        }
      } finally {
        leaveActor(call, held);
      }
      // A frame further out still advances it: that frame wakes them when it is done. Waking here
      // would advance other actors while that frame is suspended, and one whose lease a commit of
      // this frame released (a settle) would then take their signals without holding it.
      if (call.active.has(held.id)) return;
      if (call.active.size === 0 || !call.active.has(parentOf(held.id))) await this.#wake(call);
    });
  }

  /** Perform effects in order; the last outcome is the next event. */
  async performAll(held: H, effects: readonly OutboxEffect[], call: Call): Promise<SignalEvent | undefined> {
    let event: SignalEvent | undefined;
    for (const effect of effects) {
      const produced = await this.#perform(held, effect, call);
      if (produced !== undefined) event = produced;
    }
    return event;
  }

  /**
   * `held` waits for the signal of actor `id` (an `awaitChild` effect): advance `id` in this call
   * (see {@link advance}); its signal is handed to `held` here, or `held` reads its inbox again
   * before going idle (see {@link awaitActor}).
   */
  async advanceAwaited(held: H, id: string, call: Call): Promise<void> {
    awaitActor(held, id);
    await this.advance(id, call);
  }

  /**
   * Advance actor `id` in this call when nothing else does: a child this call spawned, or one
   * whose lease is free. One another process advances signals when it is done.
   */
  async advance(id: string, call: Call): Promise<void> {
    // Advanced here (or by a frame of this call further out): no wake needed. Held by another
    // lease (another process, or this call's own wake of it still on the stack): a wake this
    // commit noted stays noted, so the actor is woken (by a job) once this one is idle.
    const active = call.active.get(id);
    if (active !== undefined) {
      // A frame further out advances it: it reads its inbox again before it goes idle.
      markStale(active);
      call.woken.delete(id);
      return;
    }
    // Spawned by this call, or taken with its lease and loaded before it was signalled (the signal
    // handed to it): advanced from what this call holds, without loading it.
    const spawned = call.spawned.get(id);
    const held = spawned === undefined ? call.leased.get(id) : undefined;
    const ready = spawned !== undefined ? { actor: spawned.held, go: spawned.start, from: call.spawned } : held !== undefined ? { actor: held.held, go: held.resume, from: call.leased } : undefined;
    if (ready !== undefined) {
      ready.from.delete(id);
      call.woken.delete(id);
      try {
        await ready.go(call);
      } finally {
        await ready.actor.lease?.end();
      }
      return;
    }
    const lease = this.#deps.lease(id);
    try {
      const found = await this.#deps.loadLeased(lease);
      if (found === 'missing') call.woken.delete(id);
      if (typeof found === 'string') return;
      call.woken.delete(id);
      found.held.lease = lease;
      await found.loop.resume(found.held as never, found.held.outbox, call);
    } finally {
      await lease.end();
    }
  }

  #ignored(held: H, event: SignalEvent): void {
    this.#deps.logger.debug({ event: 'xreactor.event.ignored', executionId: held.id, type: event.type }, 'event not accepted in this state');
  }

  async #perform(held: H, effect: OutboxEffect, call: Call): Promise<SignalEvent | undefined> {
    if (effect.type === WAKE_EFFECT) {
      // An actor this call is advancing meets the signal when its turn comes back; others are woken when this one is idle.
      const { actor, kind, ifLanded } = wakeOf(effect);
      // A conditional signal's wake: only when its signal landed (or when that is not known).
      if (ifLanded !== undefined && held.landed !== undefined && !held.landed.has(ifLanded)) return undefined;
      // Handed to it in this call: it applies the entry when its turn comes back.
      if (held.handed?.has(actor) === true) return undefined;
      const active = call.active.get(actor);
      // Advanced by a frame of this call further out: it reads its inbox again before it goes idle.
      if (active !== undefined) markStale(active);
      else call.woken.set(actor, kind);
      return undefined;
    }
    return this.#kind.perform(held, effect, call);
  }

  /**
   * Apply the first inbox entry the actor's state accepts (reading the inbox again if it may be
   * stale), with everything that follows from it. Returns false when no entry was accepted. A
   * settled actor that cannot be undone discards the entries it does not accept, with a trace entry each.
   */
  async #applyInbox(held: H, call: Call): Promise<boolean> {
    // Every entry is tried here, a handed one too.
    held.handedPending = false;
    // Its commit sent ahead, with the entry it applies not handed to it: taken up before anything
    // is read (landed, the entry is applied and what follows from it done; refused, nothing was).
    const ahead = held.ahead;
    if (ahead !== undefined && !held.inbox.entries.some((e) => e.seq === ahead.entry.seq)) {
      if ((await this.#takeAhead(held, undefined, call)) !== undefined) return true;
    }
    if (held.inboxStale) {
      // The actor and its inbox in one read: another process may have applied the entries (and
      // moved the actor on) meanwhile; then this one goes on from where it left the actor.
      const loaded = await this.#deps.store.load(held.id);
      held.inboxStale = false;
      held.expects = undefined;
      if (loaded !== undefined) {
        if (loaded.revision !== held.revision) {
          this.#kind.adopt(held, loaded);
          held.outboxPending = false;
          held.declined.clear();
          held.landed = undefined;
        }
        held.inbox = loaded.inbox;
      }
    }
    // A commit of this call released its lease (it settled, or left for a worker): a signal it may
    // accept (an undo after its end) is applied under the lease taken again, or by its holder.
    // (One settled for good accepts none: its entries are discarded, fenced by its revision.)
    if (held.lease !== undefined && !held.lease.held && !this.#settledForGood(held) && held.inbox.entries.some((e) => !held.declined.has(e.seq))) {
      if (!(await held.lease.retake())) {
        // Its new holder applies them.
        call.leftToOthers.add(held.id);
        return false;
      }
    }
    for (const entry of held.inbox.entries) {
      if (held.declined.has(entry.seq)) continue;
      const outcome = await this.#step(held, entry.event, entry, call);
      if (outcome.status === 'ignored') {
        held.declined.add(entry.seq);
        continue;
      }
      // Consumed with nothing to do: its pending work is unchanged (a recovery still performs it).
      if (outcome.status === 'kept') continue;
      if (outcome.status !== 'refused') await this.continueWith(held, outcome.next, call);
      return true;
    }
    const left = held.inbox.entries.filter((e) => held.declined.has(e.seq));
    if (left.length > 0 && this.#settledForGood(held)) await this.#discard(held, left);
    return false;
  }

  /** Settled, and no signal will move it again (it cannot be undone). */
  #settledForGood(held: H): boolean {
    const tags = this.#kind.tags(held.snapshot.value);
    return tags.has('settled') && !tags.has('undoable');
  }

  /** A settled actor's inbox entries no state of it will accept: consumed with a trace entry each, nothing else changes. */
  async #discard(held: H, entries: readonly InboxEntry[]): Promise<void> {
    const at = this.#deps.clock.now();
    const commit: Commit = {
      ...this.#kind.persist(held),
      writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: entries.map((e) => ({ type: 'signal_discarded' as const, at, signal: e.event.type })) },
      outbox: [],
      inboxSeen: held.inbox.seq,
      consumed: entries.map((e) => e.seq),
    };
    try {
      // Settled for good: off the recovery index with it (the late signal's sender listed it).
      held.revision = await this.#deps.store.commit(held.id, held.revision, commit, { unlist: true });
      held.inbox = { entries: held.inbox.entries.filter((e) => !entries.includes(e)), seq: held.inbox.seq };
    } catch (error) {
      // Another process moved it meanwhile: it discards them itself.
      this.#deps.logger.debug({ event: 'xreactor.inbox.discard_refused', executionId: held.id, err: error }, 'could not discard settled inbox entries');
    }
  }

  /**
   * Wake the actors this call signalled and is not advancing: take each one's lease and drive it
   * here (so an inline continue returns the root's outcome); one another process holds gets a
   * wake job instead.
   */
  async #wake(call: Call): Promise<void> {
    for (const [id, kind] of [...call.woken]) {
      call.woken.delete(id);
      if (call.active.has(id)) continue;
      const lease = this.#deps.lease(id);
      try {
        const found = await this.#deps.loadLeased(lease);
        if (found === 'missing') continue;
        if (found === 'busy') {
          call.leftToOthers.add(id);
          await this.#deps.queue?.enqueue([{ id: jobId(id, 'wake', this.#deps.clock.now()), kind: 'advance', actor: { kind, id } }]);
          continue;
        }
        found.held.lease = lease;
        await found.loop.resume(found.held as never, found.held.outbox, call);
      } finally {
        await lease.end();
      }
    }
  }

  /**
   * One transition: the kind computes the commit `event` leads to (an inbox entry's, when `entry`
   * is set); the kernel commits it, fenced by revision and inbox, then performs its effects.
   * `ignored`: the state does not accept the event (nothing written). `refused`: a signal landed
   * that the actor had not seen; it has been applied, and the caller delivers `event` again.
   */
  async #step(held: H, event: SignalEvent, entry: InboxEntry | undefined, call: Call): Promise<StepOutcome> {
    const { store } = this.#deps;
    if (entry === undefined && held.handedPending === true) {
      // A signal handed to it in this call comes first, as the refusal of this commit would have had it.
      held.handedPending = false;
      held.declined.clear();
      await this.#applyInbox(held, call);
      return { status: 'refused' };
    }
    if (held.ahead !== undefined) {
      const taken = await this.#takeAhead(held, entry, call);
      if (taken !== undefined) return taken;
    }
    // Most transitions are computed without waiting (only one that spawns validates input): no extra tick per step.
    const computed = this.#kind.transition(held, event, call);
    const transition = computed instanceof Promise ? await computed : computed;
    if (transition === undefined) return { status: 'ignored' };
    const commit: Commit = { ...transition.commit, inboxSeen: held.inbox.seq, ...(entry === undefined ? {} : { consumed: [entry.seq] }) };
    const { options, receipt, delivered } = this.#commitOptions(transition, commit, held.id, call);
    // Recipients of its signals that wait for exactly them: their commits go right behind this one.
    const sent = delivered === undefined ? options : { ...options, sending: () => this.#sendAheadTo(held, commit.signals!, call) };
    const committing = store.commit(held.id, held.revision, commit, sent);
    transition.sent?.(held.revision + 1);
    try {
      held.revision = await committing;
    } catch (error) {
      transition.refused?.();
      const instead = transition.instead?.(error);
      if (instead !== undefined) return { status: 'replaced', next: instead };
      if (error instanceof StaleRevisionError && !(error instanceof InboxPendingError) && entry !== undefined && handedEntries.has(entry)) {
        // Applying an entry handed to it in this call, without the read of its inbox that would
        // have shown it: another writer (an operator applying its inbox) moved it meanwhile. It
        // reads it now and goes on from there, as that read would have had it.
        markStale(held);
        return { status: 'refused' };
      }
      if (!(error instanceof InboxPendingError)) throw error;
      // A signal landed since the actor was read: apply it first (a cancel fences the work in flight).
      held.inbox = await store.readInbox(held.id);
      held.declined.clear();
      await this.#applyInbox(held, call);
      return { status: 'refused' };
    }
    return this.#landed(held, transition, entry, receipt, delivered, call);
  }

  /**
   * The options of a transition's commit: the kind's, with the actors it lists, the receipt of
   * its conditional signals (when a wake depends on one) and of the signals it delivers to actors
   * this call advances (whose entries are handed to them).
   */
  #commitOptions(transition: Transition, commit: Commit, id: string, call: Call): { options: CommitOptions | undefined; receipt: string[] | undefined; delivered: DeliveredSignal[] | undefined } {
    // The receipt of the conditional signals whose wakes depend on it.
    const receipt = transition.effects.some(isConditionalWake) ? [] : undefined;
    // Listed for the sweeper with the commit (the store does it atomically where it can).
    const listing = transition.listed.length > 0 ? { list: transition.listed } : undefined;
    // Signals to actors this call advances: the store's receipt hands them their entries.
    const delivered = commit.signals?.some((signal) => signal.to !== id && (call.active.has(signal.to) || call.leased.has(signal.to))) === true ? [] : undefined;
    const options =
      receipt === undefined && listing === undefined && delivered === undefined
        ? transition.options
        : { ...transition.options, ...listing, ...(receipt === undefined ? {} : { landedSignals: receipt }), ...(delivered === undefined ? {} : { delivered }) };
    return { options, receipt, delivered };
  }

  /**
   * The commit of `transition` landed (the held revision is the new one): the held actor takes
   * its snapshot, outbox and receipts, the entry it applied leaves its inbox, the kind records
   * what it keeps; then its effects are performed (their outcome is the next event), unless a
   * signal that landed meanwhile comes first.
   */
  async #landed(held: H, transition: Transition, entry: InboxEntry | undefined, receipt: string[] | undefined, delivered: DeliveredSignal[] | undefined, call: Call): Promise<StepOutcome> {
    const previous = held.snapshot;
    held.snapshot = transition.next;
    // (An entry applied by a commit sent ahead may not have been handed to it: its seq is seen now.)
    if (entry !== undefined) held.inbox = { entries: held.inbox.entries.filter((e) => e.seq !== entry.seq), seq: Math.max(held.inbox.seq, entry.seq) };
    if (transition.keepsOutbox === true) {
      // The stored outbox was carried forward: nothing to perform, nothing pending changes.
      held.landed = undefined;
      held.handed = undefined;
      held.declined.clear();
      const kept = transition.landed(call, previous);
      if (kept !== undefined) await kept;
      return { status: 'kept' };
    }
    held.outbox = transition.effects;
    held.landed = receipt === undefined ? undefined : new Set(receipt);
    held.handed = delivered === undefined ? undefined : handOver(delivered, held.id, call);
    held.outboxPending = false;
    held.declined.clear();
    const landing = transition.landed(call, previous);
    if (landing !== undefined) await landing;
    // Signals that landed meanwhile come first: an inbox entry not tried yet (a cancel behind a
    // resume) may supersede this commit's work, which is then never started. Wakes are noted now.
    if (held.inbox.entries.some((e) => !held.declined.has(e.seq))) {
      for (const effect of transition.effects) if (effect.type === WAKE_EFFECT) await this.#perform(held, effect, call);
      held.outboxPending = true;
      return { status: 'committed', next: undefined };
    }
    return { status: 'committed', next: await this.performAll(held, transition.effects, call) };
  }

  /**
   * Send the commits of the recipients of `signals` that this call holds and that wait for
   * exactly that signal, right behind the sender's commit (called once that commit is on its
   * way): an element its rollback actor took with its lease and signals to undo, a rollback actor
   * awaiting its element's end. Each recipient's loop decides (see {@link sendAhead}).
   */
  #sendAheadTo(sender: H, signals: readonly Signal[], call: Call): void {
    for (const signal of signals) {
      if (signal.to === sender.id || signal.cascade === true || signal.condition !== undefined) continue;
      // Two signals to one recipient: the second's entry would follow the first's.
      if (signals.some((other) => other !== signal && other.to === signal.to)) continue;
      const leased = call.leased.get(signal.to);
      const recipient = leased?.held ?? call.active.get(signal.to);
      const loop = leased?.loop ?? call.loops.get(signal.to);
      if (recipient === undefined || loop === undefined) continue;
      // Taken ahead, its inbox read with it; advanced by a frame further out, awaiting this sender.
      const waits = leased !== undefined ? !recipient.inboxStale : recipient.inboxStale && recipient.expects === sender.id;
      if (waits) loop.sendAhead(recipient, signal, call);
    }
  }

  /**
   * Send `held`'s commit for `signal`, which a commit just sent before this one carries to it:
   * computed as if the signal had landed as the next entry of its inbox, and applied by the store
   * only if it did (`Commit.signalAhead`). One store call for both where the store groups commits,
   * and one round trip less for the recipient in any case. Only an actor with nothing else to
   * apply or perform, whose kind computes the transition at once ({@link ActorBehaviour.transitionAhead});
   * its turn to apply the entry takes the outcome up ({@link #takeAhead}). A commit refused goes
   * for nothing: the entry is then applied as it would have been.
   */
  sendAhead(held: HeldActor, signal: Signal, call: Call): void {
    const actor = held as H;
    const kind = this.#kind;
    if (kind.transitionAhead === undefined || actor.ahead !== undefined || actor.fromJob !== undefined || actor.handedPending === true || actor.outboxPending === true || actor.inbox.entries.length > 0) return;
    const entry: InboxEntry = { seq: actor.inbox.seq + 1, event: signal.event, dedupeKey: signal.dedupeKey };
    let transition: Transition | undefined;
    try {
      transition = kind.transitionAhead(actor, entry.event, call);
    } catch {
      // Its turn computes it again, and meets the error there.
      return;
    }
    if (transition === undefined || transition.keepsOutbox === true) return;
    const commit: Commit = { ...transition.commit, inboxSeen: entry.seq, consumed: [entry.seq], signalAhead: entry.dedupeKey };
    const { options, receipt, delivered } = this.#commitOptions(transition, commit, actor.id, call);
    // Its refusal is taken up in its turn (`#takeAhead`), which gives back what the commit took.
    const outcome = this.#deps.store.commit(actor.id, actor.revision, commit, options).then(
      (revision) => revision,
      (refused: unknown) => ({ refused }),
    );
    transition.sent?.(actor.revision + 1);
    actor.ahead = { entry, transition, receipt, delivered, outcome };
  }

  /**
   * The actor's commit sent ahead, at its next step: landed, it is this step when the step
   * applies its entry (else that entry comes first, with what follows from it, and the step's
   * event is delivered again after it, as a refusal for it would have had it); refused, the step
   * goes on as if none had been sent (undefined).
   */
  async #takeAhead(held: H, entry: InboxEntry | undefined, call: Call): Promise<StepOutcome | undefined> {
    const ahead = held.ahead!;
    held.ahead = undefined;
    const outcome = await ahead.outcome;
    if (typeof outcome !== 'number') {
      // Given back in its own turn, while this actor is still held (a lease its commit was to
      // release is renewed again).
      ahead.transition.refused?.();
      // A refusal wrote nothing. Any other failure (a timeout, a lost connection) leaves the
      // outcome unknown, as it would for the commit made in its turn: it is thrown, and the
      // actor is recovered from what the store holds.
      if (!isCommitRefusal(outcome.refused)) throw outcome.refused;
      return undefined;
    }
    held.revision = outcome;
    const landed = await this.#landed(held, ahead.transition, ahead.entry, ahead.receipt, ahead.delivered, call);
    if (entry !== undefined && entry.seq === ahead.entry.seq) return landed;
    if (landed.status === 'committed' || landed.status === 'replaced') await this.continueWith(held, landed.next, call);
    return { status: 'refused' };
  }
}

/** Inbox entries handed to their recipient in a call (`handOver`), not read from the store. */
const handedEntries = new WeakSet<InboxEntry>();

/**
 * Hand each delivered entry to its recipient when this call advances it and the entry follows the
 * last seq it has seen (nothing it has not seen landed before it; otherwise it reads its inbox
 * again, as its wake has it). Returns the recipients handed their entries.
 */
function handOver(delivered: readonly DeliveredSignal[], sender: string, call: Call): ReadonlySet<string> | undefined {
  let handed: Set<string> | undefined;
  for (const { to, entry } of delivered) {
    const recipient = call.active.get(to) ?? call.leased.get(to)?.held;
    if (recipient === undefined || to === sender || (recipient.inboxStale && recipient.expects !== sender) || entry.seq !== recipient.inbox.seq + 1) continue;
    recipient.inbox = { entries: [...recipient.inbox.entries, entry], seq: entry.seq };
    handedEntries.add(entry);
    recipient.inboxStale = false;
    recipient.expects = undefined;
    recipient.handedPending = true;
    (handed ??= new Set()).add(to);
  }
  return handed;
}

/**
 * Run one of the kernel's entry points (`drive`, `resume`, `continueWith`) for `call`; once no
 * frame of the call advances an actor any more (the outermost one is done, or threw), release the
 * leases of the actors it took and loaded ahead (`Call.leased`) and did not advance, so none is
 * renewed for nothing (an element stays free for the sweep that recovers its rollback).
 */
async function releasingLeftOver<T>(call: Call, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } finally {
    if (call.leased.size > 0 && call.active.size === 0) {
      const left = [...call.leased.values()];
      call.leased.clear();
      await Promise.all(left.map((taken) => taken.held.lease?.end() ?? Promise.resolve()));
    }
  }
}

/** Signals landed for `held` that it has not read (from anyone): it reads its inbox again before going idle. */
export function markStale(held: HeldActor): void {
  held.inboxStale = true;
  held.expects = undefined;
}

/**
 * `held` waits for the signal of actor `awaited`, which this call is about to advance (or which
 * another process advances): it reads its inbox again before going idle, unless that signal is
 * handed to it in the call.
 */
function awaitActor(held: HeldActor, awaited: string): void {
  if (held.inboxStale) return;
  held.inboxStale = true;
  held.expects = awaited;
}

/** The parent of an actor id (`<root>.<step>...`), or '' for a root. */
function parentOf(id: string): string {
  const dot = id.lastIndexOf('.');
  return dot < 0 ? '' : id.slice(0, dot);
}
