/**
 * The model learns the key memory (docs/history.md "Key memory: hot and cold"): a workflow whose
 * charge key declares the destination's retention (guarded), triggered again and again for the
 * same few orders across virtual time, while the world's cron moves kept key sends to the cold tier
 * (`KEY_MEMORY_HOT` is `KEYS_HOT` in the world's env: a send goes cold its key's 120 s retention
 * plus 20 s after it began counting — migrations/0036, per key — within a run).
 *
 * The invariant: **a guarded key is never re-sent blindly, whether its record is hot or cold** —
 * every request the destination receives with a guarded key, after the first, arrives while the
 * destination still remembers it (the first request's time plus the declared retention, less the
 * guard's margin). The model has no acknowledgement, so any later send would be a blind one.
 *
 * The operations come from a stream of their own (seed ^ `KEYS_SALT`) and are inserted among the
 * others: the existing seeds keep every operation and operand they had.
 */
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

/** A trigger of the guarded workflow for order `order` of workspace `ws` (a new execution once the dedupe window passed). */
export type KeysOp = { t: "keySend"; ws: number; order: number };

export const KEYS_WORKFLOW = "guardedCharge";
/** The charge key's declared retention, and the guard's margin (src/definitions/destination-key.ts: min(60 s, 10 %)). */
export const KEYS_RETENTION_MS = 120_000;
const MARGIN_MS = 12_000;
/** The world's KEY_MEMORY_HOT: a kept send goes cold 20 s after its declared retention ended (once no step holds it). */
export const KEYS_HOT = "20s";
const KEYS_SALT = 0x2f6b9a11;
const KEY_PREFIX = "gcharge";

export function keysWorkflow(dest: string): unknown {
  return {
    id: KEYS_WORKFLOW,
    history: { completed: "2m", failed: "2m", cancelled: "2m" },
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${dest}/payments/charges`,
          idempotencyKey: { value: `= $idempotencyKey('${KEY_PREFIX}', payload.order.id)`, retention: "120s" },
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
    if (op.t !== "settle" && r() < 0.12) out.push({ t: "keySend", ws: Math.floor(r() * workspaces), order: Math.floor(r() * 2) });
    out.push(op);
  }
  return out;
}

export async function applyKeysOp(world: World, op: KeysOp): Promise<void> {
  // The order is the workspace's own: the guard's memory is per workspace, and so is the invariant's.
  const payload = { order: { id: `${world.order(op.order)}-g${op.ws}`, total: 10 }, customer: "c0", note: `keys-${world.run}` };
  const res = await world.call(op.ws, "POST", `/v1/workflows/${KEYS_WORKFLOW}/trigger`, payload);
  if (res.status >= 500) throw new Violation("no 5xx", `guarded trigger answered ${res.status}: ${await res.text()}`);
}

/** A guarded key is never re-sent after its destination may have forgotten it, hot or cold. */
export function checkKeys(world: World): void {
  const first = new Map<string, number>();
  for (const r of world.dest.requests) {
    const key = r.headers["idempotency-key"];
    if (!key?.startsWith(`${KEY_PREFIX}-`)) continue;
    const since = first.get(key);
    if (since === undefined) {
      first.set(key, r.at);
      continue;
    }
    if (r.at >= since + KEYS_RETENTION_MS - MARGIN_MS) {
      throw new Violation(
        "a guarded key is never re-sent blindly, whether its record is hot or cold",
        `${key} first sent at ${new Date(since).toISOString()}, sent again at ${new Date(r.at).toISOString()} ` +
          `(the destination remembers it ${KEYS_RETENTION_MS / 1000} s)`,
      );
    }
  }
}
