/**
 * Versioned storage of workflow definitions. A saved version never changes; the `workflows` row
 * points at the latest one. Saving is one batch (one round trip, one transaction): insert-if-absent
 * of the version, then move the pointer.
 *
 * The version is the SHA-256 (hex) of the definition's RFC 8785 canonical JSON, after zod has filled
 * in defaults and without `$schema` (an editor hint). Key order, whitespace, and spelling out a
 * default value therefore do not make a new version; any change of meaning does.
 */
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { parseSealedSecrets, sealedSecretsColumn, type StoredSecret } from "../secrets/store";
import { entryPointOf, type WorkflowDefinition } from "./schema";
import { stepInputsOf } from "./step-inputs";

export interface StoredWorkflow {
  workspace: string;
  workflowId: string;
  version: string;
  definition: WorkflowDefinition;
  createdAt: number;
}

export async function versionOf(definition: WorkflowDefinition): Promise<{ version: string; canonical: string }> {
  const { $schema: _editorHint, ...content } = definition;
  const canonical = canonicalJson(content);
  return { version: await sha256Hex(canonical), canonical };
}

/** Save a validated definition. `created` is false when this exact content was already saved. */
export async function saveWorkflow(
  db: D1Database,
  workspace: string,
  definition: WorkflowDefinition,
  now: number,
): Promise<{ version: string; created: boolean }> {
  const { version, canonical } = await versionOf(definition);
  const schedule = entryPointOf(definition).config.schedule ?? null;
  const [inserted] = await db.batch([
    db
      .prepare(
        `INSERT INTO workflow_versions (workspace, workflow_id, version, definition, schedule, created_at, step_inputs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (workspace, workflow_id, version) DO NOTHING`,
      )
      // What each step reads, computed once per version: its claim loads only that (docs/steps.md).
      .bind(workspace, definition.id, version, canonical, schedule, now, JSON.stringify(stepInputsOf(definition))),
    db
      .prepare(
        `INSERT INTO workflows (workspace, workflow_id, latest_version, schedule, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (workspace, workflow_id) DO UPDATE
           SET latest_version = excluded.latest_version, schedule = excluded.schedule, updated_at = excluded.updated_at
         WHERE workflows.latest_version <> excluded.latest_version`,
      )
      .bind(workspace, definition.id, version, schedule, now),
  ]);
  return { version, created: (inserted?.meta.changes ?? 0) > 0 };
}

interface VersionRow {
  workspace: string;
  workflow_id: string;
  version: string;
  definition: string;
  created_at: number;
}

function toStored(row: VersionRow): StoredWorkflow {
  return {
    workspace: row.workspace,
    workflowId: row.workflow_id,
    version: row.version,
    // Stored definitions passed validation when saved; they are parsed, not re-validated.
    definition: JSON.parse(row.definition) as WorkflowDefinition,
    createdAt: row.created_at,
  };
}

/** The latest version, or a given one. `null` when it does not exist in this workspace. */
export async function getWorkflow(db: D1Database, workspace: string, workflowId: string, version?: string): Promise<StoredWorkflow | null> {
  const row =
    version === undefined
      ? await db
          .prepare(
            `SELECT v.workspace, v.workflow_id, v.version, v.definition, v.created_at
             FROM workflows w JOIN workflow_versions v
               ON v.workspace = w.workspace AND v.workflow_id = w.workflow_id AND v.version = w.latest_version
             WHERE w.workspace = ?1 AND w.workflow_id = ?2`,
          )
          .bind(workspace, workflowId)
          .first<VersionRow>()
      : await db
          .prepare(
            `SELECT workspace, workflow_id, version, definition, created_at FROM workflow_versions
             WHERE workspace = ?1 AND workflow_id = ?2 AND version = ?3`,
          )
          .bind(workspace, workflowId, version)
          .first<VersionRow>();
  return row ? toStored(row) : null;
}

/**
 * The latest version plus the sealed workspace secrets its definition names, in ONE statement:
 * the signed hook needs its signing secret and must not spend a round trip on it.
 */
export async function getWorkflowWithSecrets(
  db: D1Database,
  workspace: string,
  workflowId: string,
): Promise<{ workflow: StoredWorkflow; secrets: StoredSecret[] } | null> {
  const row = await db
    .prepare(
      `SELECT v.workspace, v.workflow_id, v.version, v.definition, v.created_at,
              ${sealedSecretsColumn("w.workspace", "v.definition")} AS secrets
       FROM workflows w JOIN workflow_versions v
         ON v.workspace = w.workspace AND v.workflow_id = w.workflow_id AND v.version = w.latest_version
       WHERE w.workspace = ?1 AND w.workflow_id = ?2`,
    )
    .bind(workspace, workflowId)
    .first<VersionRow & { secrets: string | null }>();
  return row ? { workflow: toStored(row), secrets: parseSealedSecrets(row.secrets) } : null;
}

export interface WorkflowSummary {
  workflowId: string;
  latestVersion: string;
  schedule: string | null;
  updatedAt: number;
}

/**
 * The workspace's workflows, ordered by id, one page at a time: `after` is the last id of the
 * previous page (keyset pagination, so a page costs one indexed range read).
 */
export async function listWorkflows(
  db: D1Database,
  workspace: string,
  options: { after?: string; limit?: number } = {},
): Promise<WorkflowSummary[]> {
  const limit = Math.min(Math.max(options.limit ?? 100, 1), 500);
  const { results } = await db
    .prepare(
      `SELECT workflow_id, latest_version, schedule, updated_at FROM workflows
       WHERE workspace = ?1 AND workflow_id > ?2
       ORDER BY workflow_id LIMIT ?3`,
    )
    .bind(workspace, options.after ?? "", limit)
    .all<{ workflow_id: string; latest_version: string; schedule: string | null; updated_at: number }>();
  return results.map((row) => ({
    workflowId: row.workflow_id,
    latestVersion: row.latest_version,
    schedule: row.schedule,
    updatedAt: row.updated_at,
  }));
}
