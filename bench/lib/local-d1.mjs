// The local D1 database of a `wrangler dev --persist-to DIR` engine, read from outside: the SQLite
// file's size on disk, and read-only queries through the `sqlite3` command-line shell (when it is
// installed; a bench then reports what it could not read as "n/a").
//
// The engine's own figure (`GET /v1/operator/storage`, D1's `meta.size_after`) counts the pages in
// use; the file on disk never shrinks (nothing vacuums it locally: freed pages are kept and reused),
// so it plateaus where the pages in use go up and down.
import { execFile } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The `.sqlite` file of the one D1 database under `persistTo` (the largest, should there be more). */
export function sqliteFile(persistTo) {
  const dir = join(persistTo, "v3", "d1", "miniflare-D1DatabaseObject");
  if (!existsSync(dir)) return null;
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".sqlite"))
    .map((f) => join(dir, f));
  files.sort((a, b) => statSync(b).size - statSync(a).size);
  return files[0] ?? null;
}

/** Bytes on disk: the database file and its write-ahead log (when there is one). */
export function fileBytes(file) {
  if (!file) return { db: NaN, wal: NaN };
  const size = (path) => (existsSync(path) ? statSync(path).size : 0);
  return { db: size(file), wal: size(`${file}-wal`) };
}

let sqliteAvailable;

/** Whether the `sqlite3` shell is on PATH (checked once). */
export async function hasSqlite() {
  if (sqliteAvailable === undefined) {
    try {
      await run("sqlite3", ["-version"], { timeout: 5_000 });
      sqliteAvailable = true;
    } catch {
      sqliteAvailable = false;
    }
  }
  return sqliteAvailable;
}

/** One read-only query (`sqlite3 -readonly -json`); the rows, or null when it could not be read. */
export async function sqliteRows(file, sql) {
  if (!file || !(await hasSqlite())) return null;
  try {
    const { stdout } = await run("sqlite3", ["-readonly", "-json", "-cmd", ".timeout 2000", file, sql], {
      timeout: 15_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout.trim() === "" ? [] : JSON.parse(stdout);
  } catch {
    return null;
  }
}

/** Bytes of pages per table and index (the `dbstat` virtual table), or null. */
export async function bytesByObject(file) {
  const rows = await sqliteRows(file, "SELECT name, sum(pgsize) AS bytes, sum(ncell) AS cells FROM dbstat GROUP BY name");
  return rows && Object.fromEntries(rows.map((r) => [r.name, { bytes: r.bytes, cells: r.cells }]));
}

/** The journal mode of the file (a reader beside a writer is safe in WAL mode only). */
export async function journalMode(file) {
  const rows = await sqliteRows(file, "PRAGMA journal_mode");
  return rows?.[0]?.journal_mode ?? null;
}
