/**
 * The model learns notifications (docs/notifications.md): every workspace of a run wants
 * `execution.failed`, signed with its own secret, delivered to the world's destination (which
 * answers 404: deliveries retry, never blocking anything).
 *
 * The invariant: **each FAILED execution has exactly one `execution.failed` outbox row, and no
 * other execution has one** — whichever settle failed it, however often an operator retry failed
 * it again, and rows of erased executions gone with them. No operations of its own: the other
 * operations fail executions (three 500s, refused keys, cancels of waits…) and erase them.
 */
import { Violation, type World } from "./world";

const SECRET = `whsec_${btoa("model-notifications-signing-key!")}`;

export async function setupNotify(world: World, ws: number, dest: string): Promise<void> {
  const secret = await world.call(ws, "PUT", "/v1/secrets/MODEL_NOTIFY", { value: SECRET });
  if (secret.status >= 300) throw new Error(`storing the notification secret: ${secret.status} ${await secret.text()}`);
  const setting = await world.call(ws, "PUT", "/v1/notifications", {
    url: `${dest}/notifications`,
    secret: "MODEL_NOTIFY",
    events: ["execution.failed"],
  });
  if (setting.status >= 300) throw new Error(`setting notifications: ${setting.status} ${await setting.text()}`);
}

export async function checkNotify(world: World, shard: number): Promise<void> {
  const names = world.names.filter((_, ws) => world.shardOf(ws) === shard);
  if (names.length === 0) return;
  const inRun = `(${names.map((n) => `'${n}'`).join(", ")})`;
  const { results } = await world
    .shardEnv(shard)
    .DB.prepare(
      `SELECT e.id, e.status,
              (SELECT count(*) FROM notification_outbox o WHERE o.execution_id = e.id AND o.event = 'execution.failed') AS rows
       FROM executions e WHERE e.workspace IN ${inRun}`,
    )
    .all<{ id: string; status: string; rows: number }>();
  // FAILED: exactly one row. An execution an operator retried is RUNNING again and keeps its row (never a second).
  const wrong = results.filter((r) => (r.status === "FAILED" ? r.rows !== 1 : r.rows > 1));
  if (wrong.length > 0) throw new Violation("each FAILED execution has exactly one execution.failed outbox row", JSON.stringify(wrong));
  const { results: orphans } = await world
    .shardEnv(shard)
    .DB.prepare(
      `SELECT o.execution_id FROM notification_outbox o WHERE o.workspace IN ${inRun}
         AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = o.execution_id)`,
    )
    .all();
  if (orphans.length > 0)
    throw new Violation("an outbox row names an execution that exists (erased ones leave none)", JSON.stringify(orphans));
}
