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
import { LabelledBatch } from "./batch";
import { CHAINED_CLAIM_COLUMNS, type ChainedClaim, type ChainOffer, type FirstStepKey } from "./chain-claim";
import { sealedSecretsColumn } from "../secrets/store";
import { runBoundedDelete, sweepInBatches, type SweepReport, type SweepSpec } from "./sweep";

/** `build()`, called once: the start batch's SQL texts are constants, built on first use (not on every trigger). */
function once<T>(build: () => T): () => T {
  let value: { v: T } | null = null;
  return () => (value ??= { v: build() }).v;
}

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
       * The new window's execution id (src/ingress/identity.ts `windowExecutionId`: the identity
       * and the window's start, `now`). No run's id is the bare identity: an id is never given twice.
       */
      executionId: string;
      /**
       * The id used instead when an execution row or a tombstone already holds `executionId` (a
       * clock that stepped back): derived from the identity, `now` and the claim token.
       */
      alternateExecutionId: string;
      expiresAt: number;
      /** Plans for each candidate id (edges may read `execution.id`, so they can differ). */
      plans: { first: StartPlan; alternate: StartPlan };
      /**
       * The entry point's `reusePolicy` is `after-failure`: an identity that names a FAILED
       * execution (not superseded, nothing of its lineage live) is taken over like an expired one.
       */
      reuseAfterFailure?: boolean;
      /**
       * The hashes of the identity's business values (src/ingress/identity-values.ts), indexed for
       * the search by business id (carried by the claim, written by the execution insert's trigger: migrations/0024).
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
 * The live execution of an identity's trigger, if any: a RUNNING execution of the lineage named
 * by the identity itself — a value, so the gate never passes through a row that the history sweep
 * or an erasure may have removed (issue 41, finding 2) — or of the execution `named` (the one the
 * identity row names; NULL when there is no row). Every execution a trigger starts has the
 * identity as its `lineage_id` (`startExecutionRow`), and so does every start over of any of them,
 * so this is "another execution of this trigger is live" — and at most one is, by the gates of the
 * start over (`startOverGate`), the operator retry (./operator.ts) and the claim itself. The
 * second lineage is defence in depth for a row older than migrations/0026, which moved every
 * trigger's executions into the identity's lineage. Walks the `executions_live_by_lineage` index.
 */
function liveOfIdentity(identity: string, named: string): string {
  return `(SELECT l.id FROM executions l
     WHERE l.status = 'RUNNING'
       AND l.lineage_id IN (${identity}, (SELECT n.lineage_id FROM executions n WHERE n.id = ${named}))
     LIMIT 1)`;
}

/** The claim's SQL text (the same for every claim: built once per isolate; exported for the query-plan tests). */
export const CLAIM_SQL = once(claimSql);

function claimSql(): string {
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
  // The window's id, unless a row or a tombstone holds it (a clock that stepped back): the alternate.
  const windowId = `CASE WHEN EXISTS (SELECT 1 FROM executions WHERE id = ?4)
                           OR EXISTS (SELECT 1 FROM execution_tombstones WHERE id = ?4) THEN ?11 ELSE ?4 END`;
  // INSERT … SELECT … WHERE (not VALUES) so the version gate can veto the whole claim.
  return `INSERT INTO execution_identities
         (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, value_hashes)
       SELECT ?1, ?2, ?3,
              coalesce(${liveWithoutRow}, ${windowId}),
              CASE WHEN ${liveWithoutRow} IS NULL THEN ?5 ELSE 'held by a live execution ' || ?5 END,
              ?6, CASE WHEN ${liveWithoutRow} IS NULL THEN ?7 ELSE ?6 + 1 END, ?10
       WHERE ${latestVersionGate("?2", "?3", "?8")}
       ON CONFLICT (identity) DO UPDATE SET
         execution_id         = CASE WHEN ${takeover} THEN excluded.execution_id ELSE ${live} END,
         claim_token          = CASE WHEN ${takeover} THEN excluded.claim_token  ELSE execution_identities.claim_token END,
         window_start         = CASE WHEN ${takeover} THEN excluded.window_start ELSE execution_identities.window_start END,
         expires_at           = CASE WHEN ${takeover} THEN excluded.expires_at   ELSE execution_identities.expires_at END,
         value_hashes         = CASE WHEN ${takeover} THEN excluded.value_hashes ELSE execution_identities.value_hashes END,
         previous_execution_id = CASE WHEN ${takeover} AND ${reusable} THEN execution_identities.execution_id
                                      WHEN ${takeover} THEN NULL ELSE execution_identities.previous_execution_id END
       WHERE ${takeover} OR ${held}
       RETURNING execution_id, claim_token`;
}

