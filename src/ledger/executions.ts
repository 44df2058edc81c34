/**
 * Starting executions: the trigger-identity claim, the start batch and the identity sweep.
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
import { LabelledBatch, type BatchResults } from "./batch";
import {
  chainedClaimStatements,
  chainedKeyStatements,
  createdNowGuard,
  identityGuard,
  type ChainedClaim,
  type ChainGuard,
  type ChainOffer,
  type FirstStepKey,
} from "./chain-claim";
import { sealedSecretsColumn } from "../secrets/store";
import { runBoundedDelete, sweepInBatches, type SweepReport, type SweepSpec } from "./sweep";

export type TriggerKind = "webhook" | "test" | "stream" | "schedule" | "start_over";
export type IdentityKind = "content" | "fields" | "client" | "schedule" | "forced";
export type ExecutionStatus = "RUNNING" | "COMPLETED" | "FAILED" | "CANCELLED";

/** What the new execution is; the same whoever wins. */
export interface NewExecution {
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
  /**
   * How long the execution is kept once finished, by how it ended (src/history/retention.ts: the
   * workflow's `history`, else the deployment's, never shorter than the dedupe window).
   */
  retention: ExecutionRetention;
}

/** Retention in ms per final status (migrations/0017: at least one minute each). */
export interface ExecutionRetention {
  completedMs: number;
  failedMs: number;
  cancelledMs: number;
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
      /**
       * The entry point's `reusePolicy` is `after-failure`: an identity that names a FAILED
       * execution (not superseded, nothing of its lineage live) is taken over like an expired one.
       */
      reuseAfterFailure?: boolean;
      /**
       * The hashes of the identity's business values (src/ingress/identity-values.ts), indexed for
       * the search by business id by `recordIdentityValues`; none or empty: no statement.
       */
      identityValues?: readonly string[];
    };

export type StartOutcome =
  | {
      created: true;
      executionId: string;
      status: ExecutionStatus;
      plan: StartPlan;
      /** The first step the batch claimed for the caller to run (`startExecution`'s `chain`), if any. */
      chained: ChainedClaim | null;
      /** With a chained claim: the workspace's sealed secrets the definition names (as `StepRun.sealedSecretsJson`). */
      sealedSecretsJson: string | null;
    }
  /**
   * A start over the gate refused (`startOverGate`), nothing written: the execution it would start
   * over is not finished (`fromStatus`, null when it is not in this workspace) or another
   * execution of its lineage is live (`liveExecutionId`).
   */
  | { created: false; refused: true; fromStatus: ExecutionStatus | null; liveExecutionId: string | null; supersededBy: string | null }
  | {
      created: false;
      executionId: string;
      status: ExecutionStatus;
      duplicateDeliveries: number;
      lastDuplicateAt: number;
    };

/** The only execution status a start can produce: RUNNING while a step is dispatched. */
function startStatus(plan: StartPlan): ExecutionStatus {
  return plan.steps.some((s) => s.state === "DISPATCHED") ? "RUNNING" : "COMPLETED";
}

/**
 * The live execution of an identity's trigger, if any: a RUNNING execution of the lineage of the
 * identity's first execution (whose id is the identity itself) or of the execution `named` (the
 * one the identity row names; NULL when there is no row). Every execution a trigger starts joins
 * its first execution's lineage (`insertExecution`), and so does every start over of any of them,
 * so this is "another execution of this trigger is live" — and at most one is, by the gates of the
 * start over (`startOverGate`), the operator retry (./operator.ts) and the claim itself. The
 * second lineage covers executions started before triggers joined lineages (migrations/0015).
 * Walks the `executions_live_by_lineage` index.
 */
function liveOfIdentity(identity: string, named: string): string {
  return `(SELECT l.id FROM executions l
     WHERE l.status = 'RUNNING'
       AND l.lineage_id IN ((SELECT x.lineage_id FROM executions x WHERE x.id = ${identity}),
                            (SELECT n.lineage_id FROM executions n WHERE n.id = ${named}))
     LIMIT 1)`;
}

