/**
 * Conformance of the ledger's named transitions on real D1 (src/ledger/idempotency-keys.ts):
 * each test drives the SQL directly and states the precondition it proves.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { claimOrLoad, completeIfOwned, releaseIfOwned, type ClaimInput } from "../../src/ledger";

const TTL = 1_000;
const RETENTION = 10_000;
const FP_A = "a".repeat(64);
const FP_B = "b".repeat(64);

let seq = 0;
function claimInput(overrides: Partial<ClaimInput> = {}): ClaimInput {
  const now = overrides.now ?? 1_000_000;
  return {
    principal: "ws-conformance",
    key: `k-${++seq}`,
    fingerprint: FP_A,
    claimToken: crypto.randomUUID(),
    now,
    leaseUntil: now + TTL,
    expiresAt: now + RETENTION,
    ...overrides,
  };
}
const at = (input: ClaimInput, now: number, fields: Partial<ClaimInput> = {}): ClaimInput => ({
  ...input,
  claimToken: crypto.randomUUID(),
  now,
  leaseUntil: now + TTL,
  expiresAt: now + RETENTION,
  ...fields,
});
const response = { status: 201, headers: { "content-type": "application/json" }, body: new TextEncoder().encode('{"ok":true}') };

async function rowOf(input: ClaimInput) {
  return env.DB.prepare("SELECT * FROM idempotency_keys WHERE principal = ? AND idem_key = ?")
    .bind(input.principal, input.key)
    .first<Record<string, unknown>>();
}

describe("claimOrLoad", () => {
  it("claims an absent key as pending generation 1", async () => {
    const input = claimInput();
    expect(await claimOrLoad(env.DB, input)).toEqual({ kind: "claimed", generation: 1, takeover: false });
    expect(await rowOf(input)).toMatchObject({
      status: "pending",
      generation: 1,
      lease_until: input.leaseUntil,
      expires_at: input.expiresAt,
    });
  });

  it("returns the existing pending row, unchanged, to a second caller while the lease is live", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const second = await claimOrLoad(env.DB, at(input, input.now + TTL - 1));
    expect(second).toMatchObject({
      kind: "existing",
      row: { status: "pending", generation: 1, leaseUntil: input.leaseUntil, response: null },
    });
    expect(await rowOf(input)).toMatchObject({ claim_token: input.claimToken, claimed_at: input.now });
  });

  it("takes over a pending row whose lease expired, with generation + 1, for the same fingerprint", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const retry = at(input, input.now + TTL);
    expect(await claimOrLoad(env.DB, retry)).toEqual({ kind: "claimed", generation: 2, takeover: true });
    expect(await rowOf(input)).toMatchObject({
      generation: 2,
      claim_token: retry.claimToken,
      lease_until: retry.leaseUntil,
      created_at: input.now,
    });
  });

  it("never lets a different fingerprint take over a stale reservation", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const other = await claimOrLoad(env.DB, at(input, input.now + TTL + 5, { fingerprint: FP_B }));
    expect(other).toMatchObject({ kind: "existing", row: { fingerprint: FP_A, generation: 1 } });
  });

  it("loads a completed row with its stored response (status, headers, body bytes)", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    expect(
      await completeIfOwned(env.DB, { ...input, generation: 1 }, { now: input.now + 5, expiresAt: input.now + 5 + RETENTION, response }),
    ).toBe(true);
    const replay = await claimOrLoad(env.DB, at(input, input.now + 6));
    expect(replay.kind).toBe("existing");
    if (replay.kind !== "existing") return;
    expect(replay.row.status).toBe("completed");
    expect(replay.row.response?.status).toBe(201);
    expect(replay.row.response?.headers).toEqual({ "content-type": "application/json" });
    expect(new TextDecoder().decode(replay.row.response!.body!)).toBe('{"ok":true}');
  });

  it("re-claims a completed row once its retention has passed, even before the sweep ran", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    await completeIfOwned(env.DB, { ...input, generation: 1 }, { now: input.now, expiresAt: input.now + RETENTION, response });
    const later = at(input, input.now + RETENTION, { fingerprint: FP_B });
    expect(await claimOrLoad(env.DB, later)).toMatchObject({ kind: "claimed" });
    expect(await rowOf(input)).toMatchObject({ status: "pending", fingerprint: FP_B, response_status: null, response_body: null });
  });
});

describe("completeIfOwned (the fence)", () => {
  it("rejects the original owner's completion after a takeover and keeps the new owner's response", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const retry = at(input, input.now + TTL + 1);
    await claimOrLoad(env.DB, retry);
    const mine = { status: 200, headers: {}, body: new TextEncoder().encode("new") };
    expect(await completeIfOwned(env.DB, { ...retry, generation: 2 }, { now: retry.now, expiresAt: retry.expiresAt, response: mine })).toBe(
      true,
    );
    // The zombie (generation 1) finishes late.
    expect(await completeIfOwned(env.DB, { ...input, generation: 1 }, { now: retry.now + 1, expiresAt: retry.expiresAt, response })).toBe(
      false,
    );
    expect(await rowOf(input)).toMatchObject({ generation: 2, status: "completed", response_status: 200 });
  });

  it("rejects a completion with the right generation but another claim's token (swept and re-created)", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    await env.DB.prepare("DELETE FROM idempotency_keys WHERE principal = ? AND idem_key = ?").bind(input.principal, input.key).run();
    const reborn = at(input, input.now + 1);
    expect(await claimOrLoad(env.DB, reborn)).toMatchObject({ kind: "claimed", generation: 1 });
    expect(
      await completeIfOwned(env.DB, { ...input, generation: 1 }, { now: input.now + 2, expiresAt: input.now + RETENTION, response }),
    ).toBe(false);
    expect(await rowOf(input)).toMatchObject({ status: "pending", claim_token: reborn.claimToken });
  });

  it("does not complete a row twice", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const fence = { ...input, generation: 1 };
    expect(await completeIfOwned(env.DB, fence, { now: input.now, expiresAt: input.expiresAt, response })).toBe(true);
    expect(
      await completeIfOwned(env.DB, fence, { now: input.now, expiresAt: input.expiresAt, response: { ...response, status: 500 } }),
    ).toBe(false);
    expect(await rowOf(input)).toMatchObject({ response_status: 201 });
  });
});

describe("releaseIfOwned", () => {
  it("deletes the owner's pending reservation so a retry claims afresh", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    expect(await releaseIfOwned(env.DB, { ...input, generation: 1 })).toBe(true);
    expect(await rowOf(input)).toBeNull();
    expect(await claimOrLoad(env.DB, at(input, input.now + 1))).toMatchObject({ kind: "claimed", generation: 1 });
  });

  it("does not delete a reservation that was taken over, nor a completed row", async () => {
    const input = claimInput();
    await claimOrLoad(env.DB, input);
    const retry = at(input, input.now + TTL);
    await claimOrLoad(env.DB, retry);
    expect(await releaseIfOwned(env.DB, { ...input, generation: 1 })).toBe(false);
    await completeIfOwned(env.DB, { ...retry, generation: 2 }, { now: retry.now, expiresAt: retry.expiresAt, response });
    expect(await releaseIfOwned(env.DB, { ...retry, generation: 2 })).toBe(false);
    expect(await rowOf(input)).toMatchObject({ status: "completed", generation: 2 });
  });
});

describe("the table's CHECK constraints", () => {
  /** A well-formed pending row; each test changes the fields it is about. */
  const wellFormed = {
    principal: "ws-check",
    fingerprint: FP_A,
    status: "pending",
    generation: 1,
    claim_token: "t",
    created_at: 1,
    claimed_at: 1,
    lease_until: 2,
    completed_at: null,
    expires_at: 10,
    response_status: null,
  };
  const insert = (fields: Record<string, unknown>) => {
    const row = { ...wellFormed, idem_key: `c-${++seq}`, ...fields };
    const cols = Object.keys(row);
    return env.DB.prepare(`INSERT INTO idempotency_keys (${cols.join(",")}) VALUES (${cols.map(() => "?").join(",")})`)
      .bind(...Object.values(row))
      .run();
  };

  const stored = (key: string) =>
    env.DB.prepare("SELECT * FROM idempotency_keys WHERE principal = 'ws-check' AND idem_key = ?")
      .bind(key)
      .first<Record<string, unknown>>();

  it("accepts a well-formed pending row, and stores it as given", async () => {
    const key = `c-pending-${++seq}`;
    expect((await insert({ idem_key: key })).meta.changes).toBe(1);
    expect(await stored(key)).toEqual({
      ...wellFormed,
      idem_key: key,
      response_headers: null,
      response_body: null,
    });
  });
  it("accepts a well-formed completed row (a response, a completion time, no lease), and stores it as given", async () => {
    const key = `c-completed-${++seq}`;
    const fields = {
      idem_key: key,
      status: "completed",
      generation: 2,
      lease_until: null,
      completed_at: 5,
      response_status: 201,
      response_headers: '{"content-type":"application/json"}',
    };
    expect((await insert(fields)).meta.changes).toBe(1);
    expect(await stored(key)).toMatchObject({ ...fields, claim_token: "t", expires_at: 10, response_body: null });
  });
  it.each([
    ["an unknown status", { status: "done" }],
    ["generation 0", { generation: 0 }],
    ["a completed row without a response status", { status: "completed", lease_until: null, completed_at: 5 }],
    ["a completed row that still holds a lease", { status: "completed", completed_at: 5, response_status: 200 }],
    ["a pending row with a response", { response_status: 200 }],
    ["a pending row without a lease", { lease_until: null }],
    ["a key longer than 255 characters", { idem_key: "k".repeat(256) }],
    ["a fingerprint that is not SHA-256 hex length", { fingerprint: "abc" }],
  ])("rejects %s", async (_name, fields) => {
    await expect(insert(fields)).rejects.toThrow(/CHECK constraint failed/);
  });
});
