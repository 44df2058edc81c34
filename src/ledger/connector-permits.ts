/**
 * Permits of a limited connector (SPEC section 17, docs/connectors.md "Limits", migration 0029):
 * the scope's row (`connector_limits`: limits, token bucket, shared pause) and one row per step — or
 * MAP item, under its row key (`rowOf`) — that holds or waits for a permit (`connector_permits`).
 * Every operation is one batch (one round trip, one transaction).
 *
 * A held permit counts only while its step is EXECUTING under the epoch that took it, unparked, with
 * a live lease (`LIVE`): the permit's lease IS the step's lease — the heartbeat keeps both, a dead
 * worker's returns when its step's lease expires, a takeover (a new epoch) never inherits it.
 *
 * Parameters: ?1 workspace, ?2 connector, ?3 execution id, ?4 vertex id, ?5 epoch, ?6 now, then the rest.
 */
import { LabelledBatch } from "./batch";
import { fenceParams, UNPARK_NOW, type Fence, type StepRef } from "./step-sql";
import { itemKeyFence, type ItemFence, type ItemRef } from "./map-items";
import { fenceOn, ITEM_ROWS, STEP_ROWS, type RowSource } from "./work-rows";

/** The scope's limits as its row keeps them (src/flow/limits.ts `ScopeLimits`). */
export interface ScopeLimitsRow {
  concurrency: number | null;
  rate: { count: number; periodMs: number; burst: number } | null;
}

/** How far ahead a waiter's wake-up may be and still hold newer askers back (a queue delay is whole seconds). */
export const WAITER_HORIZON_MS = 2000;

/** The most waiters counted ahead of an asker: past it, the asker waits anyway. */
const MAX_AHEAD_COUNTED = 1000;

/**
 * The permit row `p`'s own row `s` meets `cond`: a step (`steps`, by vertex id), or — a row key, with
 * a `#` no vertex id has — a MAP's item (`work_items`, by row key: src/ledger/work-rows.ts). Both
 * have the same state, epoch, lease and park columns, so every condition below holds for either;
 * one scope's line mixes steps and items.
 */
const rowOf = (cond: string) => `(CASE WHEN instr(p.vertex_id, '#') > 0
    THEN EXISTS (SELECT 1 FROM work_items s WHERE s.execution_id = p.execution_id AND s.row_key = p.vertex_id AND ${cond})
    ELSE EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = p.execution_id AND s.vertex_id = p.vertex_id AND ${cond}) END)`;

/** The lease end of the permit row `p`'s own row when its permit is held and live (binds ?6 now), else NULL. */
const LIVE_LEASE = (() => {
  const live = "s.epoch = p.epoch AND s.state = 'EXECUTING' AND s.parked_until IS NULL AND s.lease_until > ?6";
  return `(CASE WHEN instr(p.vertex_id, '#') > 0
    THEN (SELECT s.lease_until FROM work_items s WHERE s.execution_id = p.execution_id AND s.row_key = p.vertex_id AND ${live})
    ELSE (SELECT s.lease_until FROM steps s WHERE s.execution_id = p.execution_id AND s.vertex_id = p.vertex_id AND ${live}) END)`;
})();

/** A permit row `p` that is held and live (binds ?6 now). */
const LIVE = `p.held = 1 AND ${rowOf("s.epoch = p.epoch AND s.state = 'EXECUTING' AND s.parked_until IS NULL AND s.lease_until > ?6")}`;

/** How long past its wake time a parked waiter still counts: later, its wake-up was lost (a release revives it). */
export const WAITER_OVERDUE_MS = 3000;

/**
 * A permit row `p` that waits and still counts (binds ?6 now): its step EXECUTING and asking now (unparked,
 * leased), or parked and due within the horizon — not overdue by more than `WAITER_OVERDUE_MS`.
 */
const STILL_WAITING = `p.held = 0 AND ${rowOf(`s.state = 'EXECUTING'
    AND ((s.parked_until IS NULL AND s.lease_until > ?6)
         OR s.parked_until BETWEEN ?6 - ${WAITER_OVERDUE_MS} AND ?6 + ${WAITER_HORIZON_MS})`)}`;

const SCOPE = "p.workspace = ?1 AND p.connector = ?2";
const MINE = "p.execution_id = ?3 AND p.vertex_id = ?4";

