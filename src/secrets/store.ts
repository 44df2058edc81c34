/**
 * The `workspace_secrets` table: sealed values only (src/secrets/crypto.ts). Nothing here ever
 * sees a plaintext, and no reader returns ciphertexts to the API: listing returns names and times.
 */
import type { SealedSecret } from "./crypto";

export interface StoredSecret extends SealedSecret {
  name: string;
}

export interface SecretListing {
  name: string;
  keyId: string;
  createdAt: number;
  updatedAt: number;
}

/** Create or replace; `created_at` survives a replace. One statement. */
export async function putSealedSecret(
  db: D1Database,
  workspace: string,
  name: string,
  sealed: SealedSecret,
  now: number,
): Promise<SecretListing> {
  const row = await db
    .prepare(
      `INSERT INTO workspace_secrets (workspace, name, key_id, iv, ciphertext, created_at, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
       ON CONFLICT (workspace, name) DO UPDATE
         SET key_id = excluded.key_id, iv = excluded.iv, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at
       RETURNING name, key_id, created_at, updated_at`,
    )
    .bind(workspace, name, sealed.keyId, sealed.iv, sealed.ciphertext, now)
    .first<{ name: string; key_id: string; created_at: number; updated_at: number }>();
  return { name: row!.name, keyId: row!.key_id, createdAt: row!.created_at, updatedAt: row!.updated_at };
}

export async function listSecrets(db: D1Database, workspace: string): Promise<SecretListing[]> {
  const { results } = await db
    .prepare("SELECT name, key_id, created_at, updated_at FROM workspace_secrets WHERE workspace = ?1 ORDER BY name")
    .bind(workspace)
    .all<{ name: string; key_id: string; created_at: number; updated_at: number }>();
  return results.map((r) => ({ name: r.name, keyId: r.key_id, createdAt: r.created_at, updatedAt: r.updated_at }));
}

/** True when a row was deleted. */
export async function deleteSecret(db: D1Database, workspace: string, name: string): Promise<boolean> {
  const row = await db
    .prepare("DELETE FROM workspace_secrets WHERE workspace = ?1 AND name = ?2 RETURNING name")
    .bind(workspace, name)
    .first();
  return row !== null;
}

/**
 * A SQL scalar subquery (a JSON array text, or NULL) of the sealed secrets of `workspaceSql` whose
 * name appears as `secrets.<name>` in `textSql` (a definition's JSON). Reads ride along in a
 * statement the caller already makes — the step claim, the hook's workflow read — so resolving
 * secrets costs no extra round trip. `instr` over-selects (PAYMENTS_KEY also matches
 * PAYMENTS_KEY_2); callers pick by exact name.
 */
export function sealedSecretsColumn(workspaceSql: string, textSql: string): string {
  return `(SELECT json_group_array(json_object('name', ws.name, 'keyId', ws.key_id, 'iv', ws.iv, 'ciphertext', ws.ciphertext))
             FROM workspace_secrets ws
            WHERE ws.workspace = ${workspaceSql} AND instr(${textSql}, 'secrets.' || ws.name) > 0)`;
}

/** Parse the column above. */
export function parseSealedSecrets(column: string | null | undefined): StoredSecret[] {
  if (!column) return [];
  return JSON.parse(column) as StoredSecret[];
}
