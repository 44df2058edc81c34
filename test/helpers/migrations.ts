/**
 * The engine's migrations, for the tests that run one on a populated database: each file by its
 * number, a runner that applies one as `wrangler d1 migrations apply` does (its statements in one
 * batch), and a reset of this test file's database to the schema before a given migration.
 */
import { env } from "cloudflare:test";
import { statementsOf } from "./demo-tables";

const files = import.meta.glob<string>("../../migrations/*.sql", { query: "?raw", import: "default", eager: true });

/** Every migration, in order. */
export const migrations = Object.keys(files)
  .sort()
  .map((name) => ({ number: Number(/\/(\d{4})_/.exec(name)![1]), sql: files[name]! }));

/** The SQL of migration `number`. */
export function migrationSql(number: number): string {
  const found = migrations.find((m) => m.number === number);
  if (!found) throw new Error(`no migration ${number}`);
  return found.sql;
}

/** Applies one migration's SQL in one batch. */
export const runMigration = (sql: string) => env.DB.batch(statementsOf(sql).map((s) => env.DB.prepare(s)));

/** This file's database back to the schema just before migration `number`: every table dropped, the earlier ones applied. */
export async function schemaBefore(number: number): Promise<void> {
  const tables = await env.DB.prepare(
    `SELECT name FROM sqlite_master
     WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'`,
  ).all<{ name: string }>();
  // Views first (migrations/0042's `step_attempts`): a view naming a dropped table makes later DDL fail.
  const views = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'view'").all<{ name: string }>();
  await env.DB.batch([
    env.DB.prepare("PRAGMA defer_foreign_keys = on"),
    ...views.results.map((v) => env.DB.prepare(`DROP VIEW "${v.name}"`)),
    ...tables.results.map((t) => env.DB.prepare(`DROP TABLE "${t.name}"`)),
  ]);
  for (const m of migrations.filter((m) => m.number < number)) await runMigration(m.sql);
}

/** Every migration after `number`, in order: the current schema, for a test running today's code on an old migration's rows. */
export async function migrationsAfter(number: number): Promise<void> {
  for (const m of migrations.filter((m) => m.number > number)) await runMigration(m.sql);
}