/** The bucket of the scope's row `l`, refilled to ?6 (NULL without a rate). */
const BUCKET = (l: string) =>
  `CASE WHEN ${l}.rate_count IS NULL THEN NULL
        ELSE min(${l}.burst, ${l}.tokens + max(0, ?6 - ${l}.tokens_at) * 1.0 * ${l}.rate_count / ${l}.rate_period_ms) END`;

// ---------------------------------------------------------------------------------------------
// The scope's limits: written by the connector's save (src/connectors/store.ts, same batch)

/** Upsert the scope's limits (a new bucket starts full; an edit keeps the tokens, within the new burst). */
export function writeScopeLimits(db: D1Database, workspace: string, connector: string, limits: ScopeLimitsRow, now: number) {
  return db
    .prepare(
      `INSERT INTO connector_limits (workspace, connector, concurrency, rate_count, rate_period_ms, burst, tokens, tokens_at, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, coalesce(?6, 0), ?7, ?7)
       ON CONFLICT (workspace, connector) DO UPDATE SET
         concurrency = excluded.concurrency, rate_count = excluded.rate_count, rate_period_ms = excluded.rate_period_ms,
         burst = excluded.burst, updated_at = excluded.updated_at,
         tokens = CASE WHEN connector_limits.rate_count IS NULL THEN excluded.tokens ELSE min(tokens, coalesce(excluded.burst, 0)) END,
         tokens_at = CASE WHEN connector_limits.rate_count IS NULL THEN excluded.tokens_at ELSE tokens_at END`,
    )
    .bind(
      workspace,
      connector,
      limits.concurrency,
      limits.rate?.count ?? null,
      limits.rate?.periodMs ?? null,
      limits.rate?.burst ?? null,
      now,
    );
}

/** Remove the scope's limits (a connector saved without them, or deleted): its sends are unlimited. */
export function deleteScopeLimits(db: D1Database, workspace: string, connector: string) {
  return db.prepare("DELETE FROM connector_limits WHERE workspace = ?1 AND connector = ?2").bind(workspace, connector);
}

// ---------------------------------------------------------------------------------------------
// The grant

export type RefusalReason = "paused" | "rate" | "concurrency" | "fairness";

export type Grant =
  /** The connector has no limits: send. */
  | { kind: "unlimited" }
  | { kind: "granted"; waitedSince: number | null }
  | {
      kind: "refused";
      reason: RefusalReason;
      /** Older waiters counted ahead of this step (those due within the horizon: the grant's count). */
      ahead: number;
      /** Every older waiter still waiting, due soon or not: the line before this step (its wait's estimate). */
      queued: number;
      concurrency: number | null;
      since: number;
      /** The bucket after this ask (null without a rate). */
      tokens: number | null;
      rate: { count: number; periodMs: number } | null;
      pausedUntil: number | null;
      pauseReason: string | null;
      /** The earliest lease end of a live permit (null when none is held). */
      nextFree: number | null;
      /** Live permits held by others when this step asked. */
      inFlight: number;
    };

interface AskRow {
  held: number;
  since: number;
  reason: RefusalReason | null;
  ahead: number;
}

interface ScopeRow {
  tokens: number;
  concurrency: number | null;
  queued: number;
  paused_until: number | null;
  pause_reason: string | null;
  rate_count: number | null;
  rate_period_ms: number | null;
  next_free: number | null;
  in_flight: number;
}

/**
 * `askPermit`: ONE batch — (1) the step's row upserted with the decision made in its own
 * `INSERT … SELECT`: granted when the scope is not paused, the refilled bucket holds a token for it
 * and for every older waiter still counted ahead of it, and the live permits plus those waiters
 * leave a slot under `concurrency`; a waiter keeps its `since`. (2) The scope's bucket refilled and
 * debited if (1) granted; a refusal counted in `held_back`. (3) A grant that ends a wait recorded on
 * the step (or the MAP's item: `work_items.permit_wait`, migration 0035) for the trace
 * (`permit_wait.grantedAt`, fenced). No scope row: nothing matches — unlimited.
 */
