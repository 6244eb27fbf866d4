import type { Logger } from 'pino';
import type { Clock } from '../internal/clock.js';
import type { LeaseRequest, Store } from '../store/store.js';

/**
 * This process's liveness lease on one root execution.
 *
 * The lease is taken by the same store call that creates or loads the execution
 * (`create(..., { lease })`, `acquireAndLoad`), or by `acquireLease`. While held it is renewed
 * every third of its TTL. When the run leaves this process (a hand-off, or its end), the commit
 * that says so releases it in the same atomic step: {@link letGo} stops the renewals before
 * that commit is sent, {@link released} records that it landed. {@link end} releases whatever
 * is still held, so a failed or refused commit never leaves the lease behind.
 */
export class HeldLease {
  readonly id: string;
  readonly request: LeaseRequest;
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #logger: Logger;
  #held = false;
  #stopRenewing: (() => void) | undefined;

  constructor(deps: { readonly store: Store; readonly clock: Clock; readonly logger: Logger }, id: string, request: LeaseRequest) {
    this.id = id;
    this.request = request;
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /** Whether this process holds the lease (taken, and not released by a commit yet). */
  get held(): boolean {
    return this.#held;
  }

  /** The lease was taken: keep it alive until {@link letGo} or {@link end}. */
  taken(): void {
    this.#held = true;
    this.#stopRenewing?.();
    const { id, request } = this;
    this.#stopRenewing = this.#clock.every(Math.max(1, Math.floor(request.ttlMs / 3)), () => {
      this.#store.acquireLease(id, request.owner, request.ttlMs).then(
        (renewed) => {
          if (!renewed) this.#logger.error({ event: 'xreactor.lease.lost', executionId: id, owner: request.owner }, 'lease taken by another owner');
        },
        (error: unknown) => this.#logger.warn({ event: 'xreactor.lease.renew_failed', executionId: id, err: error }, 'lease renewal failed'),
      );
    });
  }

  /**
   * Stop renewing ahead of the commit that releases the lease; returns the owner that commit
   * names. (A renewal already sent reaches the store before that commit: both travel on the
   * same connection, in order.)
   */
  letGo(): string {
    this.#stopRenewing?.();
    this.#stopRenewing = undefined;
    return this.request.owner;
  }

  /**
   * Take the lease again after a commit released it (the actor settled, and a signal came that
   * moves it on): false when another owner holds it now, and that one applies the signal.
   */
  async retake(): Promise<boolean> {
    if (this.#held) return true;
    if (!(await this.#store.acquireLease(this.id, this.request.owner, this.request.ttlMs))) return false;
    this.taken();
    return true;
  }

  /** The commit that released the lease landed. */
  released(): void {
    this.#held = false;
  }

  /** Done with the execution: stop renewing, and release the lease if it is still held. */
  async end(): Promise<void> {
    this.letGo();
    if (!this.#held) return;
    this.#held = false;
    await this.#store.releaseLease(this.id, this.request.owner);
  }
}
