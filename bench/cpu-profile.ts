/**
 * A small reader of V8 `.cpuprofile` files (what `node --cpu-prof` writes): self time grouped by
 * package or area, within a time window, for `bench/worker-throughput.ts`.
 *
 * The file is JSON: `nodes` (id, callFrame { functionName, url }, children), `samples` (the node
 * on top of the stack at each tick), `timeDeltas` (µs since the previous tick) and `startTime`
 * (µs of CLOCK_MONOTONIC, the clock `process.hrtime` reads in every process of the machine; so a
 * window taken with `monotonicMs()` in another process selects the right ticks). A tick's weight
 * is the time until the next tick, as DevTools counts it.
 *
 * Grouping of a tick's top frame: `(garbage collector)`, `(idle)` and `(program)` (V8 and native
 * work outside JavaScript) by name; a native function without a URL (`writeBuffer`,
 * `writeUtf8String`, `JSON.parse`, ...) goes to the nearest caller that has one; a URL inside
 * `node_modules/<package>/` to that package; `node:` URLs to `node: net/stream` (sockets and
 * streams) or `node: other internals`; files under the tree's root to their folder (`src/runtime`,
 * `src/store`, `machines`, ...).
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** µs of ticks in the window that were not idle. */
  busyUs: number;
  /** µs of idle ticks in the window. */
  idleUs: number;
  /** Self time per group, µs, largest first. */
  groups: { group: string; us: number }[];
  /** The functions with the most self time: name, group, µs. */
  top: { fn: string; group: string; us: number }[];
}

const NET_STREAM = /^node:(net|stream|_stream|dgram|tls|internal\/(net|stream_base_commons|streams\/|js_stream_socket|tls))/;

/** The group of one frame's URL; `root` is the tree whose `src/`, `machines/` and `bench/` are xreactor's own. */
export function groupOfUrl(url: string, root: string): string {
  if (url.startsWith('node:')) return NET_STREAM.test(url) ? 'node: net/stream' : 'node: other internals';
  if (url.startsWith('wasm:')) return 'wasm (tsx loader)';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const at = path.lastIndexOf('/node_modules/');
  if (at >= 0) {
    const [first, second] = path.slice(at + '/node_modules/'.length).split('/');
    const name = first!.startsWith('@') ? `${first}/${second}` : first!;
    return name === 'msgpackr-extract' ? 'msgpackr' : name;
  }
  const rel = relative(root, path);
  if (rel.startsWith('..') || rel === path) return `other (${url.slice(0, 40)})`;
  const parts = rel.split('/');
  if (parts[0] === 'src' && parts.length > 2) return `src/${parts[1]}`;
  if (parts[0] === 'bench') return 'bench (step bodies, fixtures)';
  return parts.length > 1 ? parts[0]! : rel;
}

/** Self time by group between `fromUs` and `toUs` (CLOCK_MONOTONIC µs; the whole profile when omitted). */
export function summarizeProfile(file: string, root: string, fromUs = -Infinity, toUs = Infinity, topN = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const groupOf = new Map<number, string>();
  const group = (id: number): string => {
    const known = groupOf.get(id);
    if (known !== undefined) return known;
    const { functionName, url } = byId.get(id)!.callFrame;
    let result: string;
    if (functionName === '(garbage collector)') result = 'GC';
    else if (functionName === '(idle)') result = '(idle)';
    else if (functionName === '(program)' || functionName === '(root)') result = '(program: V8 and native, outside JS)';
    else if (url !== '') result = groupOfUrl(url, root);
    else {
      const up = parent.get(id);
      result = up === undefined ? '(program: V8 and native, outside JS)' : group(up);
    }
    groupOf.set(id, result);
    return result;
  };

  const groups = new Map<string, number>();
  const fns = new Map<string, { group: string; us: number }>();
  let busyUs = 0;
  let idleUs = 0;
  let at = profile.startTime;
  const times = profile.samples.map((_, i) => (at += profile.timeDeltas[i] ?? 0));
  for (let i = 0; i < profile.samples.length; i++) {
    const t = times[i]!;
    if (t < fromUs || t > toUs) continue;
    const weight = (i + 1 < times.length ? times[i + 1]! : profile.endTime) - t;
    if (weight <= 0) continue;
    const id = profile.samples[i]!;
    const g = group(id);
    if (g === '(idle)') {
      idleUs += weight;
      continue;
    }
    busyUs += weight;
    groups.set(g, (groups.get(g) ?? 0) + weight);
    const { functionName, url } = byId.get(id)!.callFrame;
    const file = url === '' ? '' : ` ${url.slice(url.lastIndexOf('/') + 1)}`;
    const key = `${functionName || '(anonymous)'}${file}`;
    const entry = fns.get(key) ?? { group: g, us: 0 };
    entry.us += weight;
    fns.set(key, entry);
  }
  return {
    busyUs,
    idleUs,
    groups: [...groups.entries()].map(([g, us]) => ({ group: g, us })).sort((a, b) => b.us - a.us),
    top: [...fns.entries()]
      .map(([fn, { group: g, us }]) => ({ fn, group: g, us }))
      .sort((a, b) => b.us - a.us)
      .slice(0, topN),
  };
}