export async function askPermit(db: D1Database, workspace: string, connector: string, fence: Fence, now: number): Promise<Grant> {
  const params = [workspace, connector, ...fenceParams(fence), now] as const;
  // A MAP's item asks under its row key (a `#` no vertex id has): its wait is recorded on its own row.
  const item = fence.vertexId.includes("#");
  const grantedNow = `EXISTS (SELECT 1 FROM connector_permits p WHERE ${SCOPE} AND ${MINE} AND p.epoch = ?5 AND p.granted_at = ?6)`;
  const results = await new LabelledBatch<"ask" | "scope" | "trace">(db)
    .add(
      "ask",
      db
        .prepare(
          `WITH l AS (
             SELECT concurrency, paused_until, ${BUCKET("connector_limits")} AS bucket
             FROM connector_limits WHERE workspace = ?1 AND connector = ?2
           ),
           me AS (
             SELECT coalesce((SELECT p.since FROM connector_permits p WHERE ${SCOPE} AND ${MINE} AND p.held = 0), ?6) AS since
           ),
           c AS (
             SELECT (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND NOT (${MINE}) AND ${LIVE}) AS held,
                    (SELECT count(*) FROM (
                       SELECT 1 FROM connector_permits p, me
                       WHERE ${SCOPE} AND p.held = 0 AND NOT (${MINE})
                         AND (p.since < me.since
                              OR (p.since = me.since AND (p.execution_id < ?3 OR (p.execution_id = ?3 AND p.vertex_id < ?4))))
                         AND ${STILL_WAITING}
                       LIMIT ${MAX_AHEAD_COUNTED})) AS ahead
           ),
           d AS (
             SELECT CASE
                      WHEN coalesce(l.paused_until, 0) > ?6 THEN 'paused'
                      WHEN l.bucket IS NOT NULL AND l.bucket < 1 THEN 'rate'
                      WHEN l.concurrency IS NOT NULL AND c.held >= l.concurrency THEN 'concurrency'
                      WHEN (l.bucket IS NOT NULL AND l.bucket < c.ahead + 1)
                        OR (l.concurrency IS NOT NULL AND c.held + c.ahead >= l.concurrency) THEN 'fairness'
                    END AS reason,
                    c.ahead
             FROM l, c
           )
           INSERT INTO connector_permits (workspace, connector, execution_id, vertex_id, epoch, held, since, granted_at, reason, ahead)
           SELECT ?1, ?2, ?3, ?4, ?5, d.reason IS NULL, me.since, CASE WHEN d.reason IS NULL THEN ?6 END, d.reason, d.ahead
           FROM d, me WHERE true
           ON CONFLICT (workspace, connector, execution_id, vertex_id) DO UPDATE SET
             epoch = excluded.epoch, held = excluded.held, since = excluded.since, granted_at = excluded.granted_at,
             reason = excluded.reason, ahead = excluded.ahead
           RETURNING held, since, reason, ahead`,
        )
        .bind(...params),
    )
    .add(
      "scope",
      db
        .prepare(
          `UPDATE connector_limits
             SET tokens = CASE WHEN rate_count IS NULL THEN tokens ELSE ${BUCKET("connector_limits")} - ${grantedNow} END,
                 tokens_at = max(tokens_at, ?6),
                 held_back = held_back + NOT ${grantedNow},
                 updated_at = ?6
           WHERE workspace = ?1 AND connector = ?2
           RETURNING tokens, paused_until, pause_reason, rate_count, rate_period_ms, concurrency,
             (SELECT count(*) FROM (
                SELECT 1 FROM connector_permits p, connector_permits m
                WHERE ${SCOPE} AND m.workspace = ?1 AND m.connector = ?2 AND m.execution_id = ?3 AND m.vertex_id = ?4
                  AND p.held = 0 AND p.since < m.since
                  AND ${rowOf("s.state = 'EXECUTING'")}
                LIMIT ${MAX_AHEAD_COUNTED})) AS queued,
             (SELECT min(${LIVE_LEASE}) FROM connector_permits p WHERE ${SCOPE} AND p.held = 1) AS next_free,
             (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND NOT (${MINE}) AND ${LIVE}) AS in_flight`,
        )
        .bind(...params),
    )
    .add(
      "trace",
      db
        .prepare(
          `UPDATE ${item ? "work_items" : "steps"} SET permit_wait = json_set(permit_wait, '$.grantedAt', ?6)
           WHERE execution_id = ?3 AND ${item ? "row_key" : "vertex_id"} = ?4 AND epoch = ?5 AND state = 'EXECUTING'
             AND permit_wait IS NOT NULL AND json_extract(permit_wait, '$.grantedAt') IS NULL AND ${grantedNow}`,
        )
        .bind(...params),
    )
    .run();
  const ask = results.first<AskRow>("ask");
  const scope = results.first<ScopeRow>("scope");
  if (!ask || !scope) return { kind: "unlimited" };
  if (ask.held === 1) return { kind: "granted", waitedSince: ask.since < now ? ask.since : null };
  return {
    kind: "refused",
    reason: ask.reason ?? "concurrency",
    ahead: ask.ahead,
    queued: Math.max(scope.queued, ask.ahead),
    concurrency: scope.concurrency,
    since: ask.since,
    tokens: scope.rate_count === null ? null : scope.tokens,
    rate: scope.rate_count === null || scope.rate_period_ms === null ? null : { count: scope.rate_count, periodMs: scope.rate_period_ms },
    pausedUntil: scope.paused_until,
    pauseReason: scope.pause_reason,
    nextFree: scope.next_free,
    inFlight: scope.in_flight,
  };
}

