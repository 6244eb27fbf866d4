/**
 * Tags an actor machine's states carry. Every status question the runtime asks (is it settled,
 * may the sweeper recover it, is it waiting for other actors or for time) is answered by them.
 */
export type ActorTag =
  /** It has ended: it will not move again by itself (an undoable end may still be undone). */
  | 'settled'
  /** A process is (or should be) advancing it: with no live lease, the sweeper resumes it. */
  | 'recoverable'
  /** It waits for other actors and holds no worker; their signals wake it. */
  | 'awaiting'
  /** It waits for time (retry backoff, lock contention); a delayed job wakes it. */
  | 'parked'
  /** It waits for an operator (an interrupt). */
  | 'paused'
  /** An end an operator may still undo. */
  | 'undoable';

/**
 * The lifecycle status an actor's commit stores (`Commit.status`) and that statuses in the store
 * are read as (`Store.signal`'s `refuseIn`, the active index's sweeps). Every kind maps its states
 * onto these strings: an execution's are its top-level states, a map's and an element rollback's
 * are declared beside their machines.
 */
export type ActorStatus = 'pending' | 'queued' | 'running' | 'paused' | 'rolling_back' | 'completed' | 'failed' | 'halted' | 'cancelled' | 'aborted';
