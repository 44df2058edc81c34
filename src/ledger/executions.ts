/**
 * Starting executions: the trigger-identity claim, the start batch, the identity sweep, and the
 * reads ingress needs (status, progress for test runs and streams).
 *
 * The dedupe guarantee lives in `claimIdentity`: ONE `INSERT … ON CONFLICT (identity) DO UPDATE`
 * against the primary key of `execution_identities`. Whatever the interleaving of N identical
 * requests, SQLite applies their claims one after another, and exactly one of them finds the row
 * absent (or expired) and leaves its own `claim_token` in it; every other one only increments the
 * duplicate counter. The rest of the start batch (execution row, step rows) is written with
 * `INSERT … SELECT … FROM execution_identities WHERE claim_token = <mine>`, so it exists only for
 * that winner — and because the batch is one transaction, never without the claim, nor the claim
 * without it.
 *
 * Never a read followed by a write: the caller does not look first; it claims and learns from
 * what the batch returned.
 */
import { runBoundedDelete, sweepInBatches, type SweepReport, type SweepSpec } from "./sweep";

export type TriggerKind = "webhook" | "test" | "stream" | "schedule" | "start_over";
export type IdentityKind = "content" | "fields" | "client" | "schedule" | "forced";
export type ExecutionStatus = "RUNNING" | "COMPLETED" | "FAILED";

/** What the new execution is; the same whoever wins. */
export interface ExecutionRecord {
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: TriggerKind;
  identityKind: IdentityKind;
  /** The trigger payload as JSON text; also the entry step's output. */
  payloadJson: string;
  startedOverFrom?: string | null;
  /**
   * Start only if `version` is still the workflow's latest (checked inside the batch). Set when
   * the caller took the definition from a cache instead of reading it: a miss writes nothing and
   * `startExecution` throws `WorkflowVersionChanged`, so the caller re-reads and retries.
   */
  requireLatestVersion?: boolean;
}

/** The start was gated on a version that is no longer the workflow's latest; nothing was written. */
export class WorkflowVersionChanged extends Error {
  constructor(
    readonly workspace: string,
    readonly workflowId: string,
    readonly version: string,
  ) {
    super(`workflow ${workspace}/${workflowId} is no longer at version ${version}`);
    this.name = "WorkflowVersionChanged";
  }
}

/**
 * The version gate: true when not asked for (`?v` NULL), else true only while `?v` is the latest.
 * Three parameters: workspace, workflow id, version-or-NULL.
 */
function latestVersionGate(ws: string, wf: string, v: string): string {
  return `(${v} IS NULL OR EXISTS (SELECT 1 FROM workflows WHERE workspace = ${ws} AND workflow_id = ${wf} AND latest_version = ${v}))`;
}

/** The entry's successors as planned by `planReadySteps` (src/steps/plan.ts). */
export interface StartPlan {
  steps: ReadonlyArray<{ vertexId: string; state: "DISPATCHED" | "SKIPPED" }>;
  /**
   * The successors whose edges the entry takes: stored as the entry step's `next_vertices`, which
   * the steps' fan-in decision reads (migrations/0004_steps.sql).
   */
  entryNext: readonly string[];
}

export type StartMode =
  /** Test/stream runs and start-over: no identity, an id chosen by the caller. */
  | { mode: "forced"; executionId: string; plan: StartPlan }
  | {
      mode: "claim";
      identity: string;
      /** Random per request: the row holding it after the claim names the winner. */
      claimToken: string;
      /**
       * The id to use when the identity hash is already taken by an execution of an earlier
       * window (the first window's execution id is the identity itself).
       */
      takeoverExecutionId: string;
      expiresAt: number;
      /** Plans for each candidate id (edges may read `execution.id`, so they can differ). */
      plans: { first: StartPlan; takeover: StartPlan };
    };

export type StartOutcome =
  | { created: true; executionId: string; status: ExecutionStatus; plan: StartPlan }
  | {
      created: false;
      executionId: string;
      status: ExecutionStatus;
      duplicateDeliveries: number;
      lastDuplicateAt: number;
    };

/** The only execution status a start can produce: RUNNING while a step is dispatched. */
export function startStatus(plan: StartPlan): ExecutionStatus {
  return plan.steps.some((s) => s.state === "DISPATCHED") ? "RUNNING" : "COMPLETED";
}