// ---------------------------------------------------------------------------------------------
// The release

export interface Release {
  /** A 429/503 with Retry-After: every send of the scope waits until then. */
  pause?: { until: number; reason: string };
}

/** The most waiters one release wakes (one `sendBatch` of their messages). */
export const MAX_WOKEN_PER_RELEASE = 10;

/**
 * How far ahead a release counts the bucket's tokens when it decides how many waiters to wake: a
 * woken waiter whose token comes within this waits for it in its own invocation instead of parking
 * again (src/steps/permit-gate.ts `SHORT_WAIT_MS`, the same bound).
 */
export const WAKE_TOKENS_AHEAD_MS = 1000;

/** A waiter's row `s` parked past its time by more than `WAITER_OVERDUE_MS` (binds ?6 now): its wake-up was lost. */
const LOST = `s.parked_until < ?6 - ${WAITER_OVERDUE_MS}`;

/**
 * A waiter that is due — woken, or asking now — and not lost (binds ?6 now): it will ask before any
 * waiter a release wakes now. `unless`: rows not to count (the items this batch just woke).
 */
const DUE = (unless: string) => `s.state = 'EXECUTING'
      AND ((s.parked_until IS NULL AND s.lease_until > ?6) OR s.parked_until BETWEEN ?6 - ${WAITER_OVERDUE_MS} AND ?6)
      ${unless ? `AND NOT ${unless}` : ""}`;

/**
 * How many waiters a release wakes (binds ?1, ?2, ?6): as many as the scope can let through now —
 * free slots under `concurrency` (the live permits counted after this release gave its own back),
 * and the bucket's tokens now or within `WAKE_TOKENS_AHEAD_MS` — less the waiters already due (woken
 * or asking: they go first), none while the scope is paused; at most `MAX_WOKEN_PER_RELEASE`.
 */
const WAKE_COUNT = (justWoken: string) => `coalesce((SELECT max(0, min(
      CASE WHEN l.concurrency IS NULL THEN ${MAX_WOKEN_PER_RELEASE}
           ELSE l.concurrency - (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND ${LIVE}) END,
      CASE WHEN l.rate_count IS NULL THEN ${MAX_WOKEN_PER_RELEASE}
           ELSE CAST(${BUCKET("l")} + ${WAKE_TOKENS_AHEAD_MS} * 1.0 * l.rate_count / l.rate_period_ms AS INTEGER) END,
      ${MAX_WOKEN_PER_RELEASE})
      - (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND p.held = 0 AND ${rowOf(DUE(justWoken))}))
    FROM connector_limits l WHERE l.workspace = ?1 AND l.connector = ?2 AND coalesce(l.paused_until, 0) <= ?6), 0)`;

/**
 * The waiters a release wakes, oldest first (binds ?1 workspace, ?2 connector, ?6 now): the head of
 * the line, as many as `WAKE_COUNT` — and, whatever the scope, at least one waiter whose wake-up was
 * lost (overdue), if any. `justWoken`: the items this batch just woke (the step's statement runs
 * after the item's and must pick the same rows: they count as still asleep, not as due).
 */
const wakeSet = (justWoken: string) => {
  const also = justWoken ? ` OR ${justWoken}` : "";
  return `SELECT p.execution_id, p.vertex_id FROM connector_permits p
    WHERE ${SCOPE} AND p.held = 0
      AND (${rowOf(`s.state = 'EXECUTING' AND (${LOST}${also})`)}
           OR (${WAKE_COUNT(justWoken)} > 0 AND ${rowOf("s.state = 'EXECUTING' AND s.parked_until > ?6")}))
    ORDER BY p.since, p.execution_id, p.vertex_id
    LIMIT max(1, ${WAKE_COUNT(justWoken)})`;
};

/** A waiter a release woke: a step, or a MAP's item (`item` its index, `vertexId` its MAP's). */
export type WokenWaiter = StepRef & { item?: number };

