/**
 * The reference execution order of the property tests, written from the seed
 * rule R1 (not from the implementation): repeated waves of the steps whose
 * dependencies are all done, in definition order.
 */
export function referenceWaves<S extends { readonly name: string; readonly reads: readonly string[]; readonly waitFor: readonly string[] }>(
  steps: readonly S[],
  defOrder: readonly string[],
): S[] {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const defined = defOrder.map((n) => byName.get(n)!);
  const done = new Set<string>();
  const plan: S[] = [];
  while (plan.length < defined.length) {
    const wave = defined.filter((s) => !done.has(s.name) && [...s.reads, ...s.waitFor].every((d) => done.has(d)));
    if (wave.length === 0) throw new Error('generated scenario has a cycle');
    for (const s of wave) {
      done.add(s.name);
      plan.push(s);
    }
  }
  return plan;
}
