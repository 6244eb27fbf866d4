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

/**
 * A random definition order in which every step comes after its dependencies (lowest priority
 * among the available first): how the property tests shuffle the order steps are declared in.
 */
export function definitionOrder<S extends { readonly name: string; readonly reads: readonly string[]; readonly waitFor: readonly string[] }>(
  steps: readonly S[],
  priorities: readonly number[],
): string[] {
  const order: string[] = [];
  const placed = new Set<string>();
  while (order.length < steps.length) {
    const available = steps
      .map((s, i) => ({ s, p: priorities[i]! }))
      .filter(({ s }) => !placed.has(s.name) && [...s.reads, ...s.waitFor].every((d) => placed.has(d)));
    available.sort((a, b) => a.p - b.p);
    const next = available[0]!.s;
    placed.add(next.name);
    order.push(next.name);
  }
  return order;
}
