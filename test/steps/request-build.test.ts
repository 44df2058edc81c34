/**
 * Requests that cannot be built (SPEC section 5): an evaluated header value with CR/LF, NUL or
 * characters outside ISO-8859-1, a URL that is not http(s), a body that is not JSON. Each fails
 * the step at its first attempt with a clear error naming the header (never the value) — not a
 * throw, which would read as a worker crash and be re-run until the crash allowance ran out.
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { buildRequest } from "../../src/steps/gateway";
import { checkUrl } from "../../src/steps/gateway/evaluate";
import { summariseRequest } from "../../src/steps/gateway/request";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-request-build";

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});

async function runWith(charge: Record<string, unknown>, payload: Record<string, unknown>) {
  const h = harness({ leaseMs: 5_000 });
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf"), charge));
  const id = await h.start(wf, { order: { id: unique("O"), total: 1 }, ...payload });
  const rounds = await h.drain(50);
  const step = (await stepsOf(id)).charge!;
  const { results: events } = await env.DB.prepare("SELECT type FROM step_events WHERE execution_id = ?1").bind(id).all<{ type: string }>();
  return { h, id, step, rounds, events: events.map((e) => e.type) };
}

/** FAILED at the first attempt, nothing sent, no retry and no takeover: not a crash loop. */
async function expectFailedAtOnce(r: Awaited<ReturnType<typeof runWith>>, error: RegExp): Promise<void> {
  expect(r.step.state).toBe("FAILED");
  expect(r.step.attempt).toBe(1);
  expect(r.step.error).toMatch(error);
  expect(r.step.error).not.toMatch(/crashed|without settling/);
  expect(r.rounds).toBe(1);
  expect(r.events).toEqual([]);
  expect(r.h.dest.requests).toHaveLength(0);
  expect(await executionStatus(r.id)).toBe("FAILED");
}

describe("an evaluated header value that a header cannot carry", () => {
  const note = { headers: { "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)", "X-Order-Note": "= payload.note" } };

  it("CR/LF (header injection) → FAILED at once, naming the header and not the value", async () => {
    const r = await runWith(note, { note: "gift\r\nX-Injected: yes" });
    await expectFailedAtOnce(
      r,
      /gateway charge: the value of header X-Order-Note contains CR or LF, which an HTTP header cannot carry; .*not sent, not retried/,
    );
    expect(r.step.error).not.toContain("Injected");
  });

  it("a lone LF, a NUL or another control character → FAILED at once", async () => {
    for (const [value, why] of [
      ["a\nb", /contains CR or LF/],
      ["a\u0000b", /contains a control character/],
      ["a\u001bb", /contains a control character/],
    ] as const) {
      await expectFailedAtOnce(await runWith(note, { note: value }), why);
    }
  });

  it("characters outside ISO-8859-1, or any non-ASCII (workerd would send it as UTF-8) → FAILED at once", async () => {
    for (const value of ["名前", "Zoë"]) {
      const r = await runWith(note, { note: value });
      await expectFailedAtOnce(r, /the value of header X-Order-Note contains non-ASCII characters/);
      expect(r.step.error).not.toContain(value);
    }
  });

  it("printable ASCII with spaces and a tab is sent as is", async () => {
    const r = await runWith(note, { note: "gift wrap,\tplease (#42)" });
    expect(r.step.state).toBe("COMPLETED");
    expect(r.h.dest.requests).toHaveLength(1);
    expect(r.h.dest.requests[0]!.headers["x-order-note"]).toBe("gift wrap,\tplease (#42)");
  });

  it("a header whose value is a secret is checked too, and the error names only the header", async () => {
    // The literal text around the secret is the definition's; a control character in it fails the same way.
    const r = await runWith(
      {
        headers: {
          "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)",
          Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}\u0007",
        },
      },
      {},
    );
    await expectFailedAtOnce(r, /the value of header Authorization contains a control character/);
    expect(r.step.error).not.toContain("sk_test_canary");
  });
});