/**
 * The claim. Its outcomes, in one statement, decided by SQLite under its write lock:
 * - no row: insert it; the execution id is the identity itself, unless an execution with that id
 *   already exists (an earlier window whose identity row was swept) or its tombstone does (it was
 *   removed by the history sweep: ./history.ts), then the takeover id;
 * - fresh row (`expires_at > now`): a duplicate; count it (counter + last time, same statement);
 * - expired row: take it over for a new window — new execution id, my token, new expiry,
 *   counter reset (the old execution keeps its own count);
 * - a fresh row of a FAILED execution, when the entry point reuses after failure (`reusable`):
 *   taken over the same way, and `previous_execution_id` keeps the failed execution's id so the
 *   start batch links the new one to it. Still one statement: of N concurrent such triggers,
 *   the first takes the row, the others find it naming a RUNNING execution and are duplicates.
 * - but never while an execution of the trigger is live (`liveOfIdentity`: the one the row names,
 *   still RUNNING after its window, or a start over or operator retry of an earlier one): the
 *   trigger is a duplicate of that live execution, and the row is pointed at it (its window left
 *   as it was, ended), so the duplicate is counted on it and the sender gets its id and status.
 *   With no row, the row inserted names the live execution, under a token no request holds and
 *   a window that ends 1 ms after it began. Once nothing is live, the next trigger takes it over.
 * RETURNING tells the caller whose token the row holds.
 */
function claimIdentity(
  db: D1Database,
  c: {
    identity: string;
    workspace: string;
    workflowId: string;
    takeoverExecutionId: string;
    claimToken: string;
    expiresAt: number;
    gateVersion: string | null;
    reuseAfterFailure: boolean;
  },
  now: number,
): D1PreparedStatement {
  // Reusable: the entry point allows it (?9), and the execution the identity names FAILED and was
  // not superseded (nothing of the trigger live either: `takeover`).
  const reusable = `(?9 = 1 AND EXISTS (SELECT 1 FROM executions x
       WHERE x.id = execution_identities.execution_id AND x.status = 'FAILED' AND x.superseded_by IS NULL))`;
  const expired = `(execution_identities.expires_at <= ?6)`;
  const live = liveOfIdentity("?1", "execution_identities.execution_id");
  const takeover = `((${expired} OR ${reusable}) AND ${live} IS NULL)`;
  // An expired row whose trigger is still live: it names the live execution from now on.
  const held = `(${expired} AND ${live} IS NOT NULL)`;
  const liveWithoutRow = liveOfIdentity("?1", "NULL");
  // INSERT … SELECT … WHERE (not VALUES) so the version gate can veto the whole claim.
  return db
    .prepare(
      `INSERT INTO execution_identities
         (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, duplicate_deliveries, last_duplicate_at)
       SELECT ?1, ?2, ?3,
              coalesce(${liveWithoutRow}, CASE WHEN EXISTS (SELECT 1 FROM executions WHERE id = ?1)
                                          OR EXISTS (SELECT 1 FROM execution_tombstones WHERE id = ?1) THEN ?4 ELSE ?1 END),
              CASE WHEN ${liveWithoutRow} IS NULL THEN ?5 ELSE 'held by a live execution ' || ?5 END,
              ?6, CASE WHEN ${liveWithoutRow} IS NULL THEN ?7 ELSE ?6 + 1 END, 0, NULL
       WHERE ${latestVersionGate("?2", "?3", "?8")}
       ON CONFLICT (identity) DO UPDATE SET
         execution_id         = CASE WHEN ${takeover} THEN excluded.execution_id WHEN ${held} THEN ${live}
                                     ELSE execution_identities.execution_id END,
         claim_token          = CASE WHEN ${takeover} THEN excluded.claim_token  ELSE execution_identities.claim_token END,
         window_start         = CASE WHEN ${takeover} THEN excluded.window_start ELSE execution_identities.window_start END,
         expires_at           = CASE WHEN ${takeover} THEN excluded.expires_at   ELSE execution_identities.expires_at END,
         duplicate_deliveries = CASE WHEN ${takeover} THEN 0    ELSE execution_identities.duplicate_deliveries + 1 END,
         last_duplicate_at    = CASE WHEN ${takeover} THEN NULL ELSE ?6 END,
         previous_execution_id = CASE WHEN ${takeover} AND ${reusable} THEN execution_identities.execution_id
                                      WHEN ${takeover} THEN NULL ELSE execution_identities.previous_execution_id END
       RETURNING execution_id, claim_token, duplicate_deliveries`,
    )
    .bind(
      c.identity,
      c.workspace,
      c.workflowId,
      c.takeoverExecutionId,
      c.claimToken,
      now,
      c.expiresAt,
      c.gateVersion,
      c.reuseAfterFailure ? 1 : 0,
    );
}

