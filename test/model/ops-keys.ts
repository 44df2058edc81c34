/**
 * The model learns the key memory (docs/history.md "Key memory: hot and cold"): a workflow whose
 * charge key declares the destination's retention (guarded), triggered again and again for the
 * same few orders across virtual time, while the world's cron moves kept key sends to the cold tier
 * (`KEY_MEMORY_HOT` is `KEYS_HOT` in the world's env: a send goes cold its key's 120 s retention
 * plus 20 s after it began counting — migrations/0036, per key — within a run).
 *
 * Two retentions (migrations/0036: a kept send stays hot for its own key's retention plus
 * KEY_MEMORY_HOT): `guardedCharge` declares 120 s, `guardedChargeLong` 600 s — so at the same
 * instant one key's send is cold while another's, as old, is still hot, and the move walks both.
 *
 * The invariant: **a guarded key is never re-sent blindly, whether its record is hot or cold** —
 * every request the destination receives with a guarded key, after the first, arrives while the
 * destination still remembers it (the first request's time plus its key's declared retention, less
 * the guard's margin). The model has no acknowledgement, so any later send would be a blind one.
 *
 * The operations come from a stream of their own (seed ^ `KEYS_SALT`) and are inserted among the
 * others: the existing seeds keep every operation and operand they had.
 */
import type { Op } from "./ops";
import { prng } from "./ops";
import { DEST } from "../steps/helpers";
import { searchQuery } from "../../src/ledger/search";
import { Violation, type World } from "./world";

/**
 * A trigger of a guarded workflow for order `order` of workspace `ws` (a new execution once the
 * dedupe window passed); `long`: the 600 s one.
 */
export type KeysOp = { t: "keySend"; ws: number; order: number; long?: boolean };

export const KEYS_WORKFLOW = "guardedCharge";
/** The charge key's declared retention, and the guard's margin (src/definitions/destination-key.ts: min(60 s, 10 %)). */
export const KEYS_RETENTION_MS = 120_000;
const MARGIN_MS = 12_000;
/** The world's KEY_MEMORY_HOT: a kept send goes cold 20 s after its declared retention ended (once no step holds it). */
export const KEYS_HOT = "20s";
const KEYS_SALT = 0x2f6b9a11;
const KEY_PREFIX = "gcharge";
/** The second guarded workflow: the same charge, a 600 s retention (hot for 620 s), its own key prefix. */
const LONG = { id: "guardedChargeLong", retentionMs: 600_000, prefix: "gchargelong" };
/** min(60 s, 10 %) of 600 s. */
const LONG_MARGIN_MS = 60_000;

