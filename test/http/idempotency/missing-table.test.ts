/**
 * The ledger table not provisioned (migrations not applied). This file drops the table in its
 * own isolated storage, so no other test file is affected.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { placeWorkspace } from "../../../src/shards/placement";
import { harness, problemOf, uniqueKey } from "./harness";

beforeAll(async () => {
  // The harness's workspace was placed before the table went (a placement is recorded once, at its
  // first use, and its first use reads idempotency_keys: src/shards/placement.ts).
  await placeWorkspace(env, "dev");
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
