/**
 * Starting executions: the start batch — the trigger-identity claim (./identity-claim.ts), the
 * execution row (./start-execution-row.ts) and the start steps (./start-steps.ts), one
 * transaction; their shapes are ./execution-types.ts.
 *
 * The claim decides the winner; the rest of the start batch (execution row, step rows) is written
 * with `INSERT … SELECT … FROM execution_identities WHERE claim_token = <mine>` (./start-source.ts),
 * so it exists only for that winner — and because the batch is one transaction, never without the
 * claim, nor the claim without it.
 *
 * Never a read followed by a write: the caller does not look first; it claims and learns from
 * what the batch returned.
 */
import { LabelledBatch } from "./batch";
import type { ChainOffer, FirstStepKey } from "./chain-claim";
import {
  LIVE_STATUSES_SQL,
  WorkflowVersionChanged,
  type ExecutionStatus,
  type NewExecution,
  type StartMode,
  type StartOutcome,
  type StartPlan,
} from "./execution-types";
import { claimIdentity } from "./identity-claim";
import { startExecutionRow, type VariantFacts } from "./start-execution-row";
import { claimSource, forcedSource, gateVersionOf } from "./start-source";
import { chainedOf, chainedVertexOf, insertStartSteps, startStepRows, type StartStepReturned, type Variant } from "./start-steps";

/** The only execution status a start can produce: RUNNING while a step is dispatched. */
function startStatus(plan: StartPlan): ExecutionStatus {
  return plan.steps.some((s) => s.state === "DISPATCHED") ? "RUNNING" : "COMPLETED";
}

function samePlan(a: StartPlan, b: StartPlan): boolean {
  return JSON.stringify([a.steps, a.entryNext]) === JSON.stringify([b.steps, b.entryNext]);
}

type StartLabel = "claim" | "execution" | "steps" | "startOverFrom" | "identityValues";

/**
 * `copyIdentityValues`: a start over carries the trigger of the execution it starts over, so it is
 * found by the same business values: their hashes, which its insert copied from that execution
 * (`value_hashes`, migrations/0033), written as rows under the new id — only if the
 * start over was inserted (its gate let it through), dated with its creation (migrations/0027). Binds ?1 the new id,
 * ?2 workspace, ?3 the id started over from.
 */
function copyIdentityValues(db: D1Database, executionId: string, workspace: string, from: string) {
  return db
    .prepare(
      `INSERT INTO identity_values (workspace, value_hash, created_at, execution_id)
       SELECT n.workspace, v.value, n.created_at, ?1 FROM executions n CROSS JOIN json_each(n.value_hashes) v
       WHERE n.id = ?1 AND n.started_over_from = ?3 AND n.workspace = ?2
       ON CONFLICT DO NOTHING`,
    )
    .bind(executionId, workspace, from);
}

function variantsOf(start: StartMode): Variant[] {
  if (start.mode === "forced") return [{ executionId: start.executionId, plan: start.plan }];
  if (samePlan(start.plans.first, start.plans.alternate)) return [{ executionId: null, plan: start.plans.first }];
  return [
    { executionId: start.executionId, plan: start.plans.first },
    { executionId: start.alternateExecutionId, plan: start.plans.alternate },
  ];
}

interface ExecutionRow {
  id: string;
  status: ExecutionStatus;
  duplicate_deliveries: number;
  last_duplicate_at: number | null;
  sealed: string | null;
}

/**
 * Start an execution: ONE batch, one round trip, one transaction — and say what happened:
 * created (this request won) or a duplicate. With `chain`, the batch also inserts one of the
 * first steps claimed, for the caller to run at once (its result's `chained`); with `firstKey` too,
 * with that step's destination key persisted (the claimed step's `idempotencyKey`).
 *
 * claim mode, three statements whoever wins (docs/ledger.md "The start batch"): the identity
 * claim, the execution row (the winner's insert, or the duplicate's count), the start steps. A
 * duplicate writes one row (two on the first duplicate: the execution enters the duplicates index).
 * forced mode, two: the execution row and the start steps (a start over adds its values' copy and
 * the read of why it was refused).
 */
