/**
 * How the CLI loads the user's modules (reactors, middleware): `import()` of the path. A
 * TypeScript module (`.ts`, `.mts`, `.cts`) needs a loader; when the app has `tsx` installed it
 * is registered first (`tsx/esm/api`, resolved from the app's directory); when it has not, the
 * error says exactly what to install, or to pass compiled JavaScript instead.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import type { Middleware } from '../observability/middleware.js';

const TYPESCRIPT = /\.(?:[mc]?ts|tsx)$/;
let tsxRegistered = false;

/** The `import` target of a package.json `exports` entry (a path, or `{ import: path | { default } }`). */
function importEntry(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (typeof entry !== 'object' || entry === null) return undefined;
  const { import: imported, default: fallback } = entry as { import?: unknown; default?: unknown };
  return importEntry(imported ?? fallback);
}

/** Registers tsx's ESM loader from the app's own installation (`cwd`); false when the app has no tsx. */
async function registerTsx(cwd: string): Promise<boolean> {
  if (tsxRegistered) return true;
  let api: string;
  try {
    // The ESM entry of `tsx/esm/api` (require.resolve would give its CommonJS twin).
    const manifest = createRequire(join(cwd, 'package.json')).resolve('tsx/package.json');
    const exported = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: Record<string, unknown> }).exports?.['./esm/api'];
    const entry = importEntry(exported);
    if (entry === undefined) return false;
    api = join(dirname(manifest), entry);
  } catch {
    return false;
  }
  const { register } = (await import(pathToFileURL(api).href)) as { register: () => unknown };
  register();
  tsxRegistered = true;
  return true;
}

/** Whether this process can already load TypeScript (started under tsx, or a Node that strips types). */
function loadsTypeScript(): boolean {
  const flags = [...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].join(' ');
  // process.features.typescript: Node >= 22.10 ('strip' / 'transform' when type stripping is on).
  const stripping = (process.features as { typescript?: unknown }).typescript;
  return /\btsx\b/.test(flags) || (stripping !== undefined && stripping !== false);
}

/** Imports the module at `path` (relative to `cwd`), registering tsx first for a TypeScript module. */
export async function loadUserModule(path: string, what: string, cwd = process.cwd()): Promise<Record<string, unknown>> {
  const absolute = resolve(cwd, path);
  if (TYPESCRIPT.test(absolute) && !loadsTypeScript() && !(await registerTsx(cwd))) {
    throw new Error(
      `${what} ${path} is TypeScript, and this Node cannot load it on its own: install tsx in your app (npm install --save-dev tsx) and run the same command again, or compile it and pass the .js file`,
    );
  }
  try {
    return (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes(absolute)) {
      throw new Error(`${what} ${path} was not found (looked for ${absolute})`, { cause: error });
    }
    throw error;
  }
}

/** The middleware a module exports: its default export, or its export named `middleware` (one object, or an array). */
export function middlewareOf(module: Record<string, unknown>, path: string): Middleware[] {
  const exported = module['default'] ?? module['middleware'];
  const list = Array.isArray(exported) ? (exported as unknown[]) : exported === undefined ? [] : [exported];
  // A module that only exports `redact` adds no hooks.
  if (exported === undefined && typeof module['redact'] === 'function') return [];
  if (list.length === 0 || list.some((m) => typeof m !== 'object' || m === null)) {
    throw new Error(`middleware module ${path} must export its middleware as the default export or as "middleware": an object of hooks (stepStart, stepComplete, ...) or an array of them`);
  }
  return list as Middleware[];
}

/** Every reactor definition a module exports (named exports, or arrays of them), each once (a definition exported by name and in the default array too is one). */
export function reactorsOf(module: Record<string, unknown>): AnyReactorDefinition[] {
  const found = new Set<AnyReactorDefinition>();
  const visit = (value: unknown) => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'reactor') found.add(value as AnyReactorDefinition);
  };
  Object.values(module).forEach(visit);
  return [...found];
}
