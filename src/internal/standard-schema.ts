import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { FieldIssue } from '../errors/index.js';

/** The outcome of validating a value against a Standard Schema. */
export type Validation = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issues: FieldIssue[] };

function pathOf(issue: StandardSchemaV1.Issue): (string | number)[] {
  return (issue.path ?? []).map((segment) => {
    const key = typeof segment === 'object' ? segment.key : segment;
    return typeof key === 'number' ? key : String(key);
  });
}

/** Validate `value` with any Standard Schema validator (sync or async). */
export async function validateWith(schema: StandardSchemaV1, value: unknown): Promise<Validation> {
  let result = schema['~standard'].validate(value);
  if (result instanceof Promise) result = await result;
  if (result.issues === undefined) return { ok: true, value: result.value };
  return { ok: false, issues: result.issues.map((issue) => ({ path: pathOf(issue), message: issue.message })) };
}

/** One line summarising issues, for error messages. */
export function describeIssues(issues: readonly FieldIssue[]): string {
  return issues.map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ');
}