describe("a URL or a body that cannot be sent", () => {
  it("a URL from the payload that is not http(s) → FAILED at once, not retried as a network error", async () => {
    for (const target of ["ftp://localhost:8788/payments/charges", "javascript:alert(1)"]) {
      const r = await runWith({ url: "= payload.target" }, { target });
      await expectFailedAtOnce(r, /is not http\(s\); a Gateway step only calls http:\/\/ or https:\/\/ URLs/);
    }
  });

  it("a URL from the payload that does not parse → FAILED at once", async () => {
    const r = await runWith({ url: "= payload.target" }, { target: "http://localhost:99999/x" });
    await expectFailedAtOnce(r, /is not an absolute URL/);
  });

  it("the request builder answers a reason, never throws: an invalid header name, a body that is not JSON", () => {
    // Not reachable from a payload today (header names are schema-checked, evaluated bodies are
    // normalised to JSON), but a throw here would be a crash loop, so the builder guards them too.
    const url = new URL("http://localhost:8788/payments/charges");
    expect(buildRequest(url, "POST", { "bad name": "x" }, undefined)).toEqual({
      error: expect.stringMatching(/header name "bad name" is not a valid HTTP header name/),
    });
    expect(buildRequest(url, "POST", {}, () => 1)).toEqual({ error: "the body evaluated to function, which is not JSON" });
    expect(buildRequest(url, "POST", {}, { n: 10n })).toEqual({
      error: expect.stringMatching(/^the request could not be built: .*BigInt/),
    });
    const ok = buildRequest(url, "POST", { "X-A": "b" }, { a: 1 });
    expect("request" in ok && ok.request.headers.get("content-type")).toBe("application/json");
  });
});

describe("the pure parts of building a request", () => {
  const url = new URL("http://localhost:8788/payments/charges?x=1");

  it(
    "buildRequest: a string body is text/plain, any other value JSON, a configured content type wins; redirects are not " + "followed",
    async () => {
      const text = buildRequest(url, "POST", {}, "hello");
      expect("request" in text && text.request.headers.get("content-type")).toBe("text/plain; charset=utf-8");
      expect("request" in text && (await text.request.text())).toBe("hello");
      const json = buildRequest(url, "PUT", { "Content-Type": "application/vnd.api+json" }, [1, "a"]);
      expect("request" in json && json.request.headers.get("content-type")).toBe("application/vnd.api+json");
      expect("request" in json && (await json.request.text())).toBe('[1,"a"]');
      const get = buildRequest(url, "GET", { "X-A": "b\tc d" }, undefined);
      expect("request" in get && [get.request.method, get.request.url, get.request.redirect, get.request.body]).toEqual([
        "GET",
        url.toString(),
        "manual",
        null,
      ]);
      expect("request" in get && get.request.headers.get("content-type")).toBeNull();
    },
  );

  it.each([
    ["http://localhost:8788/a", { url: new URL("http://localhost:8788/a") }],
    ["https://api.example.com", { url: new URL("https://api.example.com/") }],
    ["/relative", { error: 'url "/relative" is not an absolute URL' }],
    ["ftp://h.test/f", { error: "url ftp://h.test/f is not http(s); a Gateway step only calls http:// or https:// URLs" }],
    [
      "https://user:pw@h.test/p",
      { error: "url h.test/p carries credentials (user:password@); send them in a header with {{ secrets.NAME }} instead" },
    ],
  ])("checkUrl(%j)", (raw, expected) => {
    expect(checkUrl(raw)).toEqual(expected);
  });

  it("summariseRequest: redacted headers as given, the body kept when small, named when not", () => {
    const headers = { Authorization: "Bearer [redacted]" };
    expect(summariseRequest("GET", url, headers, undefined)).toEqual({ method: "GET", url: url.toString(), headers });
    expect(summariseRequest("POST", url, headers, { a: 1 })).toMatchObject({ body: { a: 1 } });
    expect(summariseRequest("POST", url, headers, "x".repeat(4096))).toMatchObject({ body: "x".repeat(4096) });
    expect(summariseRequest("POST", url, headers, "x".repeat(4097))).toMatchObject({ body: "[omitted: 4097 characters]" });
    expect(summariseRequest("POST", url, headers, { n: 10n })).toMatchObject({ body: "[not JSON: object]" });
    expect(summariseRequest("POST", url, headers, () => 1)).toMatchObject({ body: "[not JSON: function]" });
  });
});
