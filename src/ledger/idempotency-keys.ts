/**
 * The Idempotency-Key ledger table (migrations/0001_idempotency_keys.sql): its named transitions.
 *
 * Each transition is ONE SQL statement whose WHERE clause states its precondition and which
 * RETURNs what the caller needs; zero rows means "not yours". `now` is a parameter of every
 * statement, so tests backdate rows by moving the clock instead of sleeping.
 *
 *   claimOrLoad   absent → pending (generation 1)          \
 *                 pending, lease expired, same fingerprint  → pending, generation + 1 (takeover)
 *                 any row past retention                   /  (re-claimed as a new request)
 *                 otherwise → the row, unchanged (replay / mismatch / in-progress)
 *   complete      pending → completed      fenced on (generation, claim token, status)
 *   release       pending → (deleted)      fenced on (generation, claim token, status)
 *   sweep         dead rows → (deleted)    bounded; never a pending row whose lease is live
 */
import { runBoundedDelete, type SweepSpec } from "./sweep";

export type IdempotencyStatus = "pending" | "completed";

export interface StoredResponse {
  status: number;
  /** Allowlisted response headers, lower-cased names. */
  headers: Record<string, string>;
  /** Raw body bytes; null for bodiless statuses (204, 205, 304) and empty bodies. */
  body: Uint8Array | null;
}

export interface IdempotencyRow {
  status: IdempotencyStatus;
  fingerprint: string;
  generation: number;
  leaseUntil: number | null;
  expiresAt: number;
  /** Present exactly when `status` is `completed`. */
  response: StoredResponse | null;
}

export interface ClaimInput {
  principal: string;
  key: string;
  fingerprint: string;
  /** Random per request: identifies this caller's claim in the RETURNING row. */
  claimToken: string;
  now: number;
  /** After this instant a retry with the same fingerprint may take the reservation over. */
  leaseUntil: number;
  /** Retention of the row if this request claims it (replaced at completion). */
  expiresAt: number;
}

export type ClaimOutcome =
  /** This caller owns the reservation and must run the handler, then complete or release. */
  | { kind: "claimed"; generation: number; takeover: boolean }
  /** Another request owns (or completed) the key; the row tells the caller what to answer. */
  | { kind: "existing"; row: IdempotencyRow }
  /** The statement touched no row. Cannot happen with the upsert below unless the row vanished
   *  under it; the caller answers 409 "retry". */
  | { kind: "vanished" };

export interface FenceInput {
  principal: string;
  key: string;
  generation: number;
  claimToken: string;
}

const TABLE = "idempotency_keys";

/**
 * A row this request may claim, evaluated against the row as it was before the statement:
 * a dead row (past retention and not held by a live lease), or a pending reservation whose
 * lease expired with the SAME fingerprint (a retry of the same request takes over; a
 * different request is a mismatch, never a takeover). ?3 = fingerprint, ?5 = now.
 */
const RECLAIMABLE = `(
  (${TABLE}.expires_at <= ?5 AND (${TABLE}.status = 'completed' OR ${TABLE}.lease_until <= ?5))
  OR (${TABLE}.status = 'pending' AND ${TABLE}.lease_until <= ?5 AND ${TABLE}.fingerprint = ?3)
)`;

const when = (value: string, otherwise: string) => `CASE WHEN ${RECLAIMABLE} THEN ${value} ELSE ${otherwise} END`;

/**
 * Claim-or-load in one statement. An upsert whose DO UPDATE always writes (a no-op for rows it
 * may not claim) so that RETURNING yields the row in every case: a new claim, a takeover, or
 * the existing row. SQLite evaluates every SET expression against the old row, so RECLAIMABLE
 * means the same thing in each CASE. The cost of this choice: a replay is a (no-op) write, not
 * a read; the gain: replay, mismatch and in-progress answer in one round trip, and the
 * "claim missed, then the row was swept before the lookup" race cannot occur.
 */
