/**
 * The HTTP Idempotency-Key middleware (SPEC section 6) on real D1, through a real Hono app.
 * Every rejection also asserts that the downstream handler did NOT run, and round-trip budgets
 * are asserted with the counting D1 wrapper.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { idempotency, withIdempotency } from "../../../src/http/idempotency";
import { deliveredEnv } from "../../helpers/shards";
import { harness, problemOf, uniqueKey } from "./harness";

afterEach(() => vi.restoreAllMocks());

const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let entered!: () => void;
  const reached = new Promise<void>((resolve) => (entered = resolve));
  return { open, opened, entered, reached };
};

describe("admission: the key header", () => {
  it("answers 400 idempotency-key-missing when a required key is absent, without touching D1 or the handler", async () => {
    const h = harness();
    const res = await h.send({ key: null });
    expect(res.status).toBe(400);
    expect((await problemOf(res)).code).toBe("idempotency-key-missing");
    expect(h.runs).toHaveLength(0);
    expect(h.counting.roundTrips()).toBe(0);
  });

  it(
    "answers 413 payload-too-large for a body over maxBodyBytes before hashing or touching D1, with or without " + "content-length",
    async () => {
      const h = harness({ maxBodyBytes: 16 });
      const declared = await h.send({ key: uniqueKey(), body: "x".repeat(17) });
      expect(declared.status).toBe(413);
      expect((await problemOf(declared)).code).toBe("payload-too-large");
      const chunks = [new Uint8Array(10), new Uint8Array(10)];
      const streamed = await h.send({
        key: uniqueKey(),
        body: new ReadableStream<Uint8Array>({
          pull(controller) {
            const next = chunks.shift();
            if (next) controller.enqueue(next);
            else controller.close();
          },
        }),
      });
      expect(streamed.status).toBe(413);
      expect(h.runs).toHaveLength(0);
      expect(h.counting.roundTrips()).toBe(0);
      // At the bound exactly, it runs.
      expect((await h.send({ key: uniqueKey(), body: "x".repeat(16) })).status).toBe(201);
    },
  );

  it("runs the handler unguarded when the key is optional and absent", async () => {
    const h = harness({ required: false });
    expect((await h.send({ key: null })).status).toBe(201);
    expect((await h.send({ key: null })).status).toBe(201);
    expect(h.runs).toHaveLength(2);
    expect(h.counting.roundTrips()).toBe(0);
  });

  it("leaves safe methods alone even when they carry a key", async () => {
    const h = harness();
    const key = uniqueKey();
    await h.send({ key, method: "GET" });
    await h.send({ key, method: "GET" });
    expect(h.runs).toHaveLength(2);
    expect(h.counting.roundTrips()).toBe(0);
  });

  it.each([
    ["256 characters", "k".repeat(256)],
    ["a non-ASCII character", "clé-1"],
    ["an empty sf-string", '""'],
    ["an unterminated sf-string", '"abc'],
    ["text after the closing quote", '"abc"x'],
    ["an invalid escape in an sf-string", '"a\\nb"'],
    ["two keys (a list)", "a, b"],
  ])("answers 400 idempotency-key-invalid for %s, without running the handler", async (_name, key) => {
    const h = harness();
    const res = await h.send({ key });
    expect(res.status).toBe(400);
    expect((await problemOf(res)).code).toBe("idempotency-key-invalid");
    expect(h.runs).toHaveLength(0);
    expect(h.counting.roundTrips()).toBe(0);
  });

  it("accepts a 255-character printable ASCII key", async () => {
    const h = harness();
    const key = (uniqueKey("max") + "x".repeat(255)).slice(0, 255);
    expect((await h.send({ key })).status).toBe(201);
  });

  it("accepts an sf-string key with RFC 8941 parameters, ignoring them: the same key as the bare form", async () => {
    const h = harness();
    const bare = `${uniqueKey()}-a"b`;
    const first = await h.send({ key: `"${bare.replace(/"/g, '\\"')}";v=1;kind=retry;note="x;\\"y"` });
    expect(first.status).toBe(201);
    const second = await h.send({ key: bare });
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(h.runs).toHaveLength(1);
    const malformed = await h.send({ key: `"${uniqueKey()}";V=1` });
    expect(malformed.status).toBe(400);
    expect((await problemOf(malformed)).detail).toContain("parameters");
  });

  it("treats the sf-string form and the bare form as the same key", async () => {
    const h = harness();
    const bare = `${uniqueKey()}-a"b\\c`;
    const quoted = `"${bare.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
    const first = await h.send({ key: bare });
    const second = await h.send({ key: quoted });
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(await second.text()).toBe(await first.text());
    expect(h.runs).toHaveLength(1);
  });
});

describe("first execution and replay", () => {
  it("runs the handler once in 2 round trips (claim, complete), then replays in 1 round trip", async () => {
    const h = harness();
    const key = uniqueKey();
    const first = await h.send({ key });
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const firstBody = await first.text();
    expect(h.counting.roundTrips()).toBe(2);
    expect(h.counting.statements()).toBe(2);
    expect(h.counting.calls.map((c) => c.sql[0]!.trim().split(/\s+/)[0])).toEqual(["INSERT", "UPDATE"]);

    h.counting.reset();
    const replay = await h.send({ key });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(replay.headers.get("location")).toBe("/things/1");
    expect(replay.headers.get("x-not-replayed")).toBeNull();
    expect(await replay.text()).toBe(firstBody);
    expect(h.counting.roundTrips()).toBe(1);
    expect(h.counting.statements()).toBe(1);
    expect(h.runs).toHaveLength(1);
  });

  it("replays the extra headers named in replayHeaders", async () => {
    const h = harness({ replayHeaders: ["X-Not-Replayed"] });
    const key = uniqueKey();
    await h.send({ key });
    expect((await h.send({ key })).headers.get("x-not-replayed")).toBe("1");
  });

  it.each([204, 205, 304])("replays a %i response without a body", async (status) => {
    const h = harness({}, () => new Response(null, { status, headers: { etag: '"x"' } }));
    const key = uniqueKey();
    expect((await h.send({ key })).status).toBe(status);
    const replay = await h.send({ key });
    expect(replay.status).toBe(status);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toBeNull();
    expect(h.runs).toHaveLength(1);
  });

  it("stores an oversize response as a 500 sentinel: the first caller gets the full body, a replay fails loudly", async () => {
    const big = "x".repeat(20 * 1024);
    const h = harness({}, () => new Response(big, { status: 201, headers: { "content-type": "text/plain" } }));
    const key = uniqueKey();
    const first = await h.send({ key });
    expect(first.status).toBe(201);
    expect(await first.text()).toBe(big);
    const replay = await h.send({ key });
    expect(replay.status).toBe(500);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect((await problemOf(replay)).code).toBe("idempotency-response-too-large");
    expect(h.runs).toHaveLength(1);
  });

  it("stores a body of exactly maxStoredBodyBytes and replays it byte for byte", async () => {
    const bytes = new Uint8Array(64).map((_, i) => (i * 37) & 0xff);
    const h = harness(
      { maxStoredBodyBytes: 64 },
      () => new Response(bytes, { status: 200, headers: { "content-type": "application/octet-stream" } }),
    );
    const key = uniqueKey();
    await h.send({ key });
    const replay = await h.send({ key });
    expect(replay.status).toBe(200);
    expect(new Uint8Array(await replay.arrayBuffer())).toEqual(bytes);
  });
});

describe("fingerprint: the same key for a different request", () => {
  it("answers 422 idempotency-key-mismatch in 1 round trip, never runs, never replays", async () => {
    const h = harness();
    const key = uniqueKey();
    await h.send({ key, body: '{"n":1}' });
    h.counting.reset();
    const res = await h.send({ key, body: '{"n":2}' });
    expect(res.status).toBe(422);
    expect(res.headers.get("idempotent-replayed")).toBeNull();
    expect((await problemOf(res)).code).toBe("idempotency-key-mismatch");
    expect(h.counting.roundTrips()).toBe(1);
    expect(h.runs).toHaveLength(1);
    // The original is untouched and still replays.
    expect((await h.send({ key, body: '{"n":1}' })).headers.get("idempotent-replayed")).toBe("true");
  });

  it("answers 409 instead when mismatchStatus is 409", async () => {
    const h = harness({ mismatchStatus: 409 });
    const key = uniqueKey();
    await h.send({ key, body: "1" });
    const res = await h.send({ key, body: "2" });
    expect(res.status).toBe(409);
    expect((await problemOf(res)).code).toBe("idempotency-key-mismatch");
  });

  it("hashes the raw body bytes: bodies differing only in invalid UTF-8 bytes are different requests", async () => {
    const h = harness();
    const key = uniqueKey();
    // Both decode to the same text ("{\uFFFD}") — a text-based fingerprint would call them equal.
    expect(new TextDecoder().decode(new Uint8Array([0x7b, 0xff, 0x7d]))).toBe(new TextDecoder().decode(new Uint8Array([0x7b, 0xfe, 0x7d])));
    await h.send({ key, body: new Uint8Array([0x7b, 0xff, 0x7d]) });
    const res = await h.send({ key, body: new Uint8Array([0x7b, 0xfe, 0x7d]) });
    expect(res.status).toBe(422);
    expect(h.runs).toHaveLength(1);
  });

  it("does not normalise JSON: the same members in another order are a different request", async () => {
    const h = harness();
    const key = uniqueKey();
    await h.send({ key, body: '{"a":1,"b":2}' });
    expect((await h.send({ key, body: '{"b":2,"a":1}' })).status).toBe(422);
    expect((await h.send({ key, body: '{"a":1, "b":2}' })).status).toBe(422);
    expect(h.runs).toHaveLength(1);
  });

  it.each([
    ["another path", { path: "/other?a=1&b=2" }],
    ["another query value", { path: "/things?a=1&b=3" }],
    ["the same query in another order", { path: "/things?b=2&a=1" }],
    ["the same query percent-encoded differently", { path: "/things?a=%31&b=2" }],
    ["another method", { method: "PATCH" }],
    ["another content-type", { headers: { "content-type": "text/plain" } }],
  ])("treats %s as a different request", async (_name, change) => {
    const h = harness();
    const key = uniqueKey();
    await h.send({ key, path: "/things?a=1&b=2" });
    const res = await h.send({ key, path: "/things?a=1&b=2", ...change });
    expect(res.status).toBe(422);
    expect(h.runs).toHaveLength(1);
  });

  it("includes allowlisted fingerprint headers and ignores the others", async () => {
    const h = harness({ fingerprintHeaders: ["X-Mode"] });
    const key = uniqueKey();
    await h.send({ key, headers: { "x-mode": "live", "x-trace": "1" } });
    expect((await h.send({ key, headers: { "x-mode": "live", "x-trace": "2" } })).headers.get("idempotent-replayed")).toBe("true");
    expect((await h.send({ key, headers: { "x-mode": "test" } })).status).toBe(422);
    expect((await h.send({ key })).status).toBe(422);
    expect(h.runs).toHaveLength(1);
  });
});

describe("concurrency, takeover and fencing", () => {
  it("answers 409 idempotency-key-in-progress with Retry-After in 1 round trip while the first request runs", async () => {
    const g = gate();
    const h = harness({ pendingTtlMs: 30_000 }, async (c) => {
      g.entered();
      await g.opened;
      return c.json({ done: true }, 201);
    });
    const key = uniqueKey();
    const first = h.send({ key });
    await g.reached;
    h.counting.reset();
    const second = await h.send({ key });
    expect(second.status).toBe(409);
    // Not the 30 s lease: the first request is most likely done within a second.
    expect(second.headers.get("retry-after")).toBe("1");
    expect((await problemOf(second)).code).toBe("idempotency-key-in-progress");
    expect(h.counting.roundTrips()).toBe(1);
    g.open();
    expect((await first).status).toBe(201);
    expect(h.runs).toHaveLength(1);
  });

  it("advertises Retry-After as what is left of the lease, capped by maxRetryAfterSeconds, in whole seconds >= 1", async () => {
    const g = gate();
    const h = harness({ pendingTtlMs: 30_000, maxRetryAfterSeconds: 10 }, async (c) => {
      g.entered();
      await g.opened;
      return c.json({}, 201);
    });
    const key = uniqueKey();
    const first = h.send({ key });
    await g.reached;
    expect((await h.send({ key })).headers.get("retry-after")).toBe("10"); // 30 s left, capped
    h.clock.now += 27_500;
    expect((await h.send({ key })).headers.get("retry-after")).toBe("3"); // 2.5 s left, rounded up
    h.clock.now += 2_499;
    expect((await h.send({ key })).headers.get("retry-after")).toBe("1"); // 1 ms left: never 0
    g.open();
    await first;
    expect(h.runs).toHaveLength(1);
  });

  it("runs the handler exactly once for 20 concurrent requests with one key", async () => {
    const h = harness({}, async (c, run) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return c.json({ run }, 201);
    });
    const key = uniqueKey();
    const responses = await Promise.all(Array.from({ length: 20 }, () => h.send({ key })));
    expect(h.runs).toHaveLength(1);
    const executed = responses.filter((r) => r.status === 201 && r.headers.get("idempotent-replayed") === null);
    const replayed = responses.filter((r) => r.status === 201 && r.headers.get("idempotent-replayed") === "true");
    const inProgress = responses.filter((r) => r.status === 409);
    expect(executed).toHaveLength(1);
    expect(replayed.length + inProgress.length).toBe(19);
    for (const r of inProgress) expect((await problemOf(r)).code).toBe("idempotency-key-in-progress");
    for (const r of replayed) expect(await r.json()).toEqual({ run: 1 });
  });

  it("takes over a stale reservation (generation 2) and fences out the original owner's late completion", async () => {
    const g = gate();
    const h = harness({ pendingTtlMs: 5_000 }, async (c, run) => {
      if (run === 1) {
        g.entered();
        await g.opened;
      }
      return c.json({ run }, 201);
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const key = uniqueKey();
    const original = h.send({ key });
    await g.reached;

    // The original owner looks dead: its lease expires.
    h.clock.now += 5_000;
    h.counting.reset();
    const takeover = await h.send({ key });
    expect(takeover.status).toBe(201);
    expect(await takeover.json()).toEqual({ run: 2 });
    expect(h.counting.roundTrips()).toBe(2); // the claim statement took over; then complete
    const row = await env.DB.prepare("SELECT generation, status FROM idempotency_keys WHERE idem_key = ?").bind(key).first();
    expect(row).toEqual({ generation: 2, status: "completed" });

    // The zombie finishes: its caller still gets its own response, but the row is not overwritten.
    g.open();
    const late = await original;
    expect(late.status).toBe(201);
    expect(await late.json()).toEqual({ run: 1 });
    expect(errors.mock.calls.some((args) => String(args[0]).includes("FENCED OUT"))).toBe(true);
    const replay = await h.send({ key });
    expect(await replay.json()).toEqual({ run: 2 });
    expect(h.runs).toHaveLength(2);
  });

  it("fences out the original owner's completion while the new owner is still running, then stores the new owner's", async () => {
    const gates = [gate(), gate()];
    const h = harness({ pendingTtlMs: 5_000 }, async (c, run) => {
      gates[run - 1]!.entered();
      await gates[run - 1]!.opened;
      return c.json({ run }, 201);
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const key = uniqueKey();
    const original = h.send({ key });
    await gates[0]!.reached;
    h.clock.now += 5_000;
    const takeover = h.send({ key });
    await gates[1]!.reached;

    // The zombie (generation 1) completes first, while the row is pending under generation 2.
    gates[0]!.open();
    expect(await (await original).json()).toEqual({ run: 1 });
    expect(errors.mock.calls.some((args) => String(args[0]).includes("FENCED OUT"))).toBe(true);
    const row = await env.DB.prepare("SELECT generation, status FROM idempotency_keys WHERE idem_key = ?").bind(key).first();
    expect(row).toEqual({ generation: 2, status: "pending" });

    gates[1]!.open();
    expect(await (await takeover).json()).toEqual({ run: 2 });
    expect(await (await h.send({ key })).json()).toEqual({ run: 2 });
  });

  it("does not take over a stale reservation for a different request (mismatch instead)", async () => {
    const g = gate();
    const h = harness({ pendingTtlMs: 5_000 }, async (c) => {
      g.entered();
      await g.opened;
      return c.json({}, 201);
    });
    vi.spyOn(console, "error").mockImplementation(() => {});
    const key = uniqueKey();
    const original = h.send({ key, body: "1" });
    await g.reached;
    h.clock.now += 60_000;
    expect((await h.send({ key, body: "2" })).status).toBe(422);
    g.open();
    await original;
    expect(h.runs).toHaveLength(1);
  });
});

/** The first send fails with 500 and leaves no reservation behind; the retry of the same key runs the handler again. */
async function expectReleasedThenRetryRuns(h: ReturnType<typeof harness>): Promise<void> {
  vi.spyOn(console, "error").mockImplementation(() => {});
  const key = uniqueKey();
  expect((await h.send({ key })).status).toBe(500);
  expect(await env.DB.prepare("SELECT 1 FROM idempotency_keys WHERE idem_key = ?").bind(key).first()).toBeNull();
  const retry = await h.send({ key });
  expect(retry.status).toBe(201);
  expect(await retry.json()).toEqual({ run: 2 });
}

