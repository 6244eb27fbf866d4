/**
 * Async units: a signup creates the user, sends the welcome email in its own job (an asyncStep,
 * retried there and never undone by the signup), and confirms once the email's outcome is known.
 * A failing email fails the signup only because the confirming step decides so: the user it
 * created is then undone, and the email compensated itself already.
 *
 *   npx tsx examples/async-units.ts
 */
import { z } from 'zod';
import { createRuntime, defineReactor, fail } from 'xreactor';

const users = new Map<string, string>();
let outbox = 0;

const signup = defineReactor({ name: 'signup', input: z.object({ email: z.string() }) })
  .step('createUser', {
    args: ({ input }) => ({ email: input('email') }),
    run: ({ email }) => {
      const id = `user-${users.size + 1}`;
      users.set(id, email);
      return { id };
    },
    undo: ({ id }) => void users.delete(id),
  })
  .asyncStep('welcomeEmail', {
    args: ({ input }) => ({ to: input('email') }),
    retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 10 },
    run: ({ to }, ctx) => {
      console.log(`  sending to ${to} (attempt ${ctx.attempt})`);
      if (to.endsWith('@bounce.test')) return fail(new Error(`mailbox ${to} does not exist`));
      outbox += 1;
      return { messageId: `msg-${outbox}` };
    },
    compensate: (error, { to }) => console.log(`  email to ${to} given up: ${error.message}`),
  })
  .step('confirm', {
    args: ({ result }) => ({ user: result('createUser'), email: result('welcomeEmail') }),
    run: ({ user, email }) => (email.status === 'completed' ? { user: user.id, messageId: email.value.messageId } : fail(new Error(`welcome email ${email.status}`))),
  })
  .returns('confirm')
  .build();

const runtime = createRuntime();
console.log('ok:', await runtime.run(signup, { email: 'ada@example.test' }));
const bounced = await runtime.run(signup, { email: 'nobody@bounce.test' });
console.log('bounced:', bounced.status, bounced.status === 'failed' ? bounced.message : '', '| users left:', users.size);
await runtime.close();
