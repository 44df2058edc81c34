/**
 * A version saved before durations had one maximum (365 days, src/definitions/schema.ts
 * `MAX_DURATION_MS`) can still hold a longer dedupe window: at run time the window is clamped to
 * that maximum, so the identity's expiry stays a time D1 stores exactly and every view can show.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_DURATION_MS } from "../../src/definitions/schema";
import { triggerFromRequest } from "../../src/ingress/trigger";
import { BASE, countingQueue, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";

describe("a stored dedupe window longer than the maximum", () => {
  it("is clamped to 365 days when an execution starts", async () => {
    const id = unique("longwindow");
    // Past Number.MAX_SAFE_INTEGER milliseconds: parsed by the schema, refused only by the save rules.
    await seedWorkflow("dev", transformWorkflow(id, { dedupeWindow: "1000000000d" }));
    const { queue } = countingQueue();
    const now = Date.now();
    const result = await triggerFromRequest(
      { db: env.DB, queue, now: () => now },
      { workspace: "dev", workflowId: id, invocation: "production", request: jsonRequest(`${BASE}/v1/workflows/${id}/trigger`, { a: 1 }) },
    );
    const row = await env.DB.prepare("SELECT expires_at, window_start FROM execution_identities WHERE execution_id = ?1")
      .bind(result.executionId)
      .first<{ expires_at: number; window_start: number }>();
    expect(row).not.toBeNull();
    expect(row!.expires_at - row!.window_start).toBe(MAX_DURATION_MS);
  });
});
