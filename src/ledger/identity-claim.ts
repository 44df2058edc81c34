/**
 * The trigger-identity claim: the first statement of a claim-mode start batch (./executions.ts).
 *
 * The dedupe guarantee lives here: ONE `INSERT … ON CONFLICT (identity) DO UPDATE` against the
 * primary key of `execution_identities`. Whatever the interleaving of N identical requests,
 * SQLite applies their claims one after another, and exactly one of them finds the row absent (or
 * expired) and leaves its own `claim_token` in it; every other one only increments the duplicate
 * counter (./start-execution-row.ts).
 */
import { latestVersionGate } from "./start-source";
import { LIVE_STATUSES_SQL } from "./execution-types";

/** `build()`, called once: the start batch's SQL texts are constants, built on first use (not on every trigger). */
function once<T>(build: () => T): () => T {
  let value: { v: T } | null = null;
  return () => (value ??= { v: build() }).v;
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
     WHERE l.status IN ${LIVE_STATUSES_SQL}
       AND l.lineage_id IN (${identity}, (SELECT n.lineage_id FROM executions n WHERE n.id = ${named}))
     LIMIT 1)`;
}

/** The claim's SQL text (the same for every claim: built once per isolate; exported for the query-plan tests). */
export const CLAIM_SQL = once(claimSql);

function claimSql(): string {
  // Reusable: the entry point allows it (?9), and the execution the identity names FAILED and was
  // not superseded (nothing of the trigger live either: `take`).
  const reusable = `(?9 = 1 AND EXISTS (SELECT 1 FROM executions x
       WHERE x.id = execution_identities.execution_id AND x.status = 'FAILED' AND x.superseded_by IS NULL))`;
  const expired = `(execution_identities.expires_at <= ?6)`;
  const live = liveOfIdentity("?1", "execution_identities.execution_id");
  // The window's id, unless a row or a tombstone holds it (a clock that stepped back): the alternate.
  const windowId = `CASE WHEN EXISTS (SELECT 1 FROM executions WHERE id = ?4)
                           OR EXISTS (SELECT 1 FROM execution_tombstones WHERE id = ?4) THEN ?11 ELSE ?4 END`;
  // Each subquery is written once and its value named (`f.live`; `t.take`, `t.live`, `t.reuse`):
  // SQLite compiles this statement on every trigger, a duplicate's too, and every copy of a
  // subquery is compiled (and may be run) again. INSERT … SELECT … WHERE (not VALUES) so the
  // version gate can veto the whole claim. The update's row value is evaluated on the row as it
  // was, like per-column assignments. Its WHERE is "take over (expired or reusable, nothing
  // live) or held (expired, something live)", which reduces to: expired, or reusable and nothing live.
  return `INSERT INTO execution_identities
         (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, value_hashes)
       SELECT ?1, ?2, ?3, coalesce(f.live, ${windowId}),
              CASE WHEN f.live IS NULL THEN ?5 ELSE 'held by a live execution ' || ?5 END,
              ?6, CASE WHEN f.live IS NULL THEN ?7 ELSE ?6 + 1 END, ?10
       FROM (SELECT ${liveOfIdentity("?1", "NULL")} AS live) f
       WHERE ${latestVersionGate("?2", "?3", "?8")}
       ON CONFLICT (identity) DO UPDATE SET
         (execution_id, claim_token, window_start, expires_at, value_hashes, previous_execution_id) = (
           SELECT CASE WHEN t.take THEN excluded.execution_id ELSE t.live END,
                  CASE WHEN t.take THEN excluded.claim_token  ELSE execution_identities.claim_token END,
                  CASE WHEN t.take THEN excluded.window_start ELSE execution_identities.window_start END,
                  CASE WHEN t.take THEN excluded.expires_at   ELSE execution_identities.expires_at END,
                  CASE WHEN t.take THEN excluded.value_hashes ELSE execution_identities.value_hashes END,
                  CASE WHEN t.take AND t.reuse THEN execution_identities.execution_id
                       WHEN t.take THEN NULL ELSE execution_identities.previous_execution_id END
           FROM (SELECT (${expired} OR e.reuse) AND e.live IS NULL AS take, e.live, e.reuse
                 FROM (SELECT ${reusable} AS reuse, ${live} AS live) e) t)
       WHERE ${expired} OR (${reusable} AND ${live} IS NULL)
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
export function claimIdentity(
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