export function keysWorkflow(dest: string, long = false): unknown {
  const prefix = long ? LONG.prefix : KEY_PREFIX;
  return {
    id: long ? LONG.id : KEYS_WORKFLOW,
    history: { completed: "2m", failed: "2m", cancelled: "2m" },
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${dest}/payments/charges`,
          idempotencyKey: { value: `= $idempotencyKey('${prefix}', payload.order.id)`, retention: long ? "600s" : "120s" },
          body: "= { 'order': payload.order.id }",
          // Within what the guard allows of a 120 s retention (the save refuses a longer schedule).
          retry: { maxAttempts: 3, backoff: "exponential", initialDelayMs: 1000, maxDelayMs: 10_000, inProgressBudgetMs: 30_000 },
          timeoutMs: 5_000,
        },
      },
    ],
    edges: [{ from: "entry", to: "charge" }],
  };
}

/** The key operations inserted into `ops` (about one in eight), from their own stream. */
export function withKeyOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ KEYS_SALT);
  const out: Op[] = [];
  for (const op of ops) {
    if (op.t !== "settle" && r() < 0.12) {
      const ws = Math.floor(r() * workspaces);
      const order = Math.floor(r() * 2);
      out.push(r() < 0.5 ? { t: "keySend", ws, order } : { t: "keySend", ws, order, long: true });
    }
    out.push(op);
  }
  return out;
}

/** The workspaces of each world that have the long workflow saved (saved at its first trigger: the world saves the first). */
const savedLong = new WeakMap<World, Set<number>>();

export async function applyKeysOp(world: World, op: KeysOp): Promise<void> {
  if (op.long) {
    const saved = savedLong.get(world) ?? new Set<number>();
    savedLong.set(world, saved);
    if (!saved.has(op.ws)) {
      const res = await world.call(op.ws, "PUT", `/v1/workflows/${LONG.id}`, keysWorkflow(DEST, true));
      if (res.status >= 300) throw new Error(`saving the long guarded workflow: ${res.status} ${await res.text()}`);
      saved.add(op.ws);
    }
  }
  // The order is the workspace's own: the guard's memory is per workspace, and so is the invariant's.
  const payload = { order: { id: `${world.order(op.order)}-g${op.ws}`, total: 10 }, customer: "c0", note: `keys-${world.run}` };
  const res = await world.call(op.ws, "POST", `/v1/workflows/${op.long ? LONG.id : KEYS_WORKFLOW}/trigger`, payload);
  if (res.status >= 500) throw new Violation("no 5xx", `guarded trigger answered ${res.status}: ${await res.text()}`);
}

/** A guarded key is never re-sent after its destination may have forgotten it, hot or cold. */
export function checkKeys(world: World): void {
  const first = new Map<string, number>();
  for (const r of world.dest.requests) {
    const key = r.headers["idempotency-key"];
    if (!key?.startsWith(`${KEY_PREFIX}-`) && !key?.startsWith(`${LONG.prefix}-`)) continue;
    const long = key.startsWith(`${LONG.prefix}-`);
    const [retention, margin] = long ? [LONG.retentionMs, LONG_MARGIN_MS] : [KEYS_RETENTION_MS, MARGIN_MS];
    const since = first.get(key);
    if (since === undefined) {
      first.set(key, r.at);
      continue;
    }
    if (r.at >= since + retention - margin) {
      throw new Violation(
        "a guarded key is never re-sent blindly, whether its record is hot or cold",
        `${key} first sent at ${new Date(since).toISOString()}, sent again at ${new Date(r.at).toISOString()} ` +
          `(the destination remembers it ${retention / 1000} s)`,
      );
    }
  }
}

/**
 * Every kept execution that sent a key is found by the key's search (`?destinationKey=`): the same
 * query the route runs (src/ledger/search.ts `searchQuery`), over every key a kept step or MAP item
 * of the workspace holds. Since migrations/0043 the first execution to send a key is found by its
 * send row, not `steps_by_key`, and gets its entry back when that row goes (forgotten, moved cold).
 */
export async function checkKeySearch(world: World, ws: number): Promise<void> {
  const db = world.dbOf(ws);
  const workspace = world.names[ws]!;
  const { results: held } = await db
    .prepare(
      `SELECT execution_id AS id, idempotency_key AS key FROM steps WHERE workspace = ?1 AND idempotency_key IS NOT NULL
       UNION SELECT execution_id, idempotency_key FROM work_items WHERE workspace = ?1 AND idempotency_key IS NOT NULL`,
    )
    .bind(workspace)
    .all<{ id: string; key: string }>();
  if (held.length === 0) return;
  const keys = [...new Set(held.map((h) => h.key))];
  const query = searchQuery(workspace, { by: "key", keys }, { limit: held.length + 1 });
  const { results: found } = await db
    .prepare(query.sql)
    .bind(...query.params)
    .all<{ id: string }>();
  const ids = new Set(found.map((f) => f.id));
  const missed = held.filter((h) => !ids.has(h.id));
  if (missed.length > 0) {
    throw new Violation("every kept execution that sent a key is found by the key's search", JSON.stringify(missed.slice(0, 5)));
  }
}
