import { describe, expect, it } from 'vitest';
import { encode } from '../../src/serialization/index.js';
import { decodeUndoTop } from '../../src/store/undo-top.js';

describe('decodeUndoTop', () => {
  it('decodes an undo entry read with the take, and leaves out bytes it cannot read (the undo reads them again and reports there)', () => {
    const entry = { step: 'charge', args: { cents: 5 }, result: { id: 'ch-1', at: new Date(3) } };
    expect(decodeUndoTop(encode(entry))).toEqual(entry);
    expect(decodeUndoTop(Uint8Array.from([0x92, 0x01]))).toBeUndefined();
  });
});
