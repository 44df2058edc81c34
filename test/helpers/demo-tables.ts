/**
 * The demo destinations' own tables (demo/migrations/0002 onwards) on the test's D1, so a test can
 * run the demo app (demo/src/app.ts) in-process. The engine's migrations (test/apply-migrations.ts)
 * already create the ledger table the demo's Idempotency-Key middleware uses. Storage is per test
 * file, so these tables never meet another file's.
 */
import { env } from "cloudflare:test";

// 0001 is the ledger table, a copy of the engine's migration, which the engine's migrations already applied.
const sql = import.meta.glob<string>(["../../demo/migrations/*.sql", "!../../demo/migrations/0001_*.sql"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** Split a migration into statements: drop `--` comments, split on `;` at the end of a line. */
export function statementsOf(migration: string): string[] {
  return migration
    .split("\n")
    .map((line) => line.replace(/--.*$/, ""))
    .join("\n")
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Every demo migration after 0001, in order, as one batch. */
export async function createDemoTables(): Promise<void> {
  const names = Object.keys(sql).sort();
  if (!names.some((name) => name.endsWith("/0002_demo.sql"))) throw new Error("demo/migrations/0002_demo.sql not found");
  await env.DB.batch(names.flatMap((name) => statementsOf(sql[name]!)).map((s) => env.DB.prepare(s)));
}