/**
 * The claim. Three outcomes in one statement, decided by SQLite under its write lock:
 * - no row: insert it; the execution id is the identity itself, unless an execution with that id
 *   already exists (an earlier window whose identity row was swept), then the takeover id;
 * - fresh row (`expires_at > now`): a duplicate; count it (counter + last time, same statement);
 * - expired row: take it over for a new window — new execution id, my token, new expiry,
 *   counter reset (the old execution keeps its own count).
 * RETURNING tells the caller whose token the row holds.
 */
export function claimIdentity(
  db: D1Database,
  c: {
    identity: string;
    workspace: string;
    workflowId: string;
    takeoverExecutionId: string;
    claimToken: string;
    expiresAt: number;
    gateVersion: string | null;
  },
  now: number,
): D1PreparedStatement {
  const expired = "execution_identities.expires_at <= ?6";
  // INSERT … SELECT … WHERE (not VALUES) so the version gate can veto the whole claim.
  return db
    .prepare(
      `INSERT INTO execution_identities
         (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, duplicate_deliveries, last_duplicate_at)
       SELECT ?1, ?2, ?3,
              CASE WHEN EXISTS (SELECT 1 FROM executions WHERE id = ?1) THEN ?4 ELSE ?1 END,
              ?5, ?6, ?7, 0, NULL
       WHERE ${latestVersionGate("?2", "?3", "?8")}
       ON CONFLICT (identity) DO UPDATE SET
         execution_id         = CASE WHEN ${expired} THEN excluded.execution_id ELSE execution_identities.execution_id END,
         claim_token          = CASE WHEN ${expired} THEN excluded.claim_token  ELSE execution_identities.claim_token END,
         window_start         = CASE WHEN ${expired} THEN excluded.window_start ELSE execution_identities.window_start END,
         expires_at           = CASE WHEN ${expired} THEN excluded.expires_at   ELSE execution_identities.expires_at END,
         duplicate_deliveries = CASE WHEN ${expired} THEN 0    ELSE execution_identities.duplicate_deliveries + 1 END,
         last_duplicate_at    = CASE WHEN ${expired} THEN NULL ELSE ?6 END
       RETURNING execution_id, claim_token, duplicate_deliveries`,
    )
    .bind(c.identity, c.workspace, c.workflowId, c.takeoverExecutionId, c.claimToken, now, c.expiresAt, c.gateVersion);
}

/**
 * A duplicate's visible side: the execution the identity names counts the delivery too (its count
 * outlives the identity row), and RETURNs its current status for the 200 answer. Matches zero
 * rows for the winner, whose token the identity row holds.
 */
export function recordDuplicateDelivery(
  db: D1Database,
  d: { identity: string; claimToken: string; workspace: string; workflowId: string; gateVersion: string | null },
  now: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE executions
         SET duplicate_deliveries = duplicate_deliveries + 1, last_duplicate_at = ?3
       WHERE id = (SELECT execution_id FROM execution_identities WHERE identity = ?1 AND claim_token <> ?2)
         AND ${latestVersionGate("?4", "?5", "?6")}
       RETURNING id, status, duplicate_deliveries, last_duplicate_at`,
    )
    .bind(d.identity, d.claimToken, now, d.workspace, d.workflowId, d.gateVersion);
}

/**
 * Where the execution id of the start inserts comes from. For a claim: the identity row, only if
 * it holds my token (and, when the plans per candidate id differ, only if it names this
 * candidate). For a forced start: the given id, unconditionally.
 */
interface Source {
  from: string;
  params: unknown[];
}

function claimSource(identity: string, claimToken: string, candidate: string | null): Source {
  return {
    from: "FROM execution_identities src WHERE src.identity = ? AND src.claim_token = ? AND (? IS NULL OR src.execution_id = ?)",
    params: [identity, claimToken, candidate, candidate],
  };
}

function forcedSource(executionId: string, record: ExecutionRecord): Source {
  // The WHERE is required anyway: without one, SQLite would parse `ON CONFLICT` as a join clause.
  return {
    from: `FROM (SELECT ? AS execution_id) src WHERE ${latestVersionGate("?", "?", "?")}`,
    params: [executionId, gateVersionOf(record), record.workspace, record.workflowId, gateVersionOf(record)],
  };
}

function gateVersionOf(record: ExecutionRecord): string | null {
  return record.requireLatestVersion ? record.version : null;
}

/** Insert the execution row (the winner's only), RETURNING its id and status. */
export function insertExecution(
  db: D1Database,
  source: Source,
  record: ExecutionRecord,
  identityExpr: string,
  status: ExecutionStatus,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO executions
         (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
          started_over_from, created_at, updated_at, finished_at)
       SELECT src.execution_id, ?, ?, ?, ?, ?, ?, ${identityExpr}, ?, ?, ?, ?, ?, ?
       ${source.from}
       RETURNING id, status`,
    )
    .bind(
      record.workspace,
      record.workflowId,
      record.version,
      record.entryVertexId,
      record.triggerKind,
      record.identityKind,
      status,
      record.payloadJson,
      record.startedOverFrom ?? null,
      now,
      now,
      status === "RUNNING" ? null : now,
      ...source.params,
    );
}

