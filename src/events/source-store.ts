/**
 * The `event_sources` table (migration 0020): one row per (workspace, source name), the current
 * definition as canonical JSON and its version (SHA-256 of that JSON). No row ever holds a secret's
 * value: a definition names its secret by template (src/events/source-definition.ts).
 */
import { parseSealedSecrets, sealedSecretsColumn, type StoredSecret } from "../secrets/store";
import type { EventSourceDefinition } from "./source-definition";

export interface StoredEventSource {
  workspace: string;
  name: string;
  version: string;
  definition: EventSourceDefinition;
  createdAt: number;
  updatedAt: number;
}

interface SourceRow {
  workspace: string;
  name: string;
  version: string;
  definition: string;
  created_at: number;
  updated_at: number;
}

const COLUMNS = "workspace, name, version, definition, created_at, updated_at";

function toStored(row: SourceRow): StoredEventSource {
  return {
    workspace: row.workspace,
    name: row.name,
    version: row.version,
    // Validated when saved: parsed, not re-validated.
    definition: JSON.parse(row.definition) as EventSourceDefinition,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * Create or replace. One batch (one round trip, one transaction): the version before, then the
 * upsert. `updated_at` moves only when the version changes, so a PUT of the same definition is a
 * no-op but for its answer. `created`: no source of this name existed.
 */
export async function putEventSource(
  db: D1Database,
  workspace: string,
  name: string,
  source: { definition: EventSourceDefinition; canonical: string; version: string },
  now: number,
): Promise<{ stored: StoredEventSource; created: boolean }> {
  const [before, after] = await db.batch([
    db.prepare("SELECT version FROM event_sources WHERE workspace = ?1 AND name = ?2").bind(workspace, name),
    db
      .prepare(
        `INSERT INTO event_sources (workspace, name, definition, version, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)
         ON CONFLICT (workspace, name) DO UPDATE
           SET definition = excluded.definition, version = excluded.version,
               updated_at = CASE WHEN event_sources.version <> excluded.version THEN excluded.updated_at ELSE event_sources.updated_at END
         RETURNING ${COLUMNS}`,
      )
      .bind(workspace, name, source.canonical, source.version, now),
  ]);
  const row = (after!.results as SourceRow[])[0]!;
  return { stored: toStored(row), created: (before!.results ?? []).length === 0 };
}

export async function getEventSource(db: D1Database, workspace: string, name: string): Promise<StoredEventSource | null> {
  const row = await db
    .prepare(`SELECT ${COLUMNS} FROM event_sources WHERE workspace = ?1 AND name = ?2`)
    .bind(workspace, name)
    .first<SourceRow>();
  return row ? toStored(row) : null;
}

/**
 * The source and the workspace's sealed secrets its definition names, in one statement: the public
 * route's only read before it verifies the signature.
 */
export async function getEventSourceWithSecrets(
  db: D1Database,
  workspace: string,
  name: string,
): Promise<{ source: StoredEventSource; secrets: StoredSecret[] } | null> {
  const row = await db
    .prepare(
      `SELECT ${COLUMNS.split(", ")
        .map((c) => `es.${c}`)
        .join(", ")}, ${sealedSecretsColumn("es.workspace", "es.definition")} AS secrets
       FROM event_sources es WHERE es.workspace = ?1 AND es.name = ?2`,
    )
    .bind(workspace, name)
    .first<SourceRow & { secrets: string | null }>();
  return row ? { source: toStored(row), secrets: parseSealedSecrets(row.secrets) } : null;
}

/** Every source of the workspace, by name. */
export async function listEventSources(db: D1Database, workspace: string): Promise<StoredEventSource[]> {
  const { results } = await db
    .prepare(`SELECT ${COLUMNS} FROM event_sources WHERE workspace = ?1 ORDER BY name`)
    .bind(workspace)
    .all<SourceRow>();
  return results.map(toStored);
}

/** True when a row was deleted. */
export async function deleteEventSource(db: D1Database, workspace: string, name: string): Promise<boolean> {
  const row = await db.prepare("DELETE FROM event_sources WHERE workspace = ?1 AND name = ?2 RETURNING name").bind(workspace, name).first();
  return row !== null;
}
