import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";

describe("migrations", () => {
  it("create every table", async () => {
    const { results } = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all<{ name: string }>();
    const names = results.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(["executions", "steps", "step_events"]));
  });
});