const CLAIM_OR_LOAD_SQL = `
INSERT INTO ${TABLE} (principal, idem_key, fingerprint, status, generation, claim_token,
                      created_at, claimed_at, lease_until, expires_at)
VALUES (?1, ?2, ?3, 'pending', 1, ?4, ?5, ?5, ?6, ?7)
ON CONFLICT (principal, idem_key) DO UPDATE SET
  fingerprint      = ${when("?3", `${TABLE}.fingerprint`)},
  status           = ${when("'pending'", `${TABLE}.status`)},
  generation       = ${when(`${TABLE}.generation + 1`, `${TABLE}.generation`)},
  claim_token      = ${when("?4", `${TABLE}.claim_token`)},
  claimed_at       = ${when("?5", `${TABLE}.claimed_at`)},
  lease_until      = ${when("?6", `${TABLE}.lease_until`)},
  expires_at       = ${when("?7", `${TABLE}.expires_at`)},
  completed_at     = ${when("NULL", `${TABLE}.completed_at`)},
  response_status  = ${when("NULL", `${TABLE}.response_status`)},
  response_headers = ${when("NULL", `${TABLE}.response_headers`)},
  response_body    = ${when("NULL", `${TABLE}.response_body`)}
RETURNING status, fingerprint, generation, claim_token, lease_until, expires_at,
          response_status, response_headers, response_body`;

interface ClaimRowSql {
  status: IdempotencyStatus;
  fingerprint: string;
  generation: number;
  claim_token: string;
  lease_until: number | null;
  expires_at: number;
  response_status: number | null;
  response_headers: string | null;
  response_body: ArrayBuffer | number[] | Uint8Array | null;
}

export async function claimOrLoad(db: D1Database, input: ClaimInput): Promise<ClaimOutcome> {
  const row = await db
    .prepare(CLAIM_OR_LOAD_SQL)
    .bind(input.principal, input.key, input.fingerprint, input.claimToken, input.now, input.leaseUntil, input.expiresAt)
    .first<ClaimRowSql>();
  if (!row) return { kind: "vanished" };
  if (row.claim_token === input.claimToken) {
    return { kind: "claimed", generation: row.generation, takeover: row.generation > 1 };
  }
  return {
    kind: "existing",
    row: {
      status: row.status,
      fingerprint: row.fingerprint,
      generation: row.generation,
      leaseUntil: row.lease_until,
      expiresAt: row.expires_at,
      response:
        row.status === "completed" && row.response_status !== null
          ? {
              status: row.response_status,
              headers: row.response_headers ? (JSON.parse(row.response_headers) as Record<string, string>) : {},
              body: toBytes(row.response_body),
            }
          : null,
    },
  };
}

/** The fence every write by a claim holder carries: its generation, its token, still pending. */
const OWNED_PENDING_WHERE = `principal = ?1 AND idem_key = ?2 AND generation = ?3 AND claim_token = ?4 AND status = 'pending'`;

const COMPLETE_SQL = `
UPDATE ${TABLE}
   SET status = 'completed', lease_until = NULL, completed_at = ?5, expires_at = ?6,
       response_status = ?7, response_headers = ?8, response_body = ?9
 WHERE ${OWNED_PENDING_WHERE}
RETURNING generation`;

/**
 * pending → completed, if this caller still owns the reservation. Returns false when fenced
 * out (taken over, released or swept meanwhile): the stored row is left untouched.
 */
export async function completeIfOwned(
  db: D1Database,
  fence: FenceInput,
  { now, expiresAt, response }: { now: number; expiresAt: number; response: StoredResponse },
): Promise<boolean> {
  const row = await db
    .prepare(COMPLETE_SQL)
    .bind(
      fence.principal,
      fence.key,
      fence.generation,
      fence.claimToken,
      now,
      expiresAt,
      response.status,
      JSON.stringify(response.headers),
      response.body && response.body.byteLength > 0 ? response.body : null,
    )
    .first<{ generation: number }>();
  return row !== null;
}

const RELEASE_SQL = `DELETE FROM ${TABLE} WHERE ${OWNED_PENDING_WHERE} RETURNING generation`;

/** pending → deleted, if this caller still owns it (a throwing handler; a declined response). */
export async function releaseIfOwned(db: D1Database, fence: FenceInput): Promise<boolean> {
  const row = await db.prepare(RELEASE_SQL).bind(fence.principal, fence.key, fence.generation, fence.claimToken).first();
  return row !== null;
}

/**
 * Dead rows: past retention, and not a pending reservation whose lease is still live (a
 * handler may still be running under it). ?1 = now.
 */
const IDEMPOTENCY_SWEEP: SweepSpec = {
  table: TABLE,
  where: `expires_at <= ?1 AND (status = 'completed' OR lease_until <= ?1)`,
  orderBy: "expires_at",
};

/** Deletes at most `limit` dead rows, oldest expiry first. Returns how many went. */
export function sweepIdempotencyKeys(db: D1Database, now: number, limit: number): Promise<number> {
  return runBoundedDelete(db, IDEMPOTENCY_SWEEP, [now], limit);
}

function toBytes(value: ClaimRowSql["response_body"]): Uint8Array | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return Uint8Array.from(value);
}
