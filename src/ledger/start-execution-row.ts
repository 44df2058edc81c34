/**
 * The start batch's execution row: the winner's insert or the duplicate's count, one statement for
 * both sides of the claim (./executions.ts runs it; ./start-source.ts says whose row it is).
 */
import { sealedSecretsColumn } from "../secrets/store";
import type { ExecutionStatus, NewExecution } from "./execution-types";
import { gateVersionOf, latestVersionGate, type Source } from "./start-source";

/** How many duplicates of one execution are kept one by one (its `duplicate_log`, migrations/0024); the count goes on. */
export const MAX_DUPLICATE_TRIGGERS_KEPT = 100;

/** What the execution row of a start differs in between its candidate ids (`Variant`). */
export interface VariantFacts {
  /** The candidate id the first facts are for; null: one set of facts whatever the id. */
  first: string | null;
  status: [ExecutionStatus, ExecutionStatus];
  /** 1 when the start claims a first step for that candidate (the chained claim counts its attempt). */
  maxAttempt: [number, number];
  /** The successors the entry's edges take, as JSON: `executions.entry_next` (migrations/0045, ./entry-step.ts). */
  entryNext: [string, string];
}

/** The execution row's SQL text, per kind of source (built once each). */
const EXECUTION_ROW_SQL = new Map<boolean, string>();

function executionRowSql(source: Source): string {
  const { claim } = source;
  const cached = EXECUTION_ROW_SQL.get(claim);
  if (cached !== undefined) return cached;
  const identity = claim ? "src.identity" : "NULL";
  const previous = claim ? "src.previous_execution_id" : "NULL";
  // The business values' hashes the search finds the execution by (its `identity_values` rows, by
  // trigger): the claim's, or those of the execution a start over starts over. Kept on the row (and
  // then its tombstone) so their rows are deleted by primary key (migrations/0033).
  const startedOverValues = "(SELECT p.value_hashes FROM executions p WHERE p.id = ?8)";
  const valueHashes = claim ? `coalesce(src.value_hashes, ${startedOverValues})` : startedOverValues;
  const { table, mine, mineOrNamed, another } = source.at(22);
  const pick = (a: string, b: string) => `CASE WHEN ?14 IS NULL OR src.execution_id = ?14 THEN ${a} ELSE ${b} END`;
  const secrets = `(SELECT ${sealedSecretsColumn("?1", "v.definition")}
                    FROM workflow_versions v WHERE v.workspace = ?1 AND v.workflow_id = ?2 AND v.version = ?3)`;
  // A claim's SELECT also yields the row another request's claim left, so the insert conflicts and
  // counts the duplicate — unless that row holds my token (then a conflict is a collision: nothing).
  const duplicate = claim
    ? `ON CONFLICT (id) DO UPDATE SET
         duplicate_deliveries = duplicate_deliveries + 1, last_duplicate_at = ?9,
         duplicate_log = CASE WHEN duplicate_deliveries < ${MAX_DUPLICATE_TRIGGERS_KEPT}
                              THEN json_insert(coalesce(duplicate_log, '[]'), '$[#]', json_array(duplicate_deliveries + 1, ?9, ?5, ?6))
                              ELSE duplicate_log END
       WHERE ${another}`
    : "";
  const sql = `INSERT INTO executions
         (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
          started_over_from, previous_execution_id, lineage_id, created_at, updated_at, finished_at,
          retain_completed_ms, retain_failed_ms, retain_cancelled_ms, max_attempt, value_hashes, entry_next)
       SELECT src.execution_id, ?1, ?2, ?3, ?4, ?5, ?6, ${identity}, ${pick("?15", "?16")}, ?7, ?8, ${previous},
              coalesce((SELECT p.lineage_id FROM executions p WHERE p.id = coalesce(?8, ${previous})), ${identity}, src.execution_id),
              ?9, ?9, CASE WHEN ${pick("?15", "?16")} = 'RUNNING' THEN NULL ELSE ?9 END, ?10, ?11, ?12, ${pick("?17", "?18")},
              ${valueHashes}, ${pick("?20", "?21")}
       FROM ${table}
       WHERE ${claim ? `${mineOrNamed} AND ${latestVersionGate("?1", "?2", "?19")}` : mine}
       ${duplicate}
       RETURNING id, status, duplicate_deliveries, last_duplicate_at,
                 CASE WHEN ?13 = 1 AND duplicate_deliveries = 0 THEN ${secrets} END AS sealed`;
  EXECUTION_ROW_SQL.set(claim, sql);
  return sql;
}

/**
 * `startExecutionRow`: the execution row — and, in claim mode, the duplicate's count. ONE statement
 * for both sides of the claim, decided by the identity row the claim left:
 * - it holds my token: the execution is inserted (the winner's only write here);
 * - it holds another's and names an existing execution: the insert conflicts on that id, and
 *   `DO UPDATE` counts the duplicate on it — counter, time, and the duplicate as an event in the
 *   row's `duplicate_log` (its number, time, how it arrived and what made it the same trigger:
 *   the trigger's own kinds, since the execution it joined may be a start over, whose kind is
 *   `forced`), the first MAX_DUPLICATE_TRIGGERS_KEPT of them. One row written (with its entry in
 *   `executions_with_duplicates`, whose WHERE reads the count).
 * - it names an execution that no longer exists (erased inside its window): nothing; the caller
 *   answers from the tombstone.
 * A start over joins the lineage of the execution it starts over, a reuse after failure that of
 * the execution it follows (`src.previous_execution_id`), any other execution of a trigger the
 * lineage named by its identity: `lineage_id` = the identity, a value that needs no row (so the
 * one-live gate holds once the trigger's earlier executions are swept or erased); the
 * predecessors' lineages are the identity too (migrations/0026). A forced run begins its own.
 * RETURNING the row, its duplicate count (0: inserted now) and, when `withSecrets`, the sealed
 * secrets the definition names (the chained run's `StepRun`).
 */
export function startExecutionRow(
  db: D1Database,
  source: Source,
  record: NewExecution,
  facts: VariantFacts,
  withSecrets: boolean,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(executionRowSql(source))
    .bind(
      record.workspace,
      record.workflowId,
      record.version,
      record.entryVertexId,
      record.triggerKind,
      record.identityKind,
      record.payloadJson,
      record.startedOverFrom ?? null,
      now,
      record.retention.completedMs,
      record.retention.failedMs,
      record.retention.cancelledMs,
      withSecrets ? 1 : 0,
      facts.first,
      facts.status[0],
      facts.status[1],
      facts.maxAttempt[0],
      facts.maxAttempt[1],
      gateVersionOf(record),
      facts.entryNext[0],
      facts.entryNext[1],
      ...source.params,
    );
}
