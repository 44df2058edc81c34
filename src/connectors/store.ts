/**
 * Versioned storage of connectors (migration 0023), as workflows are stored (src/definitions/store.ts):
 * a version is the SHA-256 of the canonical document (without `$schema`), never changes, and
 * `connectors` points at the latest. Saving is one batch.
 */
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { scopeLimitsOf } from "../flow/limits";
import { deleteScopeLimits, writeScopeLimits } from "../ledger/connector-permits";
import type { ConnectorDefinition, StoredConnector } from "./schema";

export async function connectorVersionOf(definition: ConnectorDefinition): Promise<{ version: string; canonical: string }> {
  const { $schema: _editorHint, ...content } = definition;
  const canonical = canonicalJson(content);
  return { version: await sha256Hex(canonical), canonical };
}

export async function putConnector(
  db: D1Database,
  workspace: string,
  definition: ConnectorDefinition,
  now: number,
): Promise<{ version: string; created: boolean }> {
  const { version, canonical } = await connectorVersionOf(definition);
  // The limits are operational (docs/connectors.md "Limits"): the scope's row, written in the same
  // batch, is what every send reads — whatever version of whichever workflow sends.
  const limits = scopeLimitsOf(definition.limits);
  const [inserted] = await db.batch([
    db
      .prepare(
        `INSERT INTO connector_versions (workspace, name, version, definition, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (workspace, name, version) DO NOTHING`,
      )
      .bind(workspace, definition.name, version, canonical, now),
    db
      .prepare(
        `INSERT INTO connectors (workspace, name, latest_version, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workspace, name) DO UPDATE SET latest_version = excluded.latest_version, updated_at = excluded.updated_at
         WHERE connectors.latest_version <> excluded.latest_version`,
      )
      .bind(workspace, definition.name, version, now),
    limits ? writeScopeLimits(db, workspace, definition.name, limits, now) : deleteScopeLimits(db, workspace, definition.name),
  ]);
  return { version, created: (inserted?.meta.changes ?? 0) > 0 };
}

interface Row {
  workspace: string;
  name: string;
  version: string;
  definition: string;
  created_at: number;
}

const toStored = (row: Row): StoredConnector => ({
  workspace: row.workspace,
  name: row.name,
  version: row.version,
  // Validated when saved: parsed, not re-validated.
  definition: JSON.parse(row.definition) as ConnectorDefinition,
  createdAt: row.created_at,
});

const LATEST = `SELECT v.workspace, v.name, v.version, v.definition, v.created_at
  FROM connectors c JOIN connector_versions v ON v.workspace = c.workspace AND v.name = c.name AND v.version = c.latest_version`;

/** The latest version of each named connector of the workspace (one statement), by name. */
export async function latestConnectors(db: D1Database, workspace: string, names: readonly string[]): Promise<Map<string, StoredConnector>> {
  if (names.length === 0) return new Map();
  const { results } = await db
    .prepare(`${LATEST} WHERE c.workspace = ?1 AND c.name IN (SELECT value FROM json_each(?2))`)
    .bind(workspace, JSON.stringify(names))
    .all<Row>();
  return new Map(results.map((row) => [row.name, toStored(row)]));
}

/** One connector: its latest version, or a given one; null when absent from the workspace. */
export async function getConnector(db: D1Database, workspace: string, name: string, version?: string): Promise<StoredConnector | null> {
  const row = version
    ? await db
        .prepare(
          `SELECT workspace, name, version, definition, created_at FROM connector_versions
           WHERE workspace = ?1 AND name = ?2 AND version = ?3`,
        )
        .bind(workspace, name, version)
        .first<Row>()
    : await db.prepare(`${LATEST} WHERE c.workspace = ?1 AND c.name = ?2`).bind(workspace, name).first<Row>();
  return row ? toStored(row) : null;
}

export async function listConnectors(db: D1Database, workspace: string): Promise<StoredConnector[]> {
  const { results } = await db.prepare(`${LATEST} WHERE c.workspace = ?1 ORDER BY c.name LIMIT 500`).bind(workspace).all<Row>();
  return results.map(toStored);
}

/**
 * Delete a connector (its pointer and versions). Saved workflow versions keep working: each holds
 * its steps resolved. A workflow saved again after that names a connector that no longer exists.
 */
export async function deleteConnector(db: D1Database, workspace: string, name: string): Promise<boolean> {
  const [pointer] = await db.batch([
    db.prepare("DELETE FROM connectors WHERE workspace = ?1 AND name = ?2").bind(workspace, name),
    db.prepare("DELETE FROM connector_versions WHERE workspace = ?1 AND name = ?2").bind(workspace, name),
    deleteScopeLimits(db, workspace, name),
  ]);
  return (pointer?.meta.changes ?? 0) > 0;
}
