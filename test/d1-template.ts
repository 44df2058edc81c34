/**
 * The migrated template database the suite starts every test file from (vitest.config.ts builds it,
 * test/apply-migrations.ts restores it). Runs in Node, once per `vitest` run, from migrations/ as it
 * is on disk — never a stored copy, so a migration added a minute ago is in it.
 *
 * Each test file gets its own workerd (the pool starts a Miniflare per file): its D1 databases start
 * empty, and applying the 25-odd migrations there, table rebuilds and all, cost every file about a
 * second per shard. Here they are applied once, to a real local D1 (Miniflare's, the one the tests
 * use) exactly as the pool's `applyD1Migrations` applies them — the `d1_migrations` table, then each
 * migration's statements and its row in one batch. The result is read back as SQL: its schema
 * (`sqlite_master`, in creation order), every row of every table (SQLite's own `quote()`, so every
 * value comes back exactly), and the AUTOINCREMENT counters. Restoring that is one batch per shard.
 *
 * test/migrations.test.ts keeps the two equal: it applies every migration in order to an emptied
 * database and compares the result with a database restored from this template.
 */
import { readD1Migrations } from "@cloudflare/vitest-plugin";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { applyMigrations, dumpDatabase } from "./helpers/d1-dump.ts";

/** A migrated database as statements, in the order a restore runs them (one batch). */
export type D1Template = {
  /** The migrations it holds, by file name (`d1_migrations`' rows). */
  migrations: string[];
  /** The statements that rebuild it, in order: tables, rows, AUTOINCREMENT counters, then indexes, views, triggers. */
  statements: string[];
};

/** Applies every migration in `migrationsDir` to an empty local D1 and returns the result as a template. */
export async function buildD1Template(migrationsDir: string): Promise<D1Template> {
  const migrations = await readD1Migrations(migrationsDir);
  const mf = new Miniflare(
    convertV4MiniflareOptions({ modules: true, script: "export default {}", d1Databases: { TEMPLATE: "d1-template" } }),
  );
  try {
    const db = await mf.getD1Database("TEMPLATE");
    await applyMigrations(db, migrations);
    return { migrations: migrations.map((m) => m.name), statements: await dumpDatabase(db) };
  } finally {
    await mf.dispose();
  }
}
