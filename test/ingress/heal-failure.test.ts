/**
 * The opportunistic reap after a trigger never delays or fails the answer. Its own file: the
 * reaper's throttle is per isolate and every test file gets a fresh one.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import worker from "../../src/index";
import { BASE, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";

/** `worker.fetch` takes a request as the runtime delivers it (with incoming `cf` properties). */
type IncomingRequest = Request<unknown, IncomingRequestCfProperties>;

describe("the reap after a trigger", () => {
  it("runs after the answer: a stalled, then failing, sweep neither holds nor fails the 202", async () => {
    // The real D1, except that the reaper's first sweep hangs until released, then fails.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reaperAsked = false;
    const db = {
      prepare: (sql: string) => {
        if (sql.includes("'lease_expired'")) reaperAsked = true;
        return env.DB.prepare(sql);
      },
      batch: async (statements: D1PreparedStatement[]) => {
        if (reaperAsked) {
          await gate;
          throw new Error("D1 unavailable (injected)");
        }
        return env.DB.batch(statements);
      },
      exec: (sql: string) => env.DB.exec(sql),
      dump: () => env.DB.dump(),
      withSession: (constraint?: string) => env.DB.withSession(constraint),
    } as unknown as D1Database;
    const id = unique("healfail");
    await seedWorkflow("dev", transformWorkflow(id));
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const ctx = createExecutionContext();
      const res = await worker.fetch(
        jsonRequest(`${BASE}/v1/workflows/${id}/trigger`, { n: 1 }, { token: "dev-token" }) as IncomingRequest,
        { ...env, DB: db } as Env,
        ctx,
      );
      // The answer is complete while the sweep is still stuck.
      expect(reaperAsked).toBe(true);
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ deduplicated: false, identity: "content" });
      release();
      await waitOnExecutionContext(ctx);
      expect(errors.mock.calls.map((args) => args.map(String).join(" ")).join("\n")).toContain("opportunistic reap failed");
    } finally {
      errors.mockRestore();
    }
  });
});
