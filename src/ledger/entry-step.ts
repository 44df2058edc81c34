/**
 * The entry step without a row (migrations/0045, docs/ledger.md "Rows written per execution"): an
 * execution started since then has no `steps` row for its entry; its execution row is that step —
 * COMPLETED when the execution was created, epoch 0 and attempt 0 (it never ran on a worker), its
 * output the payload, the successors its edges took in `executions.entry_next`. An execution started
 * before keeps its entry row and has `entry_next` NULL, so every reader takes one or the other.
 *
 * The readers that show or count every step read `stepsWithEntry` (a step's columns, the entry's
 * synthesised from its execution); the fan-in decision reads `entry_next` itself (./step-settle.ts).
 * Nothing writes the entry after the start: it is final, and the payload is the execution's.
 */

/** The step columns `stepsWithEntry` yields, in order. */
const COLUMNS = [
  "execution_id",
  "workspace",
  "vertex_id",
  "state",
  "epoch",
  "attempt",
  "available_at",
  "lease_until",
  "parked_until",
  "permit_wait",
  "idempotency_key",
  "request",
  "output",
  "next_vertices",
  "error",
  "created_at",
  "created_seq",
  "updated_at",
  "finished_at",
  "resends",
  "next_resend_at",
  "att_seq",
] as const;

/** The entry step's value of each column, from the execution row aliased `x`. It sorts first among the steps created with it. */
const ENTRY: Record<(typeof COLUMNS)[number], string> = {
  execution_id: "x.id",
  workspace: "x.workspace",
  vertex_id: "x.entry_vertex_id",
  state: "'COMPLETED'",
  epoch: "0",
  attempt: "0",
  available_at: "x.created_at",
  lease_until: "NULL",
  parked_until: "NULL",
  permit_wait: "NULL",
  idempotency_key: "NULL",
  request: "NULL",
  output: "x.payload",
  next_vertices: "x.entry_next",
  error: "NULL",
  created_at: "x.created_at",
  created_seq: "-1",
  updated_at: "x.created_at",
  finished_at: "x.created_at",
  resends: "0",
  next_resend_at: "NULL",
  att_seq: "NULL",
};

/**
 * Every step of the executions `executions` names (a SQL expression a column can be tested `IN`:
 * a parenthesised list or subquery), the entry of each one started since migrations/0045 among
 * them: a derived table with the columns above, for `FROM ${stepsWithEntry(…)} AS <alias>`. Each arm
 * reads by its own primary key (the steps' execution prefix, the execution's id).
 */
export function stepsWithEntry(executions: string): string {
  return `(SELECT ${COLUMNS.join(", ")} FROM steps WHERE execution_id IN ${executions}
     UNION ALL
     SELECT ${COLUMNS.map((c) => `${ENTRY[c]} AS ${c}`).join(", ")}
     FROM executions x WHERE x.id IN ${executions} AND x.entry_next IS NOT NULL)`;
}

/**
 * The fan-in decision's view of the entry, when it is among `predecessors` (a JSON array parameter)
 * and has no row: `count` is 1 when it counts as a settled predecessor, `takes` when its edge to
 * `vertex` was taken. Binds nothing of its own: `execution`, `predecessors` and `vertex` are
 * parameters of the caller's statement.
 */
export function entryAsPredecessor(execution: string, predecessors: string, vertex: string): { count: string; takes: string } {
  const entry = `FROM executions x WHERE x.id = ${execution} AND x.entry_next IS NOT NULL
                   AND x.entry_vertex_id IN (SELECT value FROM json_each(${predecessors}))`;
  return {
    count: `(SELECT count(*) ${entry})`,
    takes: `EXISTS (SELECT 1 FROM json_each((SELECT x.entry_next ${entry})) j WHERE j.value = ${vertex})`,
  };
}
