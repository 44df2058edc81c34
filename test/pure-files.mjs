/**
 * The test files that cannot reach the Worker or its bindings, found by reading their imports (in
 * Node, once per `vitest` run, from vitest.config.ts). test/apply-migrations.ts skips its setup for
 * them: no `cloudflare:test` import — which loads the whole Worker (`main`: about 280 modules, sent
 * one by one into the file's workerd) — and no restore of the migrated template. Each still runs in
 * its own workerd, alone, like every other file; it only stops paying for a Worker it never calls.
 *
 * A file is pure when its text never names `cloudflare:` (so no `env`, `SELF`, queue or D1 from the
 * pool) and every module it imports is vitest, an npm package or a module under src/ (src never
 * imports `cloudflare:`: the Worker gets its env as an argument). Anything else — a test helper, a
 * fixture, a `?raw` file, a computed dynamic import — makes it not pure: a helper may reach `env`.
 * A file the rule got wrong the other way could not pass: it would have no `env` to call.
 * (Plain JavaScript: the suite's TypeScript has no Node types.)
 */
import { globSync, readFileSync } from "node:fs";
import { dirname, resolve, sep } from "node:path";

const SPECIFIERS = [
  /(?:^|[\n;])\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/g,
  /(?:^|[\n;])\s*import\s*["']([^"']+)["']/g,
  /\bimport\(\s*["'`]([^"'`]+)["'`]\s*\)/g,
];

/** @type {import("./pure-files.d.mts").isPureTestFile} */
export function isPureTestFile(root, file) {
  const absolute = resolve(root, file);
  const source = readFileSync(absolute, "utf8");
  if (source.includes("cloudflare:")) return false;
  // A dynamic import of a computed specifier cannot be followed.
  if (/\bimport\(\s*[^"'`\s)]/.test(source)) return false;
  const src = resolve(root, "src") + sep;
  const specifiers = SPECIFIERS.flatMap((pattern) => [...source.matchAll(pattern)].map((match) => match[1]));
  return specifiers.every((specifier) => {
    if (!specifier.startsWith(".") && !specifier.startsWith("/")) return true; // vitest or an npm package
    if (specifier.includes("?")) return false; // `?raw` and the like: a file, not a module
    return resolve(dirname(absolute), specifier).startsWith(src);
  });
}

/** @type {import("./pure-files.d.mts").pureTestFiles} */
export function pureTestFiles(root, patterns) {
  const files = new Set(patterns.flatMap((pattern) => globSync(pattern, { cwd: root })));
  return [...files]
    .sort()
    .filter((file) => isPureTestFile(root, file))
    .map((file) => resolve(root, file));
}
