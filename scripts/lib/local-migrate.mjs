/**
 * Apply D1 migrations to LOCAL databases in one process, all databases at once, saying each
 * migration as it lands: what `wrangler d1 migrations apply <db> --local` does, without a wrangler
 * (and its workerd) started per database. `npm start`'s first run applied three databases one
 * after the other that way and printed nothing for over a minute (issue 42).
 *
 * It does exactly what wrangler's local apply does (wrangler-dist `executeLocally` and
 * `buildMigrationQuery`): a Miniflare whose `resourcePersistencePath` is `<persistTo>/v3`, each
 * database bound by its `database_id` (locally wrangler keys a database by its id, so `wrangler dev`
 * and `wrangler d1 execute` open the same SQLite file afterwards), the `d1_migrations` table created
 * as wrangler creates it, and each migration not listed there run as ONE batch of its statements
 * plus its `INSERT INTO d1_migrations (name)` — so a failed migration leaves nothing behind and a
 * later run (this one or wrangler's) carries on from it. The statements are split by the splitter the
 * test suite applies migrations with (`readD1Migrations`, test/d1-template.ts), which keeps a
 * trigger body whole as wrangler's does.
 */
import { join, relative } from "node:path";
import { readD1Migrations } from "@cloudflare/vitest-plugin";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { ROOT } from "./wrangler-dev.mjs";

/** wrangler's table (wrangler-dist `getCreateMigrationsTableQuery`, default name `d1_migrations`). */
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "d1_migrations"(
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT UNIQUE,
		applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
);`;

/**
 * Migrate `databases` (`[{ label, databaseId, migrationsDir }]`) in the local state `persistTo`
 * (wrangler's `--persist-to`; `npm start`'s `.wrangler/state`), concurrently. `onMigration(database,
 * name, index, count)` is called as each migration is applied (index from 1 over the ones to apply),
 * `onDone(database, applied)` once a database is up to date. Resolves to `[{ database, applied }]`;
 * rejects with an Error naming the database and the migration that failed (the ones before it stay
 * applied, as with wrangler).
 */
export async function migrateLocalDatabases({ persistTo, databases, onMigration, onDone }) {
  const bindings = Object.fromEntries(databases.map((database, i) => [`DB${i}`, database.databaseId]));
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      script: "export default {}",
      resourcePersistencePath: join(persistTo, "v3"),
      d1Databases: bindings,
    }),
  );
  try {
    return await Promise.all(
      databases.map(async (database, i) => {
        const db = await mf.getD1Database(`DB${i}`);
        const [migrations] = await Promise.all([readD1Migrations(database.migrationsDir), db.prepare(MIGRATIONS_TABLE).run()]);
        const done = new Set((await db.prepare(`SELECT name FROM "d1_migrations" ORDER BY id`).all()).results.map((r) => r.name));
        const pending = migrations.filter((m) => !done.has(m.name));
        const insert = db.prepare(`INSERT INTO "d1_migrations" (name) VALUES (?)`);
        const applied = [];
        for (const migration of pending) {
          try {
            await db.batch([...migration.queries.map((query) => db.prepare(query)), insert.bind(migration.name)]);
          } catch (error) {
            const where = relative(ROOT, join(database.migrationsDir, migration.name));
            throw new Error(`${database.label}: ${where} failed: ${error?.message ?? error}`, { cause: error });
          }
          applied.push(migration.name);
          onMigration?.(database, migration.name, applied.length, pending.length);
        }
        onDone?.(database, applied);
        return { database, applied };
      }),
    );
  } finally {
    await mf.dispose();
  }
}