describe("release: a handler that does not produce a storable result", () => {
  it("releases the reservation when the handler throws, so a retry runs", async () => {
    const h = harness({}, (c, run) => {
      if (run === 1) throw new Error("boom");
      return c.json({ run }, 201);
    });
    await expectReleasedThenRetryRuns(h);
  });

  it("releases the reservation when the response body cannot be read (its stream errors mid-way), so a retry runs", async () => {
    const h = harness({}, (c, run) => {
      if (run > 1) return c.json({ run }, 201);
      let sent = false;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent) return controller.error(new Error("upstream connection reset"));
          sent = true;
          controller.enqueue(new TextEncoder().encode('{"partial":'));
        },
      });
      return new Response(body, { status: 201, headers: { "content-type": "application/json" } });
    });
    await expectReleasedThenRetryRuns(h);
  });

  it("releases instead of storing when shouldStore declines the response", async () => {
    const h = harness({ shouldStore: (r) => r.status !== 207 }, (c, run) => c.json({ run }, run === 1 ? 207 : 201));
    const key = uniqueKey();
    expect((await h.send({ key })).status).toBe(207);
    const retry = await h.send({ key });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(h.runs).toHaveLength(2);
  });
});

describe("scope: the server-derived principal", () => {
  it("keeps two workspaces with the same key independent in every direction", async () => {
    const h = harness();
    const key = uniqueKey();
    const dev = await h.send({ key, body: '{"who":"dev"}' });
    // Another workspace, same key, different body: not a mismatch, not a replay — it runs.
    const other = await h.send({ key, body: '{"who":"other"}', token: "other-token" });
    expect(dev.status).toBe(201);
    expect(other.status).toBe(201);
    expect(other.headers.get("idempotent-replayed")).toBeNull();
    // Each replays its own result.
    expect(await (await h.send({ key, body: '{"who":"dev"}' })).json()).toMatchObject({ body: '{"who":"dev"}' });
    expect(await (await h.send({ key, body: '{"who":"other"}', token: "other-token" })).json()).toMatchObject({ body: '{"who":"other"}' });
    expect(h.runs.map((r) => r.workspace)).toEqual(["dev", "other"]);
  });

  it("`database` gets the principal, so rows go to the principal's database; a one-argument `database` still works", async () => {
    // Two databases, one per principal (SPEC section 13: the shard of the workspace).
    const real = deliveredEnv(env);
    const asked: string[] = [];
    const byPrincipal = harness({
      database: (_env: unknown, principal: string) => {
        asked.push(principal);
        return principal === "other" ? real.DB_1 : real.DB;
      },
    });
    const key = uniqueKey();
    expect((await byPrincipal.send({ key })).status).toBe(201);
    expect((await byPrincipal.send({ key, token: "other-token" })).status).toBe(201);
    expect(asked).toEqual(["dev", "other"]);
    const rows = (db: D1Database, principal: string) =>
      db.prepare("SELECT count(*) AS n FROM idempotency_keys WHERE principal = ?1 AND idem_key = ?2").bind(principal, key).first("n");
    expect([await rows(real.DB, "dev"), await rows(real.DB_1, "dev")]).toEqual([1, 0]);
    expect([await rows(real.DB, "other"), await rows(real.DB_1, "other")]).toEqual([0, 1]);
    // Today's callers pass `(env) => db`: unchanged.
    const oneArgument = harness({ database: () => env.DB });
    expect((await oneArgument.send({ key: uniqueKey() })).status).toBe(201);
  });

  it("ignores any client-sent principal header", async () => {
    const h = harness();
    const key = uniqueKey();
    await h.send({ key, body: "1" });
    const res = await h.send({ key, body: "2", headers: { "x-principal": "other", "x-workspace": "other" } });
    expect(res.status).toBe(422);
  });
});