/**
 * `releasePermit`: ONE batch — the step's permit given back (its row deleted: fenced by the epoch
 * that took it), [the shared pause written, never shortened], the head of the line woken now — the
 * oldest parked waiters, as many as the scope can let through now or within a second less those
 * already due (`wakeSet`), none while paused, and one whose wake-up was lost whatever the scope —
 * (`UNPARK_NOW`: its claim records no `lease_expired`), returned for the caller to send their messages
 * after the commit, and up to 20 rows of steps (or items) that no longer
 * run swept. Returns the woken steps and items. The releasing row is a step's or an item's (`fence`).
 */
export async function releasePermit(
  db: D1Database,
  workspace: string,
  connector: string,
  fence: Fence,
  now: number,
  release: Release = {},
): Promise<WokenWaiter[]> {
  const params = [workspace, connector, ...fenceParams(fence), now] as const;
  const batch = new LabelledBatch<"release" | "pause" | "wakeItem" | "wake" | "sweep">(db).add(
    "release",
    db.prepare(`DELETE FROM connector_permits AS p WHERE ${SCOPE} AND ${MINE} AND p.epoch = ?5 AND p.held = 1`).bind(...params.slice(0, 5)),
  );
  if (release.pause) {
    batch.add(
      "pause",
      db
        .prepare(
          `UPDATE connector_limits SET paused_until = ?7, pause_reason = ?8, updated_at = ?6
           WHERE workspace = ?1 AND connector = ?2 AND coalesce(paused_until, 0) < ?7`,
        )
        .bind(...params, release.pause.until, release.pause.reason.slice(0, 500)),
    );
  }
  // The oldest waiter is a MAP's item or a step (one line per scope): the item's statement first, then
  // the step's, whose candidates keep an item just woken here — so one release wakes one waiter.
  const justWokenItem = "(instr(p.vertex_id, '#') > 0 AND s.parked_until = ?6 AND s.lease_until = ?6 AND s.updated_at = ?6)";
  batch
    .add(
      "wakeItem",
      db
        .prepare(
          `UPDATE work_items SET ${UNPARK_NOW("?6")}
           WHERE state = 'EXECUTING' AND parked_until IS NOT NULL AND (execution_id, row_key) IN (${wakeSet("")})
           RETURNING execution_id, vertex_id, item_index`,
        )
        .bind(...params),
    )
    .add(
      "wake",
      db
        .prepare(
          `UPDATE steps SET ${UNPARK_NOW("?6")}
           WHERE state = 'EXECUTING' AND parked_until IS NOT NULL AND (execution_id, vertex_id) IN (${wakeSet(justWokenItem)})
           RETURNING execution_id, vertex_id`,
        )
        .bind(...params),
    )
    .add(
      "sweep",
      db
        .prepare(
          `DELETE FROM connector_permits WHERE rowid IN (
             SELECT p.rowid FROM connector_permits p WHERE ${SCOPE}
               AND NOT ${rowOf("s.state = 'EXECUTING'")}
             LIMIT 20)`,
        )
        .bind(workspace, connector),
    );
  const results = await batch.run();
  return [
    ...results
      .rows<{ execution_id: string; vertex_id: string; item_index: number }>("wakeItem")
      .map((r) => ({ executionId: r.execution_id, vertexId: r.vertex_id, item: r.item_index })),
    ...results
      .rows<{ execution_id: string; vertex_id: string }>("wake")
      .map((r) => ({ executionId: r.execution_id, vertexId: r.vertex_id })),
  ];
}

// ---------------------------------------------------------------------------------------------
// Waiting: the park that is not an attempt

/** What the trace shows of a step's permit wait (`steps.permit_wait`). */
export interface PermitWait {
  connector: string;
  since: number;
  until: number;
  reason: string;
  grantedAt?: number;
}

/**
 * `parkForPermit`: the claimed step found no permit. Like a DELAY's park (EXECUTING, lease and
 * `parked_until` at `until`), but it is not an attempt: no attempt row is written (a step's or a
 * MAP item's attempt has no row while it runs — migrations/0040, 0041 — and a parked row shows
 * none; the DELETE still removes a `running` row opened before them) and `attempt` goes back by one,
 * so `attempt - retry_base` (what the retry budget and the crash allowance count) is unchanged,
 * the next claim is the same attempt number, and the trace keeps only real attempts. The wait is
 * recorded for the trace (`permit_wait` of the step's row, or of the item's: migration 0035). One
 * batch, fenced. `rows`: a step's row, or a MAP's item (`fence.vertexId` its row key).
 */