/**
 * The claim. Its outcomes, in one statement, decided by SQLite under its write lock:
 * - no row: insert it; the execution id is the window's (`windowExecutionId`: the identity and
 *   `now`), never the bare identity, so an id is never given twice — unless an execution or a
 *   tombstone already holds it (only a clock that stepped back can do that), then the alternate id;
 * - fresh row (`expires_at > now`): a duplicate. The claim writes NOTHING (its `DO UPDATE` is
 *   guarded out): the duplicate is counted on the execution the row names, by the execution
 *   statement of the same batch (`startExecutionRow`), so it costs one row, not two;
 * - expired row: take it over for a new window — new execution id (as above), my token, new expiry;
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
 * The row also carries the identity's business values (`value_hashes`), which the execution's
 * insert indexes for the search (migrations/0024, trigger `executions_identity_values`).
 * RETURNING tells the caller whose token the row holds — when it wrote one.
 */
function claimIdentity(
  db: D1Database,
  c: {
    identity: string;
    workspace: string;
    workflowId: string;
    executionId: string;
    alternateExecutionId: string;
    claimToken: string;
    expiresAt: number;
    gateVersion: string | null;
    reuseAfterFailure: boolean;
    valueHashes: string | null;
  },
  now: number,
): D1PreparedStatement {
  return db
    .prepare(CLAIM_SQL())
    .bind(
      c.identity,
      c.workspace,
      c.workflowId,
      c.executionId,
      c.claimToken,
      now,
      c.expiresAt,
      c.gateVersion,
      c.reuseAfterFailure ? 1 : 0,
      c.valueHashes,
      c.alternateExecutionId,
    );
}

/** How many duplicates of one execution are kept one by one (its `duplicate_log`, migrations/0024); the count goes on. */
export const MAX_DUPLICATE_TRIGGERS_KEPT = 100;

/**
 * Where the execution id of the start's two inserts comes from: a table expression named `src`
 * with an `execution_id` column, and the condition under which a row of it starts an execution.
 * For a claim: the identity row, only if it holds my token. For a forced start: the given id,
 * unconditionally but for the version gate and the start-over gate.
 *
 * A source's parameters are bound after the statement's own; `at(n)` numbers them from `?n`.
 */
interface Source {
  /** A claim's source (the identity row), or a forced start's (the given id): the SQL differs only by that. */
  claim: boolean;
  at: (n: number) => {
    table: string;
    /** This request's execution: my claim, or the forced start's gates. */
    mine: string;
    /** My claim, or another request's that names an existing execution (the duplicate's count). */
    mineOrNamed: string;
    /** In a `DO UPDATE`: the identity row holds another request's token. */
    another: string;
  };
  params: unknown[];
}

function claimSource(identity: string, claimToken: string): Source {
  return {
    claim: true,
    at: (n) => ({
      table: "execution_identities src",
      mine: `src.identity = ?${n} AND src.claim_token = ?${n + 1}`,
      mineOrNamed: `src.identity = ?${n}
        AND (src.claim_token = ?${n + 1} OR EXISTS (SELECT 1 FROM executions x WHERE x.id = src.execution_id))`,
      another: `(SELECT g.claim_token FROM execution_identities g WHERE g.identity = ?${n}) IS NOT ?${n + 1}`,
    }),
    params: [identity, claimToken],
  };
}

