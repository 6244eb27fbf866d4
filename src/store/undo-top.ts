import { decode } from '../serialization/index.js';
import type { UndoEntry } from './store.js';

/**
 * The undo entry `acquireAndLoad` read with `undoTop`, decoded; undefined when its bytes cannot be
 * read: the undo that needs it reads it again (`readUndoEntry`) and reports the error there,
 * against the execution it belongs to, not the caller that took it.
 */
export function decodeUndoTop(bytes: Uint8Array): UndoEntry | undefined {
  try {
    return decode(bytes) as UndoEntry;
  } catch {
    return undefined;
  }
}
