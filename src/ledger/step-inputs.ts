/**
 * What a claimed step reads, and nothing more: the outputs its expressions can reach and the
 * payload only if they read it, measured in SQL against D1's value limit before anything is built
 * (src/definitions/step-inputs.ts holds the analysis). Read inside the claim batch
 * (./step-claim.ts `claimAndLoad`), or on its own after a chained claim (`loadStepInputs`).
 */
import type { StepRef } from "./step-sql";
import { STEP_ROWS, type RowSource } from "./work-rows";

/** What a claimed step reads: only the outputs its expressions can reach, and the payload only if they read it. */
export type StepInputs =
  | {
      withinBound: true;
      /** The payload, when the step reads it (the entry step's output IS the payload). */
      payload: unknown;
      readsPayload: boolean;
      /** Vertex id → output, of the outputs the step reads. */
      outputs: Record<string, unknown>;
      /** COMPLETED steps whose taken edges were not recorded (an older execution's entry row, written by ingress). */
      unrecorded: string[];
    }
  | {
      withinBound: false;
      /** Bytes of what the step reads: the payload (if read) and the JSON object of the outputs. */
      inputBytes: number;
      readsPayload: boolean;
      /** Vertex id → bytes, of each output the step reads (for the error). */
      outputSizes: Record<string, number>;
    };

/**
 * The most a step may read in one claim: the payload (if it reads it) plus the JSON object of the
 * outputs it reads. D1 refuses any value or row over 2,000,000 bytes; the rest of the row is
 * small (a few numbers and the ids of unrecorded steps).
 */
export const MAX_STEP_INPUT_BYTES = 1_900_000;

export interface StepInputsBound {
  maxBytes: number;
  /**
   * The analysis version the caller understands (src/definitions/step-inputs.ts); a version stored
   * under another one — or `null` — reads every output, under the same bound.
   */
  analysisVersion: number | null;
}

export interface StepInputsRow {
  input_bytes: number;
  reads_payload: number;
  /** The payload as JSON text, when read and within the bound. */
  payload: string | null;
  /** JSON object vertex id → output of the outputs read, when within the bound. */
  outputs: string | null;
  /** Over the bound only: JSON object vertex id → bytes of each output read. */
  output_sizes: string | null;
  /** JSON array: COMPLETED steps whose taken edges were not recorded (see `backfill`). */
  unrecorded: string;
}

/**
 * `readStepInputs`: what the step just claimed reads — nothing more. Its pinned version's
 * `step_inputs` (src/definitions/step-inputs.ts) names, per vertex, the outputs its expressions
 * can reach and whether they read the payload (the entry step's output IS the payload, so it is
 * never loaded twice); "all" for a dynamic reference, and for a version without the analysis.
 * The entry's edges are added while some COMPLETED step has no recorded edges (the backfill).
 *
 * D1 refuses any value or row over 2,000,000 bytes, and inside the claim batch such a refusal
 * would roll the claim back with it (the step would loop, its attempt counter never moving). So
 * the sizes are summed in SQL first, and the payload and the outputs object are built only when
 * the sum is within `maxBytes`; over it, the row says so (with each output's size) and the runner
 * settles the step FAILED. The outputs object is concatenated from the stored JSON texts, so its
 * size is exactly the sum measured.
 *
 * Runs only for a claim made by this batch (EXECUTING, updated at `now`): a duplicate delivery
 * reads nothing. Binds ?1 execution id, ?2 vertex id, ?3 analysis version, ?4 max bytes, ?5 now.
 */