/**
 * A duplicate's visible side: the execution the identity names counts the delivery too (its count
 * outlives the identity row), and RETURNs its current status for the 200 answer. Matches zero
 * rows for the winner, whose token the identity row holds.
 */
function recordDuplicateDelivery(
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

/** How many duplicates of one execution are kept one by one (migrations/0013); the count goes on. */
export const MAX_DUPLICATE_TRIGGERS_KEPT = 100;

/**
 * `recordDuplicateTrigger`: right after `recordDuplicateDelivery` counted it, the duplicate as an
 * event of the execution it joined — its number, time, how it arrived and what made it the same
 * trigger — while the execution has kept fewer than MAX_DUPLICATE_TRIGGERS_KEPT. Zero rows for the
 * winner. Binds ?1 identity, ?2 claim token, ?3 now, ?4 trigger kind, ?5 the bound, ?6 identity kind (the
 * trigger's own: the execution it joined may be a start over, whose kind is `forced`).
 */
function recordDuplicateTrigger(
  db: D1Database,
  d: { identity: string; claimToken: string; triggerKind: string; identityKind: IdentityKind },
  now: number,
) {
  return db
    .prepare(
      `INSERT INTO duplicate_triggers (execution_id, seq, at, trigger_kind, identity_kind)
       SELECT e.id, e.duplicate_deliveries, ?3, ?4, ?6 FROM executions e
       WHERE e.id = (SELECT execution_id FROM execution_identities WHERE identity = ?1 AND claim_token <> ?2)
         AND e.duplicate_deliveries BETWEEN 1 AND ?5
       ON CONFLICT (execution_id, seq) DO NOTHING`,
    )
    .bind(d.identity, d.claimToken, now, d.triggerKind, MAX_DUPLICATE_TRIGGERS_KEPT, d.identityKind);
}

/**
 * Where the execution id of the start inserts comes from. For a claim: the identity row, only if
 * it holds my token (and, when the plans per candidate id differ, only if it names this
 * candidate). For a forced start: the given id, unconditionally (but for the version gate).
 *
 * A source's parameters are bound after the statement's own; `from(n)` numbers them from `?n`.
 */
interface Source {
  from: (n: number) => string;
  params: unknown[];
}

function claimSource(identity: string, claimToken: string, candidate: string | null): Source {
  return {
    from: (n) =>
      `FROM execution_identities src
       WHERE src.identity = ?${n} AND src.claim_token = ?${n + 1} AND (?${n + 2} IS NULL OR src.execution_id = ?${n + 2})`,
    params: [identity, claimToken, candidate],
  };
}

function forcedSource(executionId: string, record: NewExecution): Source {
  // The WHERE is required anyway: without one, SQLite would parse `ON CONFLICT` as a join clause.
  return {
    from: (n) =>
      `FROM (SELECT ?${n} AS execution_id) src
       WHERE ${latestVersionGate(`?${n + 1}`, `?${n + 2}`, `?${n + 3}`)} AND ${startOverGate(`?${n}`, `?${n + 1}`, `?${n + 4}`)}`,
    params: [executionId, record.workspace, record.workflowId, gateVersionOf(record), record.startedOverFrom ?? null],
  };
}

/**
 * The start-over gate: true unless this is a start over (`from` not NULL), else true only while
 * the execution it starts over is in this workspace, finished and not superseded (a newer
 * execution holds its identity: ./operator.ts), and no other execution of its
 * lineage (its chain of start overs) is RUNNING. Checked inside every insert of the start batch,
 * under SQLite's write lock, so of two concurrent start overs — or a start over racing an
 * operator retry (./operator.ts checks the same) — at most one leaves a live execution. Three
 * parameters: the new execution's id, the workspace, the id started over from.
 */
function startOverGate(id: string, ws: string, from: string): string {
  return `(${from} IS NULL OR (
      EXISTS (SELECT 1 FROM executions f WHERE f.id = ${from} AND f.workspace = ${ws} AND f.status <> 'RUNNING' AND f.superseded_by IS NULL)
      AND NOT EXISTS (SELECT 1 FROM executions l
                      WHERE l.status = 'RUNNING' AND l.id <> ${id}
                        AND l.lineage_id = (SELECT f.lineage_id FROM executions f WHERE f.id = ${from}))))`;
}

function gateVersionOf(record: NewExecution): string | null {
  return record.requireLatestVersion ? record.version : null;
}

/**
 * `insertExecution`: the execution row (the winner's only), RETURNING its id and status. A start
 * over joins the lineage of the execution it starts over, a reuse after failure that of the
 * execution it follows (`exprs.previous`), any other execution of a trigger that of the trigger's
 * first execution (the one whose id is the identity: a later window, or a trigger after a release,
 * is the same trigger again, and the one-live-execution gates look at the lineage). The first
 * execution of a trigger, and a test run, begins its own.
 * Binds ?1–?14 the row, then the source from ?15.
 */
function insertExecution(
  db: D1Database,
  source: Source,
  record: NewExecution,
  exprs: { identity: string; previous: string },
  status: ExecutionStatus,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO executions
         (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
          started_over_from, previous_execution_id, lineage_id, created_at, updated_at, finished_at,
          retain_completed_ms, retain_failed_ms, retain_cancelled_ms)
       SELECT src.execution_id, ?1, ?2, ?3, ?4, ?5, ?6, ${exprs.identity}, ?7, ?8, ?9, ${exprs.previous},
              coalesce((SELECT p.lineage_id FROM executions p WHERE p.id = coalesce(?9, ${exprs.previous})),
                       (SELECT x.lineage_id FROM executions x WHERE x.id = ${exprs.identity}), src.execution_id),
              ?10, ?10, ?11, ?12, ?13, ?14
       ${source.from(15)}
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
      status === "RUNNING" ? null : now,
      record.retention.completedMs,
      record.retention.failedMs,
      record.retention.cancelledMs,
      ...source.params,
    );
}