describe("withIdempotency (framework-free)", () => {
  const handle = async (request: Request, runs: string[]) => {
    runs.push(await request.text());
    if (request.headers.get("x-fail")) throw new Error("handler failed");
    return new Response(JSON.stringify({ n: runs.length }), { status: 201, headers: { "content-type": "application/json" } });
  };
  const call = async (
    fetcher: (r: Request, e: Env, c: ExecutionContext) => Promise<Response>,
    key: string,
    headers: Record<string, string> = {},
  ) => {
    const ctx = createExecutionContext();
    const res = await fetcher(
      new Request("http://x.test/pay", { method: "POST", body: "amount=5", headers: { "idempotency-key": key, ...headers } }),
      env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return res;
  };

  it("guards a plain fetch handler: runs once, replays, and hands the handler the body bytes", async () => {
    const runs: string[] = [];
    const fetcher = withIdempotency<Env>((r) => handle(r, runs), { principal: () => "tenant-1" });
    const key = uniqueKey("wrap");
    expect((await call(fetcher, key)).status).toBe(201);
    const replay = await call(fetcher, key);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(runs).toEqual(["amount=5"]);
  });

  it("releases and rethrows when the handler throws", async () => {
    const runs: string[] = [];
    const fetcher = withIdempotency<Env>((r) => handle(r, runs), { principal: () => "tenant-2" });
    const key = uniqueKey("wrap");
    await expect(call(fetcher, key, { "x-fail": "1" })).rejects.toThrow("handler failed");
    expect(await env.DB.prepare("SELECT 1 FROM idempotency_keys WHERE idem_key = ?").bind(key).first()).toBeNull();
  });
});

describe("options are validated when the factory runs", () => {
  const principal = () => "p";
  it.each([
    ["no principal function", {}],
    ["a mismatch status other than 422/409", { principal, mismatchStatus: 400 }],
    ["retention not longer than the pending TTL", { principal, retentionMs: 1000, pendingTtlMs: 1000 }],
    ["a zero stored-body bound", { principal, maxStoredBodyBytes: 0 }],
    ["an invalid header name", { principal, fingerprintHeaders: ["bad header"] }],
    ["a non-integer TTL", { principal, pendingTtlMs: 1.5 }],
  ])("throws for %s", (_name, options) => {
    expect(() => idempotency(options as never)).toThrow(TypeError);
    expect(() => withIdempotency(() => new Response(), options as never)).toThrow(TypeError);
  });
});
