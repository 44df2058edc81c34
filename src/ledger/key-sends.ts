/**
 * The destination keys' first sends (migrations/0008): per workspace, key and destination (the
 * URL's origin), when the key was first sent and where the destination's retention counts from.
 * The retention guard (src/steps/gateway/retention.ts) reads them; three places write them:
 * - the first attempt's key persist (./step-key.ts `persistIdempotencyKey`), in the same batch;
 * - `recordKeySend`, for a key persisted before this table existed or sent to a new destination;
 * - an operator retry that acknowledges the destination may have forgotten the key
 *   (./operator.ts): `counted_from` moves to the retry, `first_sent_at` stays.
 */
import { fenceParams, type Fence } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";

/** When a key was first sent to one destination, and where its retention counts from. */
export interface KeySend {
  firstSentAt: number;
  countedFrom: number;
}

/**
 * The start of the error of a step the retention guard refused to send. The gateway writes it
 * (src/steps/gateway/retention.ts) and `retryFailedStep` finds it, to ask for the operator's
 * acknowledgement before a retry: the ledger owns both sides of this text.
 */
export const KEY_MAY_BE_FORGOTTEN_MARK = "not sent: the destination may have forgotten this key";

/**
 * Whether a key's send is guarded, and for how long its destination remembers it: `false` — no
 * retention declared (the row is `unguarded`: kept, but not aged while its execution lives —
 * migrations/0043); a number — the declared retention in ms
 * (guarded: the retention guard reads the row, it outlives its execution — migrations/0017 — and
 * stays hot in D1 for that retention plus `KEY_MEMORY_HOT` — migrations/0036); `true` — guarded,
 * retention not known (hot for `KEY_MEMORY_HOT`).
 */
export type KeyGuard = boolean | number;

/** `guardOf`: the guard of a key whose rule declares `retentionMs` (null: none). */
export function guardOf(retentionMs: number | null | undefined): KeyGuard {
  return retentionMs ?? false;
}

/** The declared retention of `guard`, in ms, or null (none or not known). */
export function guardRetentionMs(guard: KeyGuard): number | null {
  return typeof guard === "number" && guard > 0 ? guard : null;
}

/** `steps.key_guarded` for a chained first step (migrations/0036): 0, 1 (retention not known), or the retention in ms. */
export function keyGuardedColumn(guard: KeyGuard): number {
  return guard === false ? 0 : (guardRetentionMs(guard) ?? 1);
}

/**
 * The shortest retention of execution `id` (an SQL expression): what a send born unguarded records
 * as its `retention_ms` (migrations/0043), so it is not due to move cold, nor to be forgotten by
 * HISTORY_KEY_SENDS, before its execution may be gone.
 */
const SHORTEST_RETENTION = (id: string) =>
  `(SELECT min(x.retain_completed_ms, x.retain_failed_ms, x.retain_cancelled_ms) FROM executions x WHERE x.id = ${id})`;

/**
 * `unguarded` of a send recorded again (ON CONFLICT, migrations/0043): a guarded record makes it
 * guarded (NULL), an unguarded one leaves it — and marks a send born unguarded before 0043
 * (`guarded = 0`), now kept from here on, as one.
 */
const UNGUARDED_ON_CONFLICT = "unguarded = CASE WHEN excluded.unguarded IS NULL THEN NULL WHEN guarded = 0 THEN 1 ELSE unguarded END";

/**
 * `upsertKeySend`: the first send of the step's key to `destination`, unless one is on record —
 * then the row is left as it is (the update exists to RETURN it), but for the retention, of which
 * the longest is kept, and `unguarded`, which a guarded record clears. Fenced: a stale worker
 * records nothing. Every send is born kept (`guarded = 1`, migrations/0043: it outlives its
 * execution, aged by HISTORY_KEY_SENDS and moved cold after its hot period); one whose key declares
 * no retention is marked `unguarded` — it stays with its execution while that lives, and records
 * its execution's shortest retention as its hot period. Binds the step fence ?1–?3, ?4 the time to
 * record, ?5 the destination, ?6 guarded (1: the key declares a retention, so the retention guard
 * reads this row — migrations/0017; 0: not), ?7 the declared retention in ms (null: none known;
 * migrations/0036 — how long the row stays hot).
 */
export function upsertKeySend(
  db: D1Database,
  fence: Fence,
  at: number,
  destination: string,
  guarded: KeyGuard,
  rows: RowSource = STEP_ROWS,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO destination_key_sends
         (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded, retention_ms, unguarded)
       SELECT workspace, idempotency_key, ?5, ?4, ?4, execution_id, ${rows.key}, 1,
              coalesce(?7, CASE WHEN ?6 = 0 THEN ${SHORTEST_RETENTION(`${rows.table}.execution_id`)} END), iif(?6 = 0, 1, NULL)
       FROM ${rows.table} WHERE ${fenceOn(rows)} AND idempotency_key IS NOT NULL
       ON CONFLICT (workspace, idempotency_key, destination) DO UPDATE SET guarded = 1,
         retention_ms = CASE WHEN excluded.retention_ms > coalesce(retention_ms, 0) THEN excluded.retention_ms ELSE retention_ms END,
         ${UNGUARDED_ON_CONFLICT}
       RETURNING first_sent_at AS firstSentAt, counted_from AS countedFrom`,
    )
    .bind(...fenceParams(fence), at, destination, guarded === false ? 0 : 1, guardRetentionMs(guarded));
}

/**
 * `recordKeySend`: the first send of a key already persisted (a step from before the table, or
 * whose destination changed), dated `at` (the step's creation: no later than the real first
 * send). Returns what is on record, or null when fenced out.
 */
export async function recordKeySend(
  db: D1Database,
  fence: Fence,
  at: number,
  destination: string,
  guarded: KeyGuard,
  rows: RowSource = STEP_ROWS,
): Promise<KeySend | null> {
  return upsertKeySend(db, fence, at, destination, guarded, rows).first<KeySend>();
}

/**
 * The key sends of the step's persisted key in its workspace, as a JSON object destination →
 * [firstSentAt, countedFrom]; '{}' when the step has no key or it was never sent. For a select over
 * `steps` aliased `alias`.
 */
export function keySendsColumn(alias: string): string {
  return `(SELECT coalesce(json_group_object(ks.destination, json_array(ks.first_sent_at, ks.counted_from)), '{}')
    FROM destination_key_sends ks WHERE ks.workspace = ${alias}.workspace AND ks.idempotency_key = ${alias}.idempotency_key)`;
}

/** The JSON of `keySendsColumn`, parsed; a missing or malformed column reads as no sends. */
export function parseKeySends(json: string | null): Record<string, KeySend> {
  const sends: Record<string, KeySend> = {};
  if (json === null) return sends;
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return sends;
  }
  if (typeof parsed !== "object" || parsed === null) return sends;
  for (const [destination, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (Array.isArray(value) && typeof value[0] === "number" && typeof value[1] === "number") {
      sends[destination] = { firstSentAt: value[0], countedFrom: value[1] };
    }
  }
  return sends;
}
