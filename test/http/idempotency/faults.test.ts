/**
 * Failures of the store itself, provoked in real D1 with SQLite triggers (scoped to key
 * prefixes, in this file's own storage) rather than by mocking the ledger.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { harness, problemOf, uniqueKey } from "./harness";

beforeAll(async () => {
  // The completion (pending → completed) of these keys fails with a D1 error.
  await env.DB.prepare(
    `CREATE TRIGGER test_completion_fails BEFORE UPDATE OF status ON idempotency_keys
     WHEN OLD.status = 'pending' AND NEW.status = 'completed' AND NEW.idem_key LIKE 'settle-fails-%'
     BEGIN SELECT RAISE(ABORT, 'simulated D1 failure on completion'); END`,
  ).run();
  // The claim statement on these (completed) keys touches no row: the conflicting row "vanishes".
  await env.DB.prepare(
    `CREATE TRIGGER test_claim_vanishes BEFORE UPDATE ON idempotency_keys
     WHEN OLD.idem_key LIKE 'vanish-%' AND OLD.status = 'completed' BEGIN SELECT RAISE(IGNORE); END`,
  ).run();
  // The claim of these keys fails with a D1 error that is not "no such table".
  await env.DB.prepare(
    `CREATE TRIGGER test_claim_fails BEFORE INSERT ON idempotency_keys
     WHEN NEW.idem_key LIKE 'claim-fails-%' BEGIN SELECT RAISE(ABORT, 'simulated D1 overload'); END`,
  ).run();
});

afterEach(() => vi.restoreAllMocks());

describe("when the completion write fails", () => {
  it("still answers the caller with the handler's response, logs loudly, and leaves the reservation pending until its TTL", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ pendingTtlMs: 10_000 }, (c, run) => c.json({ run }, 201));
    const key = uniqueKey("settle-fails");

    const first = await h.send({ key });
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ run: 1 });
    expect(errors.mock.calls.some((args) => String(args[0]).includes("COMPLETION WRITE FAILED"))).toBe(true);
    const row = await env.DB.prepare("SELECT status, generation FROM idempotency_keys WHERE idem_key = ?").bind(key).first();
    expect(row).toEqual({ status: "pending", generation: 1 });

    // A retry within the TTL is told to wait; it does not run the handler again.
    const early = await h.send({ key });
    expect(early.status).toBe(409);
    expect((await problemOf(early)).code).toBe("idempotency-key-in-progress");
    expect(h.runs).toHaveLength(1);

    // After the TTL a retry takes over (at-least-once: the handler runs again).
    await env.DB.prepare("DROP TRIGGER test_completion_fails").run();
    h.clock.now += 10_000;
    const retry = await h.send({ key });
    expect(await retry.json()).toEqual({ run: 2 });
    expect((await h.send({ key })).headers.get("idempotent-replayed")).toBe("true");
  });
});

describe("when the claim finds a conflicting row but returns none", () => {
  it("answers 409 idempotency-key-lost asking for a retry, without running the handler", async () => {
    const h = harness();
    const key = uniqueKey("vanish");
    expect((await h.send({ key })).status).toBe(201); // the insert path is unaffected
    const res = await h.send({ key });
    expect(res.status).toBe(409);
    expect(res.headers.get("retry-after")).toBe("1");
    expect((await problemOf(res)).code).toBe("idempotency-key-lost");
    expect(h.runs).toHaveLength(1);
  });
});

describe("when the claim itself fails", () => {
  it("answers 503 idempotency-ledger-error and does not run the handler", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const h = harness();
    const res = await h.send({ key: uniqueKey("claim-fails") });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect((await problemOf(res)).code).toBe("idempotency-ledger-error");
    expect(h.runs).toHaveLength(0);
  });
});