export async function startExecution(
  db: D1Database,
  record: NewExecution,
  start: StartMode,
  now: number,
  chain: ChainOffer | null = null,
  firstKey: FirstStepKey | null = null,
): Promise<StartOutcome> {
  const batch = new LabelledBatch<StartLabel>(db);
  const gateVersion = gateVersionOf(record);
  const offer = chain && chain.candidates.length > 0 ? chain : null;
  if (start.mode === "claim") {
    const { workspace, workflowId } = record;
    const values = start.identityValues && start.identityValues.length > 0 ? JSON.stringify(start.identityValues) : null;
    batch.add(
      "claim",
      claimIdentity(
        db,
        {
          identity: start.identity,
          workspace,
          workflowId,
          executionId: start.executionId,
          alternateExecutionId: start.alternateExecutionId,
          claimToken: start.claimToken,
          expiresAt: start.expiresAt,
          gateVersion,
          reuseAfterFailure: start.reuseAfterFailure === true,
          valueHashes: values,
        },
        now,
      ),
    );
  }
  const variants = variantsOf(start);
  const source = start.mode === "forced" ? forcedSource(start.executionId, record) : claimSource(start.identity, start.claimToken);
  const facts: VariantFacts = {
    first: variants.length > 1 ? variants[0]!.executionId : null,
    status: [startStatus(variants[0]!.plan), startStatus(variants.at(-1)!.plan)],
    maxAttempt: [chainedVertexOf(variants[0]!.plan, offer) ? 1 : 0, chainedVertexOf(variants.at(-1)!.plan, offer) ? 1 : 0],
    entryNext: [JSON.stringify(variants[0]!.plan.entryNext), JSON.stringify(variants.at(-1)!.plan.entryNext)],
  };
  batch.add("execution", startExecutionRow(db, source, record, facts, offer !== null, now));
  batch.add("steps", insertStartSteps(db, source, record.workspace, startStepRows(variants, offer, firstKey), offer?.leaseMs ?? 0, now));
  if (start.mode === "forced" && record.startedOverFrom) {
    batch.add("identityValues", copyIdentityValues(db, start.executionId, record.workspace, record.startedOverFrom));
    // After the inserts: names the live execution of the lineage (ours, if the start went through).
    batch.add(
      "startOverFrom",
      db
        .prepare(
          `SELECT f.status AS fromStatus, f.superseded_by AS supersededBy,
                  (SELECT l.id FROM executions l
                   WHERE l.lineage_id = f.lineage_id AND l.status IN ${LIVE_STATUSES_SQL} LIMIT 1) AS liveExecutionId
           FROM executions f WHERE f.id = ?1 AND f.workspace = ?2`,
        )
        .bind(record.startedOverFrom, record.workspace),
    );
  }
  const results = await batch.run();

  const row = results.first<ExecutionRow>("execution");
  if (row && row.duplicate_deliveries === 0) {
    const variant = variants.find((v) => v.executionId === null || v.executionId === row.id) ?? variants[0]!;
    const chained = chainedOf(results.rows<StartStepReturned>("steps"), now);
    return {
      created: true,
      executionId: row.id,
      status: row.status,
      plan: variant.plan,
      chained,
      sealedSecretsJson: chained ? row.sealed : null,
    };
  }
  if (row) {
    return {
      created: false,
      executionId: row.id,
      status: row.status,
      duplicateDeliveries: row.duplicate_deliveries,
      lastDuplicateAt: row.last_duplicate_at ?? now,
    };
  }
  if (start.mode === "claim") {
    // Nothing started and nothing counted. Under a version gate, the gate said no (or, rarely, what
    // follows: the caller re-reads the workflow and starts again without the gate, which tells).
    if (gateVersion !== null) throw new WorkflowVersionChanged(record.workspace, record.workflowId, record.version);
    // The identity names an execution that was erased on request inside its window (./history.ts):
    // still a duplicate — the trigger must not run the erased work again — answered from its
    // tombstone. Rare, so read after the batch rather than in every start.
    const removed = await db
      .prepare(
        `SELECT i.execution_id AS executionId, t.status AS status FROM execution_identities i
         JOIN execution_tombstones t ON t.id = i.execution_id AND t.workspace = ?2
         WHERE i.identity = ?1`,
      )
      .bind(start.identity, record.workspace)
      .first<{ executionId: string; status: ExecutionStatus }>();
    if (removed) {
      return { created: false, executionId: removed.executionId, status: removed.status, duplicateDeliveries: 0, lastDuplicateAt: now };
    }
  }
  if (start.mode === "forced" && record.startedOverFrom) {
    const from = results.first<{ fromStatus: ExecutionStatus; liveExecutionId: string | null; supersededBy: string | null }>(
      "startOverFrom",
    );
    if (!from || from.fromStatus === "RUNNING" || from.liveExecutionId !== null || from.supersededBy !== null) {
      return {
        created: false,
        refused: true,
        fromStatus: from?.fromStatus ?? null,
        liveExecutionId: from?.liveExecutionId ?? null,
        supersededBy: from?.supersededBy ?? null,
      };
    }
  }
  if (start.mode === "forced" && record.requireLatestVersion) {
    throw new WorkflowVersionChanged(record.workspace, record.workflowId, record.version);
  }
  // Neither side wrote: a forced id collided, or an identity row names a missing execution.
  throw new Error(`start of an execution of ${record.workspace}/${record.workflowId} wrote nothing (mode ${start.mode})`);
}
