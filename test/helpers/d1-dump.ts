/**
 * A D1 database's migrations applied and its contents read back as SQL, in Node (test/d1-template.ts,
 * the template every test file starts from) and in workerd (test/migrations.test.ts, which checks the
 * template against the migrations applied in order) alike: plain D1 calls, no imports.
 */
import type { D1Migration } from "@cloudflare/vitest-plugin";

// The same table the pool's applyD1Migrations and `wrangler d1 migrations apply` keep.
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "d1_migrations" (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT UNIQUE,
		applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
	);`;

/** Every user object of the schema (D1's own `_cf_` tables and SQLite's internal ones left out). */
const SCHEMA = `SELECT type, name, sql FROM sqlite_master
                WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY rowid`;

const quoteId = (id: string) => `"${id.replaceAll('"', '""')}"`;

/** Applies `migrations` to `db` as the pool's applyD1Migrations does (each migration and its row in one batch). */
export async function applyMigrations(db: D1Database, migrations: D1Migration[]): Promise<void> {
  await db.prepare(MIGRATIONS_TABLE).run();
  const insert = db.prepare(`INSERT INTO "d1_migrations" (name) VALUES (?);`);
  for (const migration of migrations) {
    try {
      await db.batch([...migration.queries.map((query) => db.prepare(query)), insert.bind(migration.name)]);
    } catch (error) {
      throw new Error(`migrations/${migration.name} does not apply: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
  }
}

/** `db` as the statements that rebuild it. */
export async function dumpDatabase(db: D1Database): Promise<string[]> {
  const objects = (await db.prepare(SCHEMA).all<{ type: string; name: string; sql: string }>()).results;
  const tables = objects.filter((o) => o.type === "table");
  const rows: string[] = [];
  for (const table of tables) {
    const columns = (await db.prepare(`SELECT name FROM pragma_table_info(?)`).bind(table.name).all<{ name: string }>()).results;
    const values = columns.map((c) => `quote(${quoteId(c.name)})`).join(` || ',' || `);
    const names = columns.map((c) => quoteId(c.name)).join(", ");
    // SQLite writes each value as a literal itself (`quote()`: exact for text, blobs, integers and reals).
    const prefix = `INSERT INTO ${quoteId(table.name)} (${names}) VALUES (`;
    const inserts = await db
      .prepare(`SELECT ?1 || ${values} || ')' AS sql FROM ${quoteId(table.name)}`)
      .bind(prefix)
      .all<{ sql: string }>();
    rows.push(...inserts.results.map((r) => r.sql));
  }
  const hasSequences = await db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").first();
  const sequences = hasSequences
    ? (await db.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name").all<{ name: string; seq: number }>()).results
    : [];
  return [
    // Rows may reference rows inserted after them: foreign keys are checked at the batch's end.
    "PRAGMA defer_foreign_keys = on",
    ...tables.map((t) => t.sql),
    ...rows,
    // Inserting the rows moved the counters to each table's largest id; the template's may be higher.
    ...(sequences.length > 0 ? ["DELETE FROM sqlite_sequence"] : []),
    ...sequences.map((s) => `INSERT INTO sqlite_sequence (name, seq) VALUES ('${s.name.replaceAll("'", "''")}', ${Number(s.seq)})`),
    // Triggers last, so restoring the rows fires none.
    ...objects.filter((o) => o.type === "index").map((o) => o.sql),
    ...objects.filter((o) => o.type === "view").map((o) => o.sql),
    ...objects.filter((o) => o.type === "trigger").map((o) => o.sql),
  ];
}
