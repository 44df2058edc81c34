/**
 * The start batch's steps: every step decided at start in one insert — the entry's successors
 * and, with chaining, the first step the caller runs at once, inserted claimed with its key
 * (./executions.ts runs it; ./start-source.ts says whose execution it is).
 */
import { CHAINED_CLAIM_COLUMNS, type ChainedClaim, type ChainOffer, type FirstStepKey } from "./chain-claim";
import type { StartPlan } from "./execution-types";
import { keyGuardedColumn } from "./key-sends";
import type { Source } from "./start-source";

/**
 * One start step as `insertStartSteps` reads it from its JSON parameter: the candidate execution id
 * it belongs to (`x`, null: any), the vertex, its state, and for
 * a step claimed at its insert (`c` = 1, state EXECUTING) the destination key computed for it
 * (`k`, for execution id `kx`), where the key goes (`d`) and whether it declares a retention (`g`: `steps.key_guarded`,
 * with the retention in ms — migrations/0036).
 */
interface StartStepRow {
  x: string | null;
  v: string;
  s: "DISPATCHED" | "SKIPPED" | "EXECUTING";
  c: 0 | 1;
  k?: string;
  kx?: string;
  d?: string;
  g?: number;
}

/** The start steps' SQL text, per kind of source (built once each). */
const START_STEPS_SQL = new Map<boolean, string>();

function startStepsSql(source: Source): string {
  const cached = START_STEPS_SQL.get(source.claim);
  if (cached !== undefined) return cached;
  const { table, mine } = source.at(5);
  // A burnt key (docs/steps.md "Compensation") is not inserted with the step: its first attempt computes it and is refused.
  const keyed = (field: string) =>
    `CASE WHEN j.value ->> 'kx' = src.execution_id
               AND NOT EXISTS (SELECT 1 FROM burnt_keys b WHERE b.workspace = ?1 AND b.idempotency_key = j.value ->> 'k')
          THEN j.value ->> '${field}' END`;
  const prior = (column: string) =>
    `(SELECT ks.${column} FROM destination_key_sends ks
       WHERE ks.workspace = steps.workspace AND ks.idempotency_key = steps.idempotency_key AND ks.destination = steps.key_destination)`;
  // migrations/0043: the key's first send to its destination, written by this row's trigger, names
  // the step — the key search finds it by that row, `steps_by_key` holds no entry for it.
  const firstSend = `CASE WHEN ${keyed("k")} IS NOT NULL AND ${keyed("d")} IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM destination_key_sends ks
                          WHERE ks.workspace = ?1 AND ks.idempotency_key = j.value ->> 'k' AND ks.destination = j.value ->> 'd')
        THEN 1 END`;
  const sql = `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, idempotency_key,
                          key_destination, key_guarded, key_first_send, created_at, created_seq, updated_at, finished_at)
       SELECT src.execution_id, j.value ->> 'v', ?1, j.value ->> 's', j.value ->> 'c', j.value ->> 'c', ?2,
              CASE WHEN j.value ->> 'c' = 1 THEN ?2 + ?3 END, ${keyed("k")}, ${keyed("d")}, ${keyed("g")}, ${firstSend},
              ?2, j.key, ?2, CASE WHEN j.value ->> 's' = 'SKIPPED' THEN ?2 END
       FROM ${table} CROSS JOIN json_each(?4) j
       WHERE ${mine} AND (j.value ->> 'x' IS NULL OR j.value ->> 'x' = src.execution_id)
       ON CONFLICT (execution_id, vertex_id) DO NOTHING
       RETURNING ${CHAINED_CLAIM_COLUMNS}, state, key_destination AS keyDestination,
                 ${prior("first_sent_at")} AS priorFirstSentAt, ${prior("counted_from")} AS priorCountedFrom`;
  START_STEPS_SQL.set(source.claim, sql);
  return sql;
}

/**
 * `insertStartSteps`: every step decided at start, in ONE statement — each successor of the entry
 * (DISPATCHED available now, or SKIPPED finished now; the entry itself has no row since
 * migrations/0045: the execution row is its step, ./entry-step.ts), and with chaining the first step the caller runs at once, inserted
 * claimed: EXECUTING under epoch 1 and attempt 1 with its lease — the same row a claim would leave,
 * with no claim to run. Its key's first send is written by the trigger of migrations/0024
 * (`steps_key_sent_at_insert`); its attempt has no row until it ends (migrations/0040). Only for the source's
 * own execution (my claim, or the forced start's gates): a duplicate's copy inserts nothing.
 * RETURNING the rows inserted, each with the key's earlier first send to that destination, if any
 * (RETURNING sees the database before the row's triggers ran: the send the trigger keeps).
 * Binds ?1 workspace, ?2 now, ?3 lease ms, ?4 the rows, the source from ?5.
 */
export function insertStartSteps(
  db: D1Database,
  source: Source,
  workspace: string,
  rows: StartStepRow[],
  leaseMs: number,
  now: number,
): D1PreparedStatement {
  return db.prepare(startStepsSql(source)).bind(workspace, now, leaseMs, JSON.stringify(rows), ...source.params);
}

export interface StartStepReturned extends Omit<ChainedClaim, "keySendsJson"> {
  state: string;
  keyDestination: string | null;
  priorFirstSentAt: number | null;
  priorCountedFrom: number | null;
}

/** One candidate execution of a start: its id (null: whichever the claim gives), its plan. */
export interface Variant {
  executionId: string | null;
  plan: StartPlan;
}

/** The first step of `plan` the chain may claim: the first candidate, in the offer's order, the plan dispatches. */
export function chainedVertexOf(plan: StartPlan, offer: ChainOffer | null): string | null {
  if (!offer) return null;
  const dispatched = new Set(plan.steps.filter((s) => s.state === "DISPATCHED").map((s) => s.vertexId));
  return offer.candidates.find((id) => dispatched.has(id)) ?? null;
}

/** The start steps of every variant, as `insertStartSteps` reads them. */
export function startStepRows(variants: Variant[], offer: ChainOffer | null, firstKey: FirstStepKey | null): StartStepRow[] {
  const rows: StartStepRow[] = [];
  const tagged = variants.length > 1;
  for (const { executionId, plan } of variants) {
    const x = tagged ? executionId : null;
    const chained = chainedVertexOf(plan, offer);
    for (const step of plan.steps) {
      if (step.vertexId !== chained) {
        rows.push({ x, v: step.vertexId, s: step.state, c: 0 });
        continue;
      }
      const row: StartStepRow = { x, v: step.vertexId, s: "EXECUTING", c: 1 };
      // The key computed for one candidate id only: on another id, the step persists its key when it runs.
      if (firstKey && firstKey.vertexId === step.vertexId && (executionId === null || executionId === firstKey.executionId)) {
        Object.assign(row, { k: firstKey.key, kx: firstKey.executionId, d: firstKey.destination, g: keyGuardedColumn(firstKey.guarded) });
      }
      rows.push(row);
    }
  }
  return rows;
}

/** The step the start inserted claimed, with its key's first send when the batch recorded one. */
export function chainedOf(rows: StartStepReturned[], now: number): ChainedClaim | null {
  const row = rows.find((r) => r.state === "EXECUTING");
  if (!row) return null;
  const { state: _state, keyDestination, priorFirstSentAt, priorCountedFrom, ...claim } = row;
  if (keyDestination === null || claim.idempotencyKey === null) return claim;
  // The send the trigger kept: an earlier one to the same destination, else this one (now).
  return { ...claim, keySendsJson: JSON.stringify({ [keyDestination]: [priorFirstSentAt ?? now, priorCountedFrom ?? now] }) };
}