export async function parkForPermit(
  db: D1Database,
  fence: Fence,
  r: { now: number; until: number; wait: PermitWait },
  rows: RowSource = STEP_ROWS,
): Promise<"parked" | "fenced-out"> {
  const results = await new LabelledBatch<"attempt" | "parked">(db)
    .add(
      "attempt",
      db
        .prepare(
          `DELETE FROM step_attempt_rows WHERE execution_id = ?1 AND vertex_id = ?2 AND epoch = ?3 AND outcome = 'running'
             AND EXISTS (SELECT 1 FROM ${rows.table} WHERE ${fenceOn(rows)})`,
        )
        .bind(...fenceParams(fence)),
    )
    .add(
      "parked",
      db
        .prepare(
          `UPDATE ${rows.table} SET attempt = attempt - 1, lease_until = ?4, parked_until = ?4, updated_at = ?5
             , permit_wait = ?6
           WHERE ${fenceOn(rows)} AND attempt > retry_base
           RETURNING parked_until`,
        )
        .bind(...fenceParams(fence), r.until, r.now, JSON.stringify(r.wait)),
    )
    .run();
  return results.first("parked") ? "parked" : "fenced-out";
}

/** `parkForPermit` over a MAP's item (docs/steps.md "MAP"): its row parks, not the MAP's step. */
export function parkItemForPermit(
  db: D1Database,
  fence: ItemFence,
  r: { now: number; until: number; wait: PermitWait },
): Promise<"parked" | "fenced-out"> {
  return parkForPermit(db, itemKeyFence(fence), r, ITEM_ROWS);
}

/**
 * `dueParkedItems`: MAP items parked for a permit whose time came at least `graceMs` ago — their
 * delayed wake-up did not claim them (a lost message): the cron's wake-up task sends them one, as
 * `dueParkedSteps` for steps. Read only (the claim is the resume). Over `work_items_lease_expiry`:
 * a parked item's lease is its wake time.
 */
export async function dueParkedItems(db: D1Database, now: number, graceMs: number, limit: number): Promise<ItemRef[]> {
  const { results } = await db
    .prepare(
      `SELECT execution_id AS executionId, vertex_id AS vertexId, item_index AS item FROM work_items
       WHERE state = 'EXECUTING' AND lease_until <= ?1 AND parked_until IS NOT NULL AND kind = 'map_item'
       ORDER BY lease_until LIMIT ?2`,
    )
    .bind(now - graceMs, limit)
    .all<ItemRef>();
  return results;
}

// ---------------------------------------------------------------------------------------------
// The live state (GET /v1/connectors/{name}/state)

export interface ScopeState {
  concurrency: number | null;
  rate: { count: number; periodMs: number; burst: number } | null;
  inFlight: number;
  waiting: number;
  tokens: number | null;
  pausedUntil: number | null;
  pauseReason: string | null;
  heldBack: number;
}

/** The scope's state at `now`; null when the connector has no limits. */
export async function readScopeState(db: D1Database, workspace: string, connector: string, now: number): Promise<ScopeState | null> {
  const row = await db
    .prepare(
      `SELECT l.concurrency, l.rate_count, l.rate_period_ms, l.burst, ${BUCKET("l")} AS tokens, l.paused_until, l.pause_reason, l.held_back,
              (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND ${LIVE}) AS in_flight,
              (SELECT count(*) FROM connector_permits p WHERE ${SCOPE} AND p.held = 0
                 AND ${rowOf("s.state = 'EXECUTING'")}) AS waiting
       FROM connector_limits l WHERE l.workspace = ?1 AND l.connector = ?2`,
    )
    .bind(workspace, connector, null, null, null, now)
    .first<{
      concurrency: number | null;
      rate_count: number | null;
      rate_period_ms: number | null;
      burst: number | null;
      tokens: number | null;
      paused_until: number | null;
      pause_reason: string | null;
      held_back: number;
      in_flight: number;
      waiting: number;
    }>();
  if (!row) return null;
  const paused = row.paused_until !== null && row.paused_until > now;
  return {
    concurrency: row.concurrency,
    rate:
      row.rate_count === null || row.rate_period_ms === null || row.burst === null
        ? null
        : { count: row.rate_count, periodMs: row.rate_period_ms, burst: row.burst },
    inFlight: row.in_flight,
    waiting: row.waiting,
    tokens: row.tokens,
    pausedUntil: paused ? row.paused_until : null,
    pauseReason: paused ? row.pause_reason : null,
    heldBack: row.held_back,
  };
}
