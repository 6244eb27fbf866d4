import { describe, expect, it } from 'vitest';
import { encode } from '../../src/serialization/index.js';
import { undoTopOf } from '../../src/store/undo-top.js';

describe('undoTopOf', () => {
  it('decodes an undo entry read with the take, and leaves out one that is absent or that it cannot read (the undo reads it again and reports there)', () => {
    const entry = { step: 'charge', args: { cents: 5 }, result: { id: 'ch-1', at: new Date(3) } };
    expect(undoTopOf(2, encode(entry))).toEqual({ position: 2, entry });
    expect(undoTopOf(0, undefined)).toBeUndefined();
    expect(undoTopOf(1, Uint8Array.from([0x92, 0x01]))).toBeUndefined();
  });
});
