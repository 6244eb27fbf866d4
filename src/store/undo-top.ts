import { decode } from '../serialization/index.js';
import type { UndoEntry } from './store.js';

/**
 * The undo entry `acquireAndLoad` read with `undoTop` (`bytes`, at `position`), decoded as
 * `LeasedLoad.undoTop`; undefined when there is none, or when its bytes cannot be read: the undo
 * that needs it reads it again (`readUndoEntry`) and reports the error there, against the
 * execution it belongs to, not the caller that took it.
 */
export function undoTopOf(position: number, bytes: Uint8Array | undefined): { readonly position: number; readonly entry: UndoEntry } | undefined {
  if (bytes === undefined) return undefined;
  try {
    return { position, entry: decode(bytes) as UndoEntry };
  } catch {
    return undefined;
  }
}
