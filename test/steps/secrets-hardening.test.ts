import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { readTrace } from "../../src/steps/trace";
import { chargeWorkflow, DEST, dumpEveryTable, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-secrets-hardening";

beforeEach(() => {
  for (const level of ["warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

function echoWorkflow(headers: Record<string, string>): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "echo", type: "GATEWAY", config: { method: "POST", url: `${DEST}/echo`, headers } },
    ],
    edges: [{ from: "entry", to: "echo" }],
  } as WorkflowDefinitionInput;
}

describe("secrets are resolved only where the definition names them", () => {
  it(
    "a payload carrying {{ secrets.NAME }} is sent as literal text — in a header expression and in the key — never as the " + "secret",
    async () => {
      const h = harness();
      const wf = await seedWorkflow(WS, echoWorkflow({ "X-Ref": "= payload.ref", "Idempotency-Key": "= payload.ref" }));
      const injected = "{{ secrets.PAYMENTS_KEY }}";
      const id = await h.start(wf, { ref: injected });
      await h.drain();
      expect((await stepsOf(id)).echo!.state).toBe("COMPLETED");
      expect(h.dest.requests).toHaveLength(1);
      const sent = h.dest.requests[0]!.headers;
      expect(JSON.stringify(sent)).not.toContain(env.PAYMENTS_KEY);
      expect(sent["x-ref"]).toBe(injected);
      expect(sent["idempotency-key"]).toBe(injected);
    },
  );

  it("{{ secrets.API_TOKENS }} (idemflow's own credentials) fails the step, and nothing is sent", async () => {
    expect(typeof env.API_TOKENS).toBe("string");
    const h = harness();
    const wf = await seedWorkflow(WS, echoWorkflow({ Authorization: "Bearer {{ secrets.API_TOKENS }}" }));
    const id = await h.start(wf, {});
    await h.drain();
    const echo = (await stepsOf(id)).echo!;
    expect(echo.state).toBe("FAILED");
    expect(echo.error).toMatch(/idemflow's own credential/);
    expect(h.dest.requests).toHaveLength(0);
  });
});

describe("secrets echoed by a destination are scrubbed from the stored output", () => {
  it("a secret that JSON would escape (a quote, a backslash) is still scrubbed", async () => {
    const secret = 'sk_"quoted\\canary_91c2';
    const h = harness({ env: { ...env, PAYMENTS_KEY: secret } });
    const wf = await seedWorkflow(WS, echoWorkflow({ Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" }));
    const id = await h.start(wf, {});
    await h.drain();
    const echo = (await stepsOf(id)).echo!;
    expect(echo.state).toBe("COMPLETED");
    expect(h.dest.requests[0]!.headers.authorization).toBe(`Bearer ${secret}`);
    expect(JSON.parse(echo.output!).body.headers.authorization).toBe("Bearer [redacted]");
    const dump = await dumpEveryTable();
    expect(dump).not.toContain("quoted");
  });

  it("a short secret that also appears as a number in the response does not corrupt the output (the step completes)", async () => {
    const h = harness({ env: { ...env, TAG_SECRET: "200" } as Env });
    const wf = await seedWorkflow(WS, echoWorkflow({ "X-Tag": "{{ secrets.TAG_SECRET }}" }));
    const id = await h.start(wf, {});
    await h.drain(5);
    const echo = (await stepsOf(id)).echo!;
    expect(echo.state).toBe("COMPLETED");
    const output = JSON.parse(echo.output!);
    expect(output.status).toBe(200);
    expect(output.body.headers["x-tag"]).toBe("[redacted]");
  });
});

describe("a network error that quotes a secret", () => {
  it(
    "is scrubbed before it is stored: the step's error, its attempt events, the trace and the logs show [redacted], never the " + "secret",
    async () => {
      const canary = env.PAYMENTS_KEY;
      const logged: unknown[][] = [];
      for (const level of ["warn", "error"] as const) vi.spyOn(console, level).mockImplementation((...args) => void logged.push(args));
      const h = harness({
        // A network layer that echoes the request it failed to send, Authorization header included.
        fetch: async (input, init) => {
          throw new TypeError(
            `connection reset while sending authorization=${new Request(input, init).headers.get("authorization")} (${canary})`,
          );
        },
      });
      const wf = await seedWorkflow(
        WS,
        chargeWorkflow(unique("wf"), { retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 10, maxDelayMs: 10 } }),
      );
      const id = await h.start(wf, { order: { id: unique("N"), total: 1 } });
      await h.drain();
      const charge = (await stepsOf(id)).charge!;
      expect(charge.state).toBe("FAILED");
      expect(charge.error).toMatch(
        /gave up after 2 attempt\(s\): .*network error: connection reset while sending authorization=Bearer \[redacted\] \(\[redacted\]\)/,
      );
      const trace = (await readTrace(env.DB, WS, id))!;
      const events = trace.steps.find((s) => s.vertexId === "charge")!.events.filter((e) => e.type === "attempt_failed");
      expect(events).toHaveLength(1);
      expect(events[0]!.detail).toMatch(/attempt 1: .*network error: .*Bearer \[redacted\]/);
      expect(JSON.stringify(trace)).not.toContain(canary);
      expect(await dumpEveryTable()).not.toContain(canary);
      expect(JSON.stringify(logged)).toContain("[redacted]");
      expect(JSON.stringify(logged)).not.toContain(canary);
    },
  );
});

describe("Gateway URLs", () => {
  it("a URL carrying user:password@ fails the step before sending, and the credentials are not stored", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "echo", type: "GATEWAY", config: { method: "POST", url: "http://alice:pw-9f3e@localhost:8788/echo" } },
      ],
      edges: [{ from: "entry", to: "echo" }],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    await h.drain();
    const echo = (await stepsOf(id)).echo!;
    expect(echo.state).toBe("FAILED");
    expect(echo.error).toMatch(/carries credentials/);
    expect(h.dest.requests).toHaveLength(0);
    expect(JSON.stringify(await env.DB.prepare("SELECT * FROM steps WHERE execution_id = ?1").bind(id).all())).not.toContain("pw-9f3e");
  });

  it("the allowlist compares the parsed host and port: userinfo tricks, other ports, IPv6 and mapped forms are refused", async () => {
    const { isAllowed } = await import("../../src/lib/allowlist");
    const spec = "localhost:8788,127.0.0.1:8788";
    expect(isAllowed(new URL("http://localhost:8788/x"), spec)).toBe(true);
    for (const u of [
      "http://localhost:8788@evil.example/x",
      "http://localhost:8789/x",
      "http://localhost/x",
      "https://localhost/x",
      "http://[::1]:8788/x",
      "http://[::ffff:127.0.0.1]:8788/x",
      "http://localhost.:8788/x",
      "http://evil.example#@localhost:8788/x",
    ]) {
      expect([u, isAllowed(new URL(u), spec)]).toEqual([u, false]);
    }
  });
});