/**
 * `insertStartStep`: a step row decided at start — the entry (COMPLETED, its output the payload,
 * epoch 0 and attempt 0: it never ran on a worker, but the trace shows it), or a successor
 * (DISPATCHED available now, or SKIPPED finished now). Insert-if-absent on (execution_id,
 * vertex_id). Binds ?1–?7 the row, then the source from ?8.
 */
function insertStartStep(
  db: D1Database,
  source: Source,
  step: { vertexId: string; workspace: string; state: "COMPLETED" | "DISPATCHED" | "SKIPPED"; output: string | null; next: string | null },
  now: number,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, output, next_vertices,
                          created_at, updated_at, finished_at)
       SELECT src.execution_id, ?1, ?2, ?3, 0, 0, ?4, ?5, ?6, ?4, ?4, ?7
       ${source.from(8)}
       ON CONFLICT (execution_id, vertex_id) DO NOTHING`,
    )
    .bind(
      step.vertexId,
      step.workspace,
      step.state,
      now,
      step.output,
      step.next,
      step.state === "DISPATCHED" ? null : now,
      ...source.params,
    );
}

function samePlan(a: StartPlan, b: StartPlan): boolean {
  return JSON.stringify([a.steps, a.entryNext]) === JSON.stringify([b.steps, b.entryNext]);
}

/** One candidate execution of a start: where its id comes from, its plan, and the label of its row's insert. */
interface Variant {
  label: StartLabel;
  source: Source;
  plan: StartPlan;
}

type StartLabel =
  | "claim"
  | "duplicate"
  | "duplicateEvent"
  | "firstExecution"
  | "takeoverExecution"
  | "forcedExecution"
  | "steps"
  | "supersede"
  | "startOverFrom"
  | "chainClaim"
  | "chainFollow"
  | "chainKey"
  | "chainKeyFollow"
  | "chainKeySend"
  | "chainSecrets"
  | "identityValues";

/**
 * `supersede`: after a reuse, the FAILED execution the identity named points at the one that took
 * it (`superseded_by`), so it is no longer retried or started over. Zero rows unless this request
 * won a reuse. Binds ?1 identity, ?2 claim token, ?3 now.
 */
function supersede(db: D1Database, identity: string, claimToken: string, now: number): D1PreparedStatement {
  const mine = "FROM execution_identities WHERE identity = ?1 AND claim_token = ?2";
  return db
    .prepare(
      `UPDATE executions SET superseded_by = (SELECT execution_id ${mine}), updated_at = ?3
       WHERE id = (SELECT previous_execution_id ${mine}) AND status = 'FAILED' AND superseded_by IS NULL`,
    )
    .bind(identity, claimToken, now);
}

/**
 * `recordIdentityValues`: the identity's business values (their hashes) indexed under the execution
 * the claim created, for the search by business id (migrations/0021). ONE statement for every
 * value (`json_each`), written only for the request whose token the identity row holds — the winner,
 * whose execution the batch inserted (a claim with my token always inserts one, or the batch
 * fails); a duplicate's probe of the identity row finds another token and writes nothing, before
 * `json_each` is read. Binds ?1 workspace, ?2 the hashes (JSON array), ?3 identity, ?4 claim token.
 */
function recordIdentityValues(db: D1Database, workspace: string, hashes: readonly string[], identity: string, claimToken: string) {
  return db
    .prepare(
      `INSERT INTO identity_values (workspace, value_hash, execution_id)
       SELECT ?1, v.value, src.execution_id
       FROM execution_identities src CROSS JOIN json_each(?2) v
       WHERE src.identity = ?3 AND src.claim_token = ?4
       ON CONFLICT DO NOTHING`,
    )
    .bind(workspace, JSON.stringify(hashes), identity, claimToken);
}

/**
 * `copyIdentityValues`: a start over carries the trigger of the execution it starts over, so it is
 * found by the same business values: that execution's rows, copied under the new id — only if the
 * start over was inserted (its gate let it through). Binds ?1 the new id, ?2 workspace, ?3 the id started over from.
 */
function copyIdentityValues(db: D1Database, executionId: string, workspace: string, from: string) {
  return db
    .prepare(
      `INSERT INTO identity_values (workspace, value_hash, execution_id)
       SELECT v.workspace, v.value_hash, ?1 FROM identity_values v
       WHERE v.execution_id = ?3 AND v.workspace = ?2
         AND EXISTS (SELECT 1 FROM executions n WHERE n.id = ?1 AND n.started_over_from = ?3)
       ON CONFLICT DO NOTHING`,
    )
    .bind(executionId, workspace, from);
}

function variantsOf(record: NewExecution, start: StartMode): Variant[] {
  if (start.mode === "forced") return [{ label: "forcedExecution", source: forcedSource(start.executionId, record), plan: start.plan }];
  if (samePlan(start.plans.first, start.plans.takeover)) {
    return [{ label: "firstExecution", source: claimSource(start.identity, start.claimToken, null), plan: start.plans.first }];
  }
  return [
    { label: "firstExecution", source: claimSource(start.identity, start.claimToken, start.identity), plan: start.plans.first },
    {
      label: "takeoverExecution",
      source: claimSource(start.identity, start.claimToken, start.takeoverExecutionId),
      plan: start.plans.takeover,
    },
  ];
}

interface ExecutionIdRow {
  id: string;
  status: ExecutionStatus;
}
interface DuplicateRow extends ExecutionIdRow {
  duplicate_deliveries: number;
  last_duplicate_at: number;
}

/**
 * The chained claim of the start batch (./chain-claim.ts), after the step inserts: per candidate
 * execution id, guarded by the identity claim (or, forced, by the execution created now), with the
 * key persist of the first step's first attempt when its key was computed for that execution id;
 * and the sealed secrets the first step's run needs (the claim batch's `readStepRun` reads the same).
 */
function addStartChain(
  batch: LabelledBatch<StartLabel>,
  db: D1Database,
  record: NewExecution,
  start: StartMode,
  offer: ChainOffer,
  now: number,
  firstKey: FirstStepKey | null,
) {
  const targets: Array<{ executionId: string; guard: ChainGuard }> =
    start.mode === "forced"
      ? [{ executionId: start.executionId, guard: createdNowGuard }]
      : [...new Set([start.identity, start.takeoverExecutionId])].map((executionId) => ({
          executionId,
          guard: identityGuard(start.identity, start.claimToken),
        }));
  for (const { executionId, guard } of targets) {
    const chained = chainedClaimStatements(db, executionId, offer, now, guard, { countAttempt: true });
    batch.add("chainClaim", chained.claim);
    for (const statement of chained.follow) batch.add("chainFollow", statement);
    if (firstKey?.executionId === executionId) {
      const persist = chainedKeyStatements(db, firstKey, now, guard);
      batch.add("chainKey", persist.key);
      for (const statement of persist.follow) batch.add("chainKeyFollow", statement);
      batch.add("chainKeySend", persist.send);
    }
  }
  batch.add(
    "chainSecrets",
    db
      .prepare(
        `SELECT ${sealedSecretsColumn("?1", "v.definition")} AS sealed
         FROM workflow_versions v WHERE v.workspace = ?1 AND v.workflow_id = ?2 AND v.version = ?3`,
      )
      .bind(record.workspace, record.workflowId, record.version),
  );
}

/**
 * Start an execution: ONE batch, one round trip, one transaction — and say what happened:
 * created (this request won) or a duplicate. With `chain`, the batch also claims one of the
 * first steps for the caller to run at once (its result's `chained`); with `firstKey` too, it
 * persists that step's destination key with the claim (the claimed step's `idempotencyKey`).
 *
 * claim mode: the identity claim, the duplicate's count, then per candidate plan: the execution
 * row, the entry step, the successor steps. The duplicate statement and the winner's inserts are
 * mutually exclusive by the token, so exactly one side writes.
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
  if (start.mode === "claim") {
    const { workspace, workflowId } = record;
    batch
      .add(
        "claim",
        claimIdentity(
          db,
          {
            identity: start.identity,
            workspace,
            workflowId,
            takeoverExecutionId: start.takeoverExecutionId,
            claimToken: start.claimToken,
            expiresAt: start.expiresAt,
            gateVersion,
            reuseAfterFailure: start.reuseAfterFailure === true,
          },
          now,
        ),
      )
      .add(
        "duplicate",
        recordDuplicateDelivery(db, { identity: start.identity, claimToken: start.claimToken, workspace, workflowId, gateVersion }, now),
      )
      .add(
        "duplicateEvent",
        recordDuplicateTrigger(
          db,
          { identity: start.identity, claimToken: start.claimToken, triggerKind: record.triggerKind, identityKind: record.identityKind },
          now,
        ),
      );
  }
  const variants = variantsOf(record, start);
  const exprs =
    start.mode === "forced" ? { identity: "NULL", previous: "NULL" } : { identity: "src.identity", previous: "src.previous_execution_id" };
  for (const { label, source, plan } of variants) {
    batch.add(label, insertExecution(db, source, record, exprs, startStatus(plan), now));
    const entry = {
      vertexId: record.entryVertexId,
      state: "COMPLETED" as const,
      output: record.payloadJson,
      next: JSON.stringify(plan.entryNext),
    };
    batch.add("steps", insertStartStep(db, source, { ...entry, workspace: record.workspace }, now));
    for (const step of plan.steps) {
      batch.add(
        "steps",
        insertStartStep(
          db,
          source,
          { vertexId: step.vertexId, workspace: record.workspace, state: step.state, output: null, next: null },
          now,
        ),
      );
    }
  }
  if (start.mode === "claim" && start.reuseAfterFailure) batch.add("supersede", supersede(db, start.identity, start.claimToken, now));
  if (start.mode === "claim" && start.identityValues && start.identityValues.length > 0) {
    batch.add("identityValues", recordIdentityValues(db, record.workspace, start.identityValues, start.identity, start.claimToken));
  }
  if (start.mode === "forced" && record.startedOverFrom) {
    batch.add("identityValues", copyIdentityValues(db, start.executionId, record.workspace, record.startedOverFrom));
  }
  if (start.mode === "forced" && record.startedOverFrom) {
    // After the inserts: names the live execution of the lineage (ours, if the start went through).
    batch.add(
      "startOverFrom",
      db
        .prepare(
          `SELECT f.status AS fromStatus, f.superseded_by AS supersededBy,
                  (SELECT l.id FROM executions l WHERE l.lineage_id = f.lineage_id AND l.status = 'RUNNING' LIMIT 1) AS liveExecutionId
           FROM executions f WHERE f.id = ?1 AND f.workspace = ?2`,
        )
        .bind(record.startedOverFrom, record.workspace),
    );
  }
  if (chain && chain.candidates.length > 0) addStartChain(batch, db, record, start, chain, now, firstKey);
  const results = await batch.run();

  // A claim always RETURNs its row (inserted, counted or taken over) unless the version gate vetoed it.
  if (start.mode === "claim" && results.first("claim") === null) {
    throw new WorkflowVersionChanged(record.workspace, record.workflowId, record.version);
  }
  for (const { label, plan } of variants) {
    const inserted = results.first<ExecutionIdRow>(label);
    if (inserted) {
      const chained = withPersistedKey(results.first<ChainedClaim>("chainClaim"), results);
      const sealedSecretsJson = chained ? (results.first<{ sealed: string | null }>("chainSecrets")?.sealed ?? null) : null;
      return { created: true, executionId: inserted.id, status: inserted.status, plan, chained, sealedSecretsJson };
    }
  }
  const duplicate = start.mode === "claim" ? results.first<DuplicateRow>("duplicate") : null;
  if (duplicate) {
    return {
      created: false,
      executionId: duplicate.id,
      status: duplicate.status,
      duplicateDeliveries: duplicate.duplicate_deliveries,
      lastDuplicateAt: duplicate.last_duplicate_at,
    };
  }
  if (start.mode === "claim") {
    // The identity names an execution that was erased on request inside its window (./history.ts):
    // still a duplicate — the trigger must not run the erased work again — answered from its
    // tombstone. Rare, so read after the batch rather than in every start.
    const claim = results.first<{ execution_id: string; claim_token: string; duplicate_deliveries: number }>("claim");
    if (claim && claim.claim_token !== start.claimToken) {
      const removed = await db
        .prepare(`SELECT status FROM execution_tombstones WHERE id = ?1 AND workspace = ?2`)
        .bind(claim.execution_id, record.workspace)
        .first<{ status: ExecutionStatus }>();
      if (removed) {
        return {
          created: false,
          executionId: claim.execution_id,
          status: removed.status,
          duplicateDeliveries: claim.duplicate_deliveries,
          lastDuplicateAt: now,
        };
      }
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

/** The chained claim with the key the batch persisted for it (and the key's first send), if it did. */
function withPersistedKey(chained: ChainedClaim | null, results: BatchResults<StartLabel>): ChainedClaim | null {
  const persisted = results.first<{ vertexId: string; idempotencyKey: string }>("chainKey");
  const send = results.first<{ destination: string; firstSentAt: number; countedFrom: number }>("chainKeySend");
  if (!chained || !persisted || !send || persisted.vertexId !== chained.vertexId) return chained;
  const keySendsJson = JSON.stringify({ [send.destination]: [send.firstSentAt, send.countedFrom] });
  return { ...chained, idempotencyKey: persisted.idempotencyKey, keySendsJson };
}

/** Expired identities, oldest first. An expired row is also taken over by a claim; either is fine. */
const EXPIRED_IDENTITIES: SweepSpec = { table: "execution_identities", where: "expires_at <= ?1", orderBy: "expires_at" };

/** One bounded batch of the identity sweep. */
function sweepExpiredIdentitiesOnce(db: D1Database, now: number, limit: number): Promise<number> {
  return runBoundedDelete(db, EXPIRED_IDENTITIES, [now], limit);
}

/** The identity sweep: bounded batches until drained or `maxBatches` ran (the next cron tick continues). */
export function sweepExpiredIdentities(db: D1Database, now: number, opts = { batchSize: 500, maxBatches: 40 }): Promise<SweepReport> {
  return sweepInBatches((limit) => sweepExpiredIdentitiesOnce(db, now, limit), opts);
}
