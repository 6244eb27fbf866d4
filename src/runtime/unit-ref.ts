/**
 * What an async unit step records as its result until a reader reads the unit's end: a reference
 * to its unit (`{ xreactorUnit: { id, kind, dispatchedAt } }`). It is not a value of the run: a
 * completed run's record of results leaves it out.
 */

/** A dispatch step's recorded result: the unit it dispatched. */
export interface UnitRef {
  readonly xreactorUnit: { readonly id: string; readonly kind: 'unit' | 'execution'; readonly dispatchedAt: number };
}

/** Whether a stored result is an async unit reference. */
export function isUnitRef(value: unknown): value is UnitRef {
  if (typeof value !== 'object' || value === null) return false;
  const ref = (value as { xreactorUnit?: unknown }).xreactorUnit;
  return typeof ref === 'object' && ref !== null && typeof (ref as { id?: unknown }).id === 'string';
}
