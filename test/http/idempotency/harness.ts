/**
 * A test app around the real middleware and real D1: a Hono app with real auth
 * (`dev-token` → `dev`, `other-token` → `other`), a handler that counts its runs, and a clock
 * the test moves. Nothing of the ledger is stubbed.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { Hono, type Context } from "hono";
import { expect } from "vitest";
import { requireWorkspace, type AppEnv } from "../../../src/http/auth";
import { idempotency, principalFromContext, type IdempotencyOptions } from "../../../src/http/idempotency";
import { ProblemError } from "../../../src/lib/problem";
import { commonProblems } from "../../../src/lib/common-problems";
import { countingD1 } from "../../helpers/counting-d1";

export type Handler = (c: Context<AppEnv>, run: number) => Response | Promise<Response>;

export function harness(options: Partial<IdempotencyOptions> = {}, handler?: Handler) {
  const clock = { now: 1_700_000_000_000 };
  const counting = countingD1(env.DB);
  const runs: Array<{ body: string; workspace: string }> = [];
  const app = new Hono<AppEnv>();
  app.onError((error) => (error instanceof ProblemError ? error : commonProblems.internal()).toResponse());
  app.use("*", requireWorkspace);
  app.all(
    "*",
    idempotency({ principal: principalFromContext("workspace"), database: () => counting.db, now: () => clock.now, ...options }),
    async (c) => {
      const body = await c.req.text();
      runs.push({ body, workspace: c.get("workspace") });
      if (handler) return handler(c, runs.length);
      return c.json({ run: runs.length, body }, 201, { location: `/things/${runs.length}`, "x-not-replayed": "1" });
    },
  );

  /** Sends a request and waits for everything it scheduled with waitUntil. */
  async function send(
    init: {
      key?: string | null;
      method?: string;
      path?: string;
      body?: BodyInit | null;
      headers?: Record<string, string>;
      token?: string;
    } = {},
  ) {
    const headers = new Headers({
      authorization: `Bearer ${init.token ?? "dev-token"}`,
      "content-type": "application/json",
      ...init.headers,
    });
    if (init.key !== null && init.key !== undefined) headers.set("idempotency-key", init.key);
    const method = init.method ?? "POST";
    const request = new Request(`http://idemflow.test${init.path ?? "/things"}`, {
      method,
      headers,
      body: method === "GET" || method === "HEAD" ? null : init.body === undefined ? '{"n":1}' : init.body,
    });
    const ctx = createExecutionContext();
    const response = await app.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    return response;
  }

  return { app, clock, counting, runs, send };
}

let n = 0;
/** A key no other test in the file uses (storage is per file, not per test). */
export const uniqueKey = (label = "k") => `${label}-${++n}-${crypto.randomUUID()}`;

export async function problemOf(response: Response) {
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  const problem = (await response.json()) as { type: string; code: string; status: number; detail?: string };
  expect(problem.type).toBe(`urn:idemflow:problem:${problem.code}`);
  expect(problem.status).toBe(response.status);
  return problem;
}
