/**
 * Where the execution id of the start's inserts comes from (`Source`: the identity row a claim
 * left, or a forced start's given id) and the gates every insert of the start batch checks: the
 * version gate (the definition taken from a cache is still the latest) and the start-over gate
 * (one live execution per lineage).
 */
import { LIVE_STATUSES_SQL, type NewExecution } from "./execution-types";

/**
 * The version gate: true when not asked for (`?v` NULL), else true only while `?v` is the latest.
 * Three parameters: workspace, workflow id, version-or-NULL.
 */
export function latestVersionGate(ws: string, wf: string, v: string): string {
  return `(${v} IS NULL OR EXISTS (SELECT 1 FROM workflows WHERE workspace = ${ws} AND workflow_id = ${wf} AND latest_version = ${v}))`;
}

/**
 * Where the execution id of the start's two inserts comes from: a table expression named `src`
 * with an `execution_id` column, and the condition under which a row of it starts an execution.
 * For a claim: the identity row, only if it holds my token. For a forced start: the given id,
 * unconditionally but for the version gate and the start-over gate.
 *
 * A source's parameters are bound after the statement's own; `at(n)` numbers them from `?n`.
 */
export interface Source {
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

export function claimSource(identity: string, claimToken: string): Source {
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

export function forcedSource(executionId: string, record: NewExecution): Source {
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
      EXISTS (SELECT 1 FROM executions f WHERE f.id = ${from} AND f.workspace = ${ws}
                AND f.status NOT IN ${LIVE_STATUSES_SQL} AND f.superseded_by IS NULL)
      AND NOT EXISTS (SELECT 1 FROM executions l
                      WHERE l.status IN ${LIVE_STATUSES_SQL} AND l.id <> ${id}
                        AND l.lineage_id = (SELECT f.lineage_id FROM executions f WHERE f.id = ${from}))))`;
}

export function gateVersionOf(record: NewExecution): string | null {
  return record.requireLatestVersion ? record.version : null;
}
