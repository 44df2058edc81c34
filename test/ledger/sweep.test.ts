/**
 * The retention sweep: bounded batches, only dead rows, never a pending reservation whose lease
 * is live — from cron and opportunistically after responses (ctx.waitUntil).
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ledgerCron } from "../../src/http/idempotency";
import { sweepIdempotencyKeys } from "../../src/ledger";
import { countingD1, type CountingD1 } from "../helpers/counting-d1";
import { deliveredEnv } from "../helpers/shards";
import { harness, uniqueKey } from "../http/idempotency/harness";

const NOW = 1_800_000_000_000;
const FP = "f".repeat(64);

beforeEach(async () => {
  await env.DB.prepare("DELETE FROM idempotency_keys").run();
  vi.spyOn(console, "log").mockImplementation(() => {});
});

/** Inserts a row directly (the sweep must be safe for any row the CHECKs allow). */
async function seed(key: string, row: { status: "pending" | "completed"; expiresAt: number; leaseUntil?: number }) {
  const completed = row.status === "completed";
  await env.DB.prepare(
    `INSERT INTO idempotency_keys (principal, idem_key, fingerprint, status, generation, claim_token, created_at, claimed_at,
       lease_until, completed_at, expires_at, response_status)
     VALUES ('ws-sweep', ?1, ?2, ?3, 1, 't', 0, 0, ?4, ?5, ?6, ?7)`,
  )
    .bind(key, FP, row.status, completed ? null : (row.leaseUntil ?? 0), completed ? 0 : null, row.expiresAt, completed ? 200 : null)
    .run();
}
const remaining = async () =>
  (await env.DB.prepare("SELECT idem_key FROM idempotency_keys ORDER BY idem_key").all<{ idem_key: string }>()).results.map(
    (r) => r.idem_key,
  );

describe("sweepIdempotencyKeys", () => {
  it("deletes only rows past retention and never a pending row whose lease is live", async () => {
    await seed("completed-expired", { status: "completed", expiresAt: NOW - 1 });
    await seed("completed-expires-now", { status: "completed", expiresAt: NOW });
    await seed("completed-fresh", { status: "completed", expiresAt: NOW + 1 });
    await seed("pending-expired-stale", { status: "pending", expiresAt: NOW - 1, leaseUntil: NOW - 1 });
    await seed("pending-expired-live-lease", { status: "pending", expiresAt: NOW - 1, leaseUntil: NOW + 1 });
    await seed("pending-fresh", { status: "pending", expiresAt: NOW + 1000, leaseUntil: NOW + 10 });
    expect(await sweepIdempotencyKeys(env.DB, NOW, 100)).toBe(3);
    expect(await remaining()).toEqual(["completed-fresh", "pending-expired-live-lease", "pending-fresh"]);
  });

  it("deletes at most one batch per statement, oldest expiry first, in one round trip", async () => {
    for (let i = 0; i < 5; i++) await seed(`old-${i}`, { status: "completed", expiresAt: NOW - 100 + i });
    const counting = countingD1(env.DB);
    expect(await sweepIdempotencyKeys(counting.db, NOW, 2)).toBe(2);
    expect(counting.roundTrips()).toBe(1);
    expect(counting.calls[0]!.sql[0]).toMatch(/DELETE FROM idempotency_keys WHERE rowid IN \(SELECT rowid .* LIMIT \?2\)/);
    expect(await remaining()).toEqual(["old-2", "old-3", "old-4"]);
  });
});

describe("ledgerCron", () => {
  it("drains in bounded batches and stops at the batch ceiling, leaving the rest for the next tick", async () => {
    for (let i = 0; i < 7; i++) await seed(`cron-${i}`, { status: "completed", expiresAt: NOW - 10 });
    await seed("cron-fresh", { status: "completed", expiresAt: NOW + 10 });
    expect(await ledgerCron(env, NOW, { batchSize: 2, maxBatches: 2 })).toEqual({ deleted: 4, batches: 2, drained: false });
    expect(await ledgerCron(env, NOW, { batchSize: 2, maxBatches: 5 })).toEqual({ deleted: 3, batches: 2, drained: true });
    expect(await remaining()).toEqual(["cron-fresh"]);
  });
});

describe("the opportunistic sweep after responses", () => {
  it("runs off the request path via waitUntil, at most once per interval, and removes rows past retention", async () => {
    const h = harness({ retentionMs: 60_000, pendingTtlMs: 1_000, sweep: { intervalMs: 30_000, batchSize: 10 } });
    const old = uniqueKey("old");
    await h.send({ key: old }); // starts the interval; no sweep yet
    expect(h.counting.calls.some((c) => c.sql[0]!.startsWith("DELETE"))).toBe(false);

    h.clock.now += 10_000; // within the interval: still no sweep
    h.counting.reset();
    await h.send({ key: uniqueKey("mid") });
    expect(h.counting.roundTrips()).toBe(2);

    h.clock.now += 55_000; // `old` (stored at +0) is past retention, `mid` (+10 s) is not; the interval has elapsed
    h.counting.reset();
    await h.send({ key: uniqueKey("new") });
    expect(h.counting.calls.map((c) => c.sql[0]!.trim().split(/\s+/)[0])).toEqual(["INSERT", "UPDATE", "DELETE"]);
    const keys = await remaining();
    expect(keys).not.toContain(old);
    expect(keys).toHaveLength(2); // mid and new
  });

  it("keeps one interval per database: a busy shard's writes do not use up a quiet shard's turn", async () => {
    const real = deliveredEnv(env);
    const byShard = { dev: countingD1(real.DB), other: countingD1(real.DB_1) };
    const h = harness({
      retentionMs: 60_000,
      pendingTtlMs: 1_000,
      sweep: { intervalMs: 30_000, batchSize: 10 },
      database: (_env: unknown, principal: string) => (principal === "other" ? byShard.other.db : byShard.dev.db),
    });
    await h.send({ key: uniqueKey("d0") }); // starts dev's interval
    await h.send({ key: uniqueKey("o0"), token: "other-token" }); // starts other's
    h.clock.now += 31_000;
    for (let i = 0; i < 3; i++) await h.send({ key: uniqueKey(`d${i + 1}`) }); // dev is busy: it sweeps once
    await h.send({ key: uniqueKey("o1"), token: "other-token" }); // other's turn is its own
    const deletes = (c: CountingD1) => c.calls.filter((call) => call.sql[0]!.trim().startsWith("DELETE")).length;
    expect([deletes(byShard.dev), deletes(byShard.other)]).toEqual([1, 1]);
  });

  it("keeps the advertised window: a replay works until retention ends, then the key is new again", async () => {
    const h = harness({ retentionMs: 60_000, pendingTtlMs: 1_000, sweep: false });
    const key = uniqueKey();
    await h.send({ key });
    h.clock.now += 59_999;
    expect((await h.send({ key })).headers.get("idempotent-replayed")).toBe("true");
    h.clock.now += 1;
    const after = await h.send({ key, body: '{"different":true}' });
    expect(after.status).toBe(201);
    expect(after.headers.get("idempotent-replayed")).toBeNull();
    expect(h.runs).toHaveLength(2);
  });
});
