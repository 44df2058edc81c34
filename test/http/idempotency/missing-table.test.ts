/**
 * The ledger table not provisioned (migrations not applied). This file drops the table in its
 * own isolated storage, so no other test file is affected.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { harness, problemOf, uniqueKey } from "./harness";

beforeAll(async () => {
  await env.DB.prepare("DROP TABLE idempotency_keys").run();
});

describe("a missing idempotency_keys table", () => {
  it("answers 503 idempotency-ledger-unavailable saying to apply the migrations, without running the handler", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const h = harness();
    const res = await h.send({ key: uniqueKey() });
    expect(res.status).toBe(503);
    const problem = await problemOf(res);
    expect(problem.code).toBe("idempotency-ledger-unavailable");
    expect(problem.detail).toMatch(/migrations apply/);
    expect(h.runs).toHaveLength(0);
  });
});
