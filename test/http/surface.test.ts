/**
 * The `/v1` surface before any route runs: secure by default (no token in wrangler.toml; a Worker
 * without API_TOKENS serves no /v1 route, whatever token it is sent), a misspelt query parameter
 * refused with the ones the route reads (400 `query-parameter-unknown`), and a method a known path
 * does not serve answered 405 `method-not-allowed` with `Allow`.
 */
import { SELF, createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import wranglerToml from "../../wrangler.toml?raw";
import worker from "../../src/index";

const BASE = "http://idemflow.test";
const DEV = { authorization: "Bearer dev-token" };

/** The `[vars]` section's names and the `[secrets] required` list of wrangler.toml. */
function deployConfig(): { vars: Map<string, string>; required: string[] } {
  const section = (name: string) => wranglerToml.split(/^\[/m).find((part) => part.startsWith(`${name}]`)) ?? "";
  const vars = new Map<string, string>();
  for (const m of section("vars").matchAll(/^([A-Z_][A-Z0-9_]*)\s*=\s*"([^"]*)"/gm)) vars.set(m[1]!, m[2]!);
  const required = /required\s*=\s*\[([^\]]*)\]/.exec(section("secrets"))?.[1] ?? "";
  return { vars, required: [...required.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) };
}

/** The Worker as `wrangler deploy` of wrangler.toml alone would run it: its [vars], no secret set. */
async function deployed(path: string, init: RequestInit = {}): Promise<Response> {
  const { vars, required } = deployConfig();
  const shaped: Record<string, unknown> = { ...env, ...Object.fromEntries(vars) };
  for (const name of required) delete shaped[name];
  const ctx = createExecutionContext();
  const response = await worker.fetch!(new Request(`${BASE}${path}`, init) as never, shaped as unknown as Env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

afterEach(() => vi.restoreAllMocks());

describe("secure by default", () => {
  it("wrangler.toml holds no token: API_TOKENS and OPERATOR_TOKENS are required secrets, never [vars]", () => {
    const { vars, required } = deployConfig();
    expect(vars.size).toBeGreaterThan(10); // the parse found the section
    expect([...vars.keys()]).not.toContain("API_TOKENS");
    expect([...vars.keys()]).not.toContain("OPERATOR_TOKENS");
    expect(required).toEqual(expect.arrayContaining(["API_TOKENS", "OPERATOR_TOKENS"]));
    // No value anywhere in the file (any section, any environment) carries a local token.
    expect(wranglerToml).not.toMatch(/=\s*"[^"\n]*(dev-token|other-token|operator-token)/);
  });

  it("a deploy-shaped config answers nothing with the dev token: every /v1 route 503 tokens-not-configured, logged", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    for (const [method, path] of [
      ["GET", "/v1/workflows"],
      ["GET", "/v1/executions"],
      ["POST", "/v1/workflows/order-fulfilment/trigger"],
      ["GET", "/v1/operator/storage"],
    ] as const) {
      for (const authorization of ["Bearer dev-token", "Bearer operator-token", "Bearer other-token"]) {
        const response = await deployed(path, {
          method,
          headers: { authorization, "content-type": "application/json" },
          body: method === "POST" ? "{}" : undefined,
        });
        expect(response.status, `${method} ${path}`).toBe(503);
        expect(response.headers.get("content-type")).toBe("application/problem+json");
        const problem = await response.json<{ code: string; detail: string }>();
        expect(problem.code).toBe("tokens-not-configured");
        expect(problem.detail).toContain("wrangler secret put API_TOKENS");
      }
    }
    const lines = logged.mock.calls.map(([line]) => JSON.parse(String(line)) as { event: string });
    // One clear line per isolate and value, not one per request.
    expect(lines.filter((line) => line.event === "config.tokens_missing")).toHaveLength(1);
    // The public document and /health still answer: they hold no data.
    expect((await deployed("/v1/openapi.json")).status).toBe(200);
    expect((await deployed("/health")).status).toBe(200);
  });

  it("an API_TOKENS without a single token:workspace pair counts as unset", async () => {
    const ctx = createExecutionContext();
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const response = await worker.fetch!(
      new Request(`${BASE}/v1/workflows`, { headers: DEV }) as never,
      { ...env, API_TOKENS: " , :dev," } as unknown as Env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(503);
  });

  it("with the tokens set (the test secrets, as .dev.vars gives them locally) the same request is served", async () => {
    expect((await SELF.fetch(`${BASE}/v1/workflows`, { headers: DEV })).status).toBe(200);
  });
});

describe("unknown query parameters on /v1", () => {
  const get = (path: string) => SELF.fetch(`${BASE}${path}`, { headers: DEV });

  it("refuses a misspelt filter with 400 query-parameter-unknown, listing the ones the route reads", async () => {
    const response = await get("/v1/executions?staus=FAILED");
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    const problem = await response.json<{ code: string; unknown: string[]; known: string[]; detail: string }>();
    expect(problem.code).toBe("query-parameter-unknown");
    expect(problem.unknown).toEqual(["staus"]);
    expect(problem.known).toContain("status");
    expect(problem.known).toContain("destinationKey");
    expect(problem.detail).toContain("staus");
    // Spelt right, the same filter is read.
    expect((await get("/v1/executions?status=FAILED")).status).toBe(200);
  });

  it("refuses any parameter on a route that reads none, and on every /v1 route the same way", async () => {
    for (const path of [
      "/v1/event-sources?x=1",
      "/v1/secrets?limit=5",
      "/v1/workflows/nope?versoin=abc",
      "/v1/stats?sinec=2026-01-01T00:00:00Z",
      "/v1/waits?event=e&lmit=2",
      "/v1/openapi.json?format=yaml",
    ]) {
      const response = await get(path);
      expect(response.status, path).toBe(400);
      expect((await response.json<{ code: string }>()).code, path).toBe("query-parameter-unknown");
    }
    const none = await (await get("/v1/secrets?limit=5")).json<{ known: string[]; detail: string }>();
    expect(none.known).toEqual([]);
    expect(none.detail).toContain("takes no query parameter");
  });

  it("keeps the trigger's own parameters: clientIdempotencyId is read, forceNewExecution keeps its precise refusal", async () => {
    const trigger = (query: string) =>
      SELF.fetch(`${BASE}/v1/workflows/no-such-workflow/trigger${query}`, {
        method: "POST",
        headers: { ...DEV, "content-type": "application/json" },
        body: "{}",
      });
    expect((await (await trigger("?clientIdempotencyId=abc")).json<{ code: string }>()).code).toBe("not-found");
    const force = await trigger("?forceNewExecution=true");
    expect((await force.json<{ code: string }>()).code).not.toBe("query-parameter-unknown");
    const typo = await trigger("?clientIdempotencyID=abc");
    expect(typo.status).toBe(400);
    expect(await typo.json()).toMatchObject({ code: "query-parameter-unknown", known: ["clientIdempotencyId"] });
  });

  it("leaves the public /hooks and /events routes alone: providers append their own parameters", async () => {
    for (const path of ["/hooks/dev/some-flow?utm_source=x", "/events/dev/payments?attempt=2"]) {
      const response = await SELF.fetch(`${BASE}${path}`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
      expect((await response.json<{ code: string }>()).code, path).not.toBe("query-parameter-unknown");
    }
  });
});

describe("a method a /v1 path does not serve", () => {
  it("answers 405 method-not-allowed with Allow, for a known path", async () => {
    const response = await SELF.fetch(`${BASE}/v1/workflows/orders`, { method: "DELETE", headers: DEV });
    expect(response.status).toBe(405);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(response.headers.get("allow")).toBe("PUT, GET, HEAD");
    expect(await response.json()).toMatchObject({ code: "method-not-allowed", allowed: ["PUT", "GET", "HEAD"] });
    const list = await SELF.fetch(`${BASE}/v1/executions`, { method: "POST", headers: DEV });
    expect(list.status).toBe(405);
    expect(list.headers.get("allow")).toBe("GET, HEAD");
    const trigger = await SELF.fetch(`${BASE}/v1/workflows/orders/trigger`, { method: "GET", headers: DEV });
    expect(trigger.status).toBe(405);
    expect(trigger.headers.get("allow")).toBe("POST");
  });

  it("still answers 404 route-not-found for a path no route has", async () => {
    const response = await SELF.fetch(`${BASE}/v1/nothing-here`, { method: "DELETE", headers: DEV });
    expect(response.status).toBe(404);
    expect((await response.json<{ code: string }>()).code).toBe("route-not-found");
  });
});