function forcedSource(executionId: string, record: NewExecution): Source {
  return {
    claim: false,
    at: (n) => {
      const gates = `${latestVersionGate(`?${n + 1}`, `?${n + 2}`, `?${n + 3}`)} AND ${startOverGate(`?${n}`, `?${n + 1}`, `?${n + 4}`)}`;
      return { table: `(SELECT ?${n} AS execution_id) src`, mine: gates, mineOrNamed: gates, another: "0" };
    },
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

/** What the execution row of a start differs in between its candidate ids (`Variant`). */
interface VariantFacts {
  /** The candidate id the first facts are for; null: one set of facts whatever the id. */
  first: string | null;
  status: [ExecutionStatus, ExecutionStatus];
  /** 1 when the start claims a first step for that candidate (the chained claim counts its attempt). */
  maxAttempt: [number, number];
}

/** The execution row's SQL text, per kind of source (built once each). */
const EXECUTION_ROW_SQL = new Map<boolean, string>();

function executionRowSql(source: Source): string {
  const { claim } = source;
  const cached = EXECUTION_ROW_SQL.get(claim);
  if (cached !== undefined) return cached;
  const identity = claim ? "src.identity" : "NULL";
  const previous = claim ? "src.previous_execution_id" : "NULL";
  const { table, mine, mineOrNamed, another } = source.at(20);
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
          retain_completed_ms, retain_failed_ms, retain_cancelled_ms, max_attempt)
       SELECT src.execution_id, ?1, ?2, ?3, ?4, ?5, ?6, ${identity}, ${pick("?15", "?16")}, ?7, ?8, ${previous},
              coalesce((SELECT p.lineage_id FROM executions p WHERE p.id = coalesce(?8, ${previous})), ${identity}, src.execution_id),
              ?9, ?9, CASE WHEN ${pick("?15", "?16")} = 'RUNNING' THEN NULL ELSE ?9 END, ?10, ?11, ?12, ${pick("?17", "?18")}
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
function startExecutionRow(
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
      ...source.params,
    );
}

/**
 * One start step as `insertStartSteps` reads it from its JSON parameter: the candidate execution id
 * it belongs to (`x`, null: any), the vertex, its state, the entry's `next_vertices` (`n`), and for
 * a step claimed at its insert (`c` = 1, state EXECUTING) the destination key computed for it
 * (`k`, for execution id `kx`), where the key goes (`d`) and whether it declares a retention (`g`).
 */
interface StartStepRow {
  x: string | null;
  v: string;
  s: "COMPLETED" | "DISPATCHED" | "SKIPPED" | "EXECUTING";
  c: 0 | 1;
  n?: string;
  k?: string;
  kx?: string;
  d?: string;
  g?: 0 | 1;
}

/** The start steps' SQL text, per kind of source (built once each). */
const START_STEPS_SQL = new Map<boolean, string>();

function startStepsSql(source: Source): string {
  const cached = START_STEPS_SQL.get(source.claim);
  if (cached !== undefined) return cached;
  const { table, mine } = source.at(6);
  const keyed = (field: string) => `CASE WHEN j.value ->> 'kx' = src.execution_id THEN j.value ->> '${field}' END`;
  const prior = (column: string) =>
    `(SELECT ks.${column} FROM destination_key_sends ks
       WHERE ks.workspace = steps.workspace AND ks.idempotency_key = steps.idempotency_key AND ks.destination = steps.key_destination)`;
  const sql = `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, idempotency_key,
                          key_destination, key_guarded, output, next_vertices, created_at, updated_at, finished_at)
       SELECT src.execution_id, j.value ->> 'v', ?1, j.value ->> 's', j.value ->> 'c', j.value ->> 'c', ?2,
              CASE WHEN j.value ->> 'c' = 1 THEN ?2 + ?3 END, ${keyed("k")}, ${keyed("d")}, ${keyed("g")},
              CASE WHEN j.value ->> 'v' = ?4 THEN (SELECT e.payload FROM executions e WHERE e.id = src.execution_id) END,
              j.value ->> 'n', ?2, ?2, CASE WHEN j.value ->> 's' IN ('COMPLETED', 'SKIPPED') THEN ?2 END
       FROM ${table} CROSS JOIN json_each(?5) j
       WHERE ${mine} AND (j.value ->> 'x' IS NULL OR j.value ->> 'x' = src.execution_id)
       ON CONFLICT (execution_id, vertex_id) DO NOTHING
       RETURNING ${CHAINED_CLAIM_COLUMNS}, state, key_destination AS keyDestination,
                 ${prior("first_sent_at")} AS priorFirstSentAt, ${prior("counted_from")} AS priorCountedFrom`;
  START_STEPS_SQL.set(source.claim, sql);
  return sql;
}

/**
 * `insertStartSteps`: every step decided at start, in ONE statement — the entry (COMPLETED, its
 * output the payload, read back from the execution row so the payload is bound once; epoch 0 and
 * attempt 0: it never ran on a worker, but the trace shows it), each successor (DISPATCHED available
 * now, or SKIPPED finished now), and with chaining the first step the caller runs at once, inserted
 * claimed: EXECUTING under epoch 1 and attempt 1 with its lease — the same row a claim would leave,
 * with no claim to run. Its attempt's row and its key's first send are written by the triggers of
 * migrations/0024 (`steps_claimed_at_insert`, `steps_key_sent_at_insert`). Only for the source's
 * own execution (my claim, or the forced start's gates): a duplicate's copy inserts nothing.
 * RETURNING the rows inserted, each with the key's earlier first send to that destination, if any
 * (RETURNING sees the database before the row's triggers ran: the send the trigger keeps).
 * Binds ?1 workspace, ?2 now, ?3 lease ms, ?4 entry vertex, ?5 the rows, the source from ?6.
 */
function insertStartSteps(
  db: D1Database,
  source: Source,
  workspace: string,
  entryVertexId: string,
  rows: StartStepRow[],
  leaseMs: number,
  now: number,
): D1PreparedStatement {
  return db.prepare(startStepsSql(source)).bind(workspace, now, leaseMs, entryVertexId, JSON.stringify(rows), ...source.params);
}

interface StartStepReturned extends Omit<ChainedClaim, "keySendsJson"> {
  state: string;
  keyDestination: string | null;
  priorFirstSentAt: number | null;
  priorCountedFrom: number | null;
}

function samePlan(a: StartPlan, b: StartPlan): boolean {
  return JSON.stringify([a.steps, a.entryNext]) === JSON.stringify([b.steps, b.entryNext]);
}

/** One candidate execution of a start: its id (null: whichever the claim gives), its plan. */
interface Variant {
  executionId: string | null;
  plan: StartPlan;
}

type StartLabel = "claim" | "execution" | "steps" | "startOverFrom" | "identityValues";

/**
 * `copyIdentityValues`: a start over carries the trigger of the execution it starts over, so it is
 * found by the same business values: that execution's rows, copied under the new id — only if the
 * start over was inserted (its gate let it through), dated with its creation (migrations/0027). Binds ?1 the new id,
 * ?2 workspace, ?3 the id started over from.
 */
function copyIdentityValues(db: D1Database, executionId: string, workspace: string, from: string) {
  return db
    .prepare(
      `INSERT INTO identity_values (workspace, value_hash, created_at, execution_id)
       SELECT v.workspace, v.value_hash, n.created_at, ?1 FROM executions n CROSS JOIN identity_values v
       WHERE n.id = ?1 AND n.started_over_from = ?3 AND v.execution_id = ?3 AND v.workspace = ?2
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

/** The first step of `plan` the chain may claim: the first candidate, in the offer's order, the plan dispatches. */
function chainedVertexOf(plan: StartPlan, offer: ChainOffer | null): string | null {
  if (!offer) return null;
  const dispatched = new Set(plan.steps.filter((s) => s.state === "DISPATCHED").map((s) => s.vertexId));
  return offer.candidates.find((id) => dispatched.has(id)) ?? null;
}

/** The start steps of every variant, as `insertStartSteps` reads them. */
function startStepRows(record: NewExecution, variants: Variant[], offer: ChainOffer | null, firstKey: FirstStepKey | null): StartStepRow[] {
  const rows: StartStepRow[] = [];
  const tagged = variants.length > 1;
  for (const { executionId, plan } of variants) {
    const x = tagged ? executionId : null;
    rows.push({ x, v: record.entryVertexId, s: "COMPLETED", c: 0, n: JSON.stringify(plan.entryNext) });
    const chained = chainedVertexOf(plan, offer);
    for (const step of plan.steps) {
      if (step.vertexId !== chained) {
        rows.push({ x, v: step.vertexId, s: step.state, c: 0 });
        continue;
      }
      const row: StartStepRow = { x, v: step.vertexId, s: "EXECUTING", c: 1 };
      // The key computed for one candidate id only: on another id, the step persists its key when it runs.
      if (firstKey && firstKey.vertexId === step.vertexId && (executionId === null || executionId === firstKey.executionId)) {
        Object.assign(row, { k: firstKey.key, kx: firstKey.executionId, d: firstKey.destination, g: firstKey.guarded ? 1 : 0 });
      }
      rows.push(row);
    }
  }
  return rows;
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
  };
  batch.add("execution", startExecutionRow(db, source, record, facts, offer !== null, now));
  batch.add(
    "steps",
    insertStartSteps(
      db,
      source,
      record.workspace,
      record.entryVertexId,
      startStepRows(record, variants, offer, firstKey),
      offer?.leaseMs ?? 0,
      now,
    ),
  );
  if (start.mode === "forced" && record.startedOverFrom) {
    batch.add("identityValues", copyIdentityValues(db, start.executionId, record.workspace, record.startedOverFrom));
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

/** The step the start inserted claimed, with its key's first send when the batch recorded one. */
function chainedOf(rows: StartStepReturned[], now: number): ChainedClaim | null {
  const row = rows.find((r) => r.state === "EXECUTING");
  if (!row) return null;
  const { state: _state, keyDestination, priorFirstSentAt, priorCountedFrom, ...claim } = row;
  if (keyDestination === null || claim.idempotencyKey === null) return claim;
  // The send the trigger kept: an earlier one to the same destination, else this one (now).
  return { ...claim, keySendsJson: JSON.stringify({ [keyDestination]: [priorFirstSentAt ?? now, priorCountedFrom ?? now] }) };
}

/** Expired identities, oldest first. An expired row is also taken over by a claim; either is fine. */
const EXPIRED_IDENTITIES: SweepSpec = {
  table: "execution_identities",
  key: "identity",
  where: "expires_at <= ?1",
  orderBy: "expires_at",
};

/** One bounded batch of the identity sweep. */
function sweepExpiredIdentitiesOnce(db: D1Database, now: number, limit: number): Promise<number> {
  return runBoundedDelete(db, EXPIRED_IDENTITIES, [now], limit);
}

/** The identity sweep: bounded batches until drained or `maxBatches` ran (the next cron tick continues). */
export function sweepExpiredIdentities(db: D1Database, now: number, opts = { batchSize: 500, maxBatches: 40 }): Promise<SweepReport> {
  return sweepInBatches((limit) => sweepExpiredIdentitiesOnce(db, now, limit), opts);
}