/**
 * Insert a step row decided at start: the entry (COMPLETED, its output the payload, epoch 0 and
 * attempt 0 — it never ran on a worker, but the trace shows it), or a successor (DISPATCHED
 * available now, or SKIPPED finished now). Insert-if-absent on (execution_id, vertex_id).
 */
function insertStartStep(
  db: D1Database,
  source: Source,
  step: { vertexId: string; workspace: string; state: "COMPLETED" | "DISPATCHED" | "SKIPPED"; output: string | null; next: string | null },
  now: number,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, output, next_vertices, created_at, updated_at, finished_at)
       SELECT src.execution_id, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?, ?
       ${source.from}
       ON CONFLICT (execution_id, vertex_id) DO NOTHING`,
    )
    .bind(
      step.vertexId,
      step.workspace,
      step.state,
      now,
      step.output,
      step.next,
      now,
      now,
      step.state === "DISPATCHED" ? null : now,
      ...source.params,
    );
}

function samePlan(a: StartPlan, b: StartPlan): boolean {
  return JSON.stringify([a.steps, a.entryNext]) === JSON.stringify([b.steps, b.entryNext]);
}

/**
 * The start batch: one round trip, one transaction.
 *
 * claim mode: [claimIdentity, recordDuplicateDelivery, then per candidate plan: execution row,
 * entry step, successor steps]. The duplicate statement and the winner's inserts are mutually
 * exclusive by the token, so exactly one side writes.
 */
export function startExecutionStatements(db: D1Database, record: ExecutionRecord, start: StartMode, now: number): D1PreparedStatement[] {
  const variants: Array<{ source: Source; plan: StartPlan }> = [];
  const statements: D1PreparedStatement[] = [];
  let identityExpr: string;
  if (start.mode === "forced") {
    variants.push({ source: forcedSource(start.executionId, record), plan: start.plan });
    identityExpr = "NULL";
  } else {
    statements.push(
      claimIdentity(
        db,
        {
          identity: start.identity,
          workspace: record.workspace,
          workflowId: record.workflowId,
          takeoverExecutionId: start.takeoverExecutionId,
          claimToken: start.claimToken,
          expiresAt: start.expiresAt,
          gateVersion: gateVersionOf(record),
        },
        now,
      ),
      recordDuplicateDelivery(
        db,
        {
          identity: start.identity,
          claimToken: start.claimToken,
          workspace: record.workspace,
          workflowId: record.workflowId,
          gateVersion: gateVersionOf(record),
        },
        now,
      ),
    );
    identityExpr = "src.identity";
    if (samePlan(start.plans.first, start.plans.takeover)) {
      variants.push({ source: claimSource(start.identity, start.claimToken, null), plan: start.plans.first });
    } else {
      variants.push({ source: claimSource(start.identity, start.claimToken, start.identity), plan: start.plans.first });
      variants.push({ source: claimSource(start.identity, start.claimToken, start.takeoverExecutionId), plan: start.plans.takeover });
    }
  }
  for (const { source, plan } of variants) {
    statements.push(insertExecution(db, source, record, identityExpr, startStatus(plan), now));
    statements.push(
      insertStartStep(
        db,
        source,
        {
          vertexId: record.entryVertexId,
          workspace: record.workspace,
          state: "COMPLETED",
          output: record.payloadJson,
          next: JSON.stringify(plan.entryNext),
        },
        now,
      ),
    );
    for (const step of plan.steps) {
      statements.push(
        insertStartStep(
          db,
          source,
          { vertexId: step.vertexId, workspace: record.workspace, state: step.state, output: null, next: null },
          now,
        ),
      );
    }
  }
  return statements;
}

interface ExecutionIdRow {
  id: string;
  status: ExecutionStatus;
}
interface DuplicateRow extends ExecutionIdRow {
  duplicate_deliveries: number;
  last_duplicate_at: number;
}

/** Run the start batch and say what happened: created (this request won) or a duplicate. */
export async function startExecution(db: D1Database, record: ExecutionRecord, start: StartMode, now: number): Promise<StartOutcome> {
  const statements = startExecutionStatements(db, record, start, now);
  const results = await db.batch(statements);
  // A claim always RETURNs its row (inserted, counted or taken over) unless the version gate vetoed it.
  if (start.mode === "claim" && (results[0]?.results.length ?? 0) === 0) {
    throw new WorkflowVersionChanged(record.workspace, record.workflowId, record.version);
  }
  const offset = start.mode === "claim" ? 2 : 0;
  const variantPlans =
    start.mode === "forced"
      ? [start.plan]
      : samePlan(start.plans.first, start.plans.takeover)
        ? [start.plans.first]
        : [start.plans.first, start.plans.takeover];
  let index = offset;
  for (const plan of variantPlans) {
    const inserted = (results[index]?.results as ExecutionIdRow[] | undefined)?.[0];
    if (inserted) return { created: true, executionId: inserted.id, status: inserted.status, plan };
    index += 2 + plan.steps.length;
  }
  const duplicate = (results[1]?.results as DuplicateRow[] | undefined)?.[0];
  if (start.mode === "claim" && duplicate) {
    return {
      created: false,
      executionId: duplicate.id,
      status: duplicate.status,
      duplicateDeliveries: duplicate.duplicate_deliveries,
      lastDuplicateAt: duplicate.last_duplicate_at,
    };
  }
  if (start.mode === "forced" && record.requireLatestVersion) {
    throw new WorkflowVersionChanged(record.workspace, record.workflowId, record.version);
  }
  // Neither side wrote: a forced id collided, or an identity row names a missing execution.
  throw new Error(`start of an execution of ${record.workspace}/${record.workflowId} wrote nothing (mode ${start.mode})`);
}

/** Expired identities, oldest first. An expired row is also taken over by a claim; either is fine. */
const EXPIRED_IDENTITIES: SweepSpec = { table: "execution_identities", where: "expires_at <= ?1", orderBy: "expires_at" };

/** One bounded batch of the identity sweep. */
export function sweepExpiredIdentitiesOnce(db: D1Database, now: number, limit: number): Promise<number> {
  return runBoundedDelete(db, EXPIRED_IDENTITIES, [now], limit);
}

export function sweepExpiredIdentities(db: D1Database, now: number, opts = { batchSize: 500, maxBatches: 10 }): Promise<SweepReport> {
  return sweepInBatches((limit) => sweepExpiredIdentitiesOnce(db, now, limit), opts);
}

/** Just the status (cheap polling). `null` when absent from this workspace. */
export async function readExecutionStatus(db: D1Database, workspace: string, executionId: string): Promise<ExecutionStatus | null> {
  const row = await db
    .prepare(`SELECT status FROM executions WHERE id = ?1 AND workspace = ?2`)
    .bind(executionId, workspace)
    .first<{ status: ExecutionStatus }>();
  return row?.status ?? null;
}

/**
 * Bench baseline only (bench/triggers.mjs): what an engine without dedupe does per trigger — one
 * plain INSERT of an execution row. Reached only through a route that exists when the
 * `BENCH_ROUTES` var is `on`.
 */
export function insertExecutionPlain(
  db: D1Database,
  e: { id: string; workspace: string; workflowId: string; payloadJson: string },
  now: number,
): Promise<D1Result> {
  return db
    .prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, status, payload, created_at, updated_at, finished_at)
       VALUES (?1, ?2, ?3, 'baseline', 'baseline', 'test', 'forced', 'COMPLETED', ?4, ?5, ?5, ?5)`,
    )
    .bind(e.id, e.workspace, e.workflowId, e.payloadJson, now)
    .run();
}
