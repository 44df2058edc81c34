/**
 * The model's invariants of the entry step (migrations/0045, src/ledger/entry-step.ts: an
 * execution started since then has no `steps` row for its entry; its execution row is that step,
 * with the successors its edges took in `executions.entry_next`):
 * - **the entry once**: every execution has its entry exactly once — its row (started before 0045:
 *   `entry_next` NULL) or `entry_next`, never both, never neither.
 * - **the entry's edges decide its successors**: a step whose only predecessor is the entry was
 *   SKIPPED exactly when the entry's edge to it was not taken.
 * No operation of its own: every start exercises them.
 */
import { Violation, type World } from "./world";

export async function checkEntry(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  const once = await db
    .prepare(
      `SELECT x.id, x.entry_next IS NOT NULL AS next,
              EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = x.id AND s.vertex_id = x.entry_vertex_id) AS row
       FROM executions x
       WHERE (x.entry_next IS NOT NULL) = EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = x.id AND s.vertex_id = x.entry_vertex_id)
       LIMIT 1`,
    )
    .first<{ id: string; next: number; row: number }>();
  if (once) {
    throw new Violation(
      "the entry once",
      `execution ${once.id}: ${once.row ? "an entry row and entry_next both" : "neither an entry row nor entry_next"}`,
    );
  }
  const edges = `json_each(v.definition, '$.edges')`;
  const decided = await db
    .prepare(
      `SELECT x.id, s.vertex_id, s.state, x.entry_next FROM executions x
       JOIN workflow_versions v ON v.workspace = x.workspace AND v.workflow_id = x.workflow_id AND v.version = x.version
       JOIN steps s ON s.execution_id = x.id
       WHERE x.entry_next IS NOT NULL
         AND s.vertex_id IN (SELECT e.value ->> '$.to' FROM ${edges} e WHERE e.value ->> '$.from' = x.entry_vertex_id)
         AND NOT EXISTS (SELECT 1 FROM ${edges} o WHERE o.value ->> '$.to' = s.vertex_id AND o.value ->> '$.from' <> x.entry_vertex_id)
         AND (s.state = 'SKIPPED') = EXISTS (SELECT 1 FROM json_each(x.entry_next) n WHERE n.value = s.vertex_id)
       LIMIT 1`,
    )
    .first<{ id: string; vertex_id: string; state: string; entry_next: string }>();
  if (decided) {
    throw new Violation(
      "the entry's edges decide its successors",
      `execution ${decided.id}: ${decided.vertex_id} is ${decided.state} but the entry's taken edges are ${decided.entry_next}`,
    );
  }
}