export function readStepInputs(
  db: D1Database,
  ref: StepRef,
  now: number,
  bound: StepInputsBound,
  /** The row this batch claimed, when it is not the step itself: a MAP's item reads its MAP's inputs (./work-rows.ts). */
  claimed: { rows: RowSource; key: string } = { rows: STEP_ROWS, key: ref.vertexId },
): D1PreparedStatement {
  return db
    .prepare(
      `WITH run AS (
         SELECT e.payload, e.entry_vertex_id AS entry,
                CASE WHEN json_extract(v.step_inputs, '$.v') = ?3 THEN v.step_inputs END AS spec
         FROM executions e
         JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
         WHERE e.id = ?1
           AND EXISTS (SELECT 1 FROM ${claimed.rows.table} s
                       WHERE s.execution_id = ?1 AND s.${claimed.rows.key} = ?6 AND s.state = 'EXECUTING' AND s.updated_at = ?5)
       ),
       unrecorded AS (
         SELECT json_group_array(vertex_id) AS ids, count(*) AS n FROM steps
         WHERE execution_id = ?1 AND state = 'COMPLETED' AND next_vertices IS NULL
       ),
       wanted AS (
         SELECT run.payload, run.entry, unrecorded.ids AS unrecorded,
                (SELECT value FROM json_each(run.spec, '$.vertices') WHERE key = ?2) AS own,
                CASE WHEN unrecorded.n > 0 THEN json_extract(run.spec, '$.backfill') END AS backfill,
                run.spec IS NULL AS legacy
         FROM run, unrecorded
       ),
       flags AS (
         SELECT wanted.*,
                (legacy OR coalesce(json_extract(own, '$.all'), 0) OR coalesce(json_extract(backfill, '$.all'), 0)) AS reads_all
         FROM wanted
       ),
       needed AS (
         SELECT o.vertex_id, coalesce(o.output, 'null') AS output
         FROM steps o, flags
         WHERE o.execution_id = ?1 AND o.state = 'COMPLETED' AND o.vertex_id <> flags.entry
           AND (flags.reads_all
                OR o.vertex_id IN (SELECT value FROM json_each(flags.own, '$.steps'))
                OR o.vertex_id IN (SELECT value FROM json_each(flags.backfill, '$.steps')))
       ),
       measured AS (
         SELECT flags.*,
                (reads_all OR coalesce(json_extract(own, '$.payload'), 0)
                           OR coalesce(json_extract(backfill, '$.payload'), 0)) AS reads_payload,
                2 + coalesce((SELECT sum(length(CAST(output AS BLOB)) + length(CAST(vertex_id AS BLOB)) + 4) FROM needed), 0)
                  AS outputs_bytes
         FROM flags
       )
       SELECT outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END AS input_bytes,
              reads_payload, unrecorded,
              CASE WHEN reads_payload AND outputs_bytes + length(CAST(payload AS BLOB)) <= ?4 THEN payload END AS payload,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END <= ?4
                THEN (SELECT '{' || coalesce(group_concat(json_quote(vertex_id) || ':' || output, ','), '') || '}' FROM needed)
              END AS outputs,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END > ?4
                THEN (SELECT json_group_object(vertex_id, length(CAST(output AS BLOB))) FROM needed) END AS output_sizes
       FROM measured`,
    )
    .bind(ref.executionId, ref.vertexId, bound.analysisVersion, bound.maxBytes, now, claimed.key);
}

export function toStepInputs(row: StepInputsRow): StepInputs {
  const readsPayload = row.reads_payload !== 0;
  if (row.outputs === null) {
    return {
      withinBound: false,
      inputBytes: row.input_bytes,
      readsPayload,
      outputSizes: JSON.parse(row.output_sizes ?? "{}") as Record<string, number>,
    };
  }
  return {
    withinBound: true,
    payload: row.payload === null ? undefined : (JSON.parse(row.payload) as unknown),
    readsPayload,
    outputs: JSON.parse(row.outputs) as Record<string, unknown>,
    unrecorded: JSON.parse(row.unrecorded) as string[],
  };
}

/**
 * `loadStepInputs`: what a step claimed by a chained claim (./chain-claim.ts) reads, loaded on its
 * own AFTER the batch that claimed it committed — inside that batch, a read D1 refuses (over
 * 2,000,000 bytes) would have rolled the settle back with it. `claimedAt` is the claim's `now`
 * (the read runs only while the step is EXECUTING under that claim). Null: no longer that claim.
 */
export async function loadStepInputs(db: D1Database, ref: StepRef, claimedAt: number, bound: StepInputsBound): Promise<StepInputs | null> {
  const row = await readStepInputs(db, ref, claimedAt, bound).first<StepInputsRow>();
  return row ? toStepInputs(row) : null;
}
