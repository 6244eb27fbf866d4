import { describe, expect, it } from 'vitest';
import { DefinitionError, defineReactor } from '../../src/index.js';

const base = () => defineReactor({ name: 'bg' }).step('a', { run: () => 1 }).step('b', { waitFor: ['a'], run: () => 2 });

describe('background declaration', () => {
  it('computes the plan index the worker starts at', () => {
    expect(base().background({ all: true }).build().handoff).toEqual({ mode: 'all', step: undefined, index: 0 });
    expect(base().background({ after: 'a' }).build().handoff).toEqual({ mode: 'after', step: 'a', index: 1 });
    expect(base().background({ before: 'b' }).build().handoff).toEqual({ mode: 'before', step: 'b', index: 1 });
    expect(base().background({ after: 'b' }).build().handoff).toEqual({ mode: 'after', step: 'b', index: 2 });
    expect(base().build().handoff).toBeUndefined();
  });

  it('rejects an unknown step, both after and before, neither, and a second declaration', () => {
    expect(() => base().background({ after: 'zzz' } as never).build()).toThrow(
      new DefinitionError('reactor "bg": background after: "zzz" is not a step of the reactor; name one of "a", "b"'),
    );
    expect(() => base().background({ after: 'a', before: 'b' } as never).build()).toThrow(/declares after and before; declare exactly one/);
    expect(() => base().background({} as never).build()).toThrow(/declares no hand-off point; declare exactly one/);
    expect(() => base().background({ all: false } as never).build()).toThrow(/all must be true/);
    expect(() => base().background({ all: true }).background({ all: true } as never)).toThrow(/background is declared twice/);
  });
});
