/**
 * The classify phase (src/steps/gateway/classify.ts) on its own: a send's result → the step's
 * outcome, without a network, a database or a clock.
 */
import { describe, expect, it } from "vitest";
import { ResponseTooLargeError } from "../../src/steps/http-response";
import { classifyResponse, classifySendFailure, type Attempt } from "../../src/steps/gateway/classify";

const NOW = Date.UTC(2030, 0, 1);
const SECRET = "sk_test_classify_91c2";

function attemptWith(config: Partial<Attempt["config"]> = {}): Attempt {
  const url = new URL("https://api.example.com/v1/charges?expand=customer");
  return {
    method: "POST",
    url,
    request: { method: "POST", url: url.toString(), headers: { authorization: "Bearer [redacted]" } },
    key: "charge-abc",
    secretValues: [SECRET],
    config: { conflictAsProcessed: false, clientErrorMode: "fail", ...config },
  };
}

function answer(status: number, body: unknown = { ok: true }, headers: Record<string, string> = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return {
    response: new Response(null, { status, headers: { "content-type": "application/json", ...headers } }),
    text,
  };
}

const WHAT = "POST api.example.com/v1/charges answered";

describe("classifyResponse", () => {
  it.each([
    // status, config, kind, error
    [200, {}, "completed", undefined],
    [201, {}, "completed", undefined],
    [299, {}, "completed", undefined],
    [408, {}, "retryable", `${WHAT} 408`],
    [429, {}, "retryable", `${WHAT} 429`],
    [500, {}, "retryable", `${WHAT} 500`],
    [503, {}, "retryable", `${WHAT} 503`],
    [503, { clientErrorMode: "complete" }, "retryable", `${WHAT} 503`],
    [302, {}, "failed", expect.stringMatching(/answered 302; not retried \(a 302 will not change by itself\)/)],
    [
      400,
      {},
      "failed",
      `${WHAT} 400; not retried (a 400 will not change by itself). Set clientErrorMode: "complete" to route on it instead`,
    ],
    [404, { clientErrorMode: "complete" }, "completed", undefined],
    [409, {}, "failed", expect.stringMatching(/answered 409; not retried/)],
    [409, { conflictAsProcessed: true }, "completed", undefined],
    [409, { clientErrorMode: "complete" }, "completed", undefined],
  ] as const)("%i with %j → %s", (status, config, kind, error) => {
    const outcome = classifyResponse(answer(status), attemptWith(config), NOW);
    expect(outcome.kind).toBe(kind);
    expect("error" in outcome ? outcome.error : undefined).toEqual(error);
    expect(outcome.request).toEqual(attemptWith().request);
  });

  it("the output: status, allowlisted headers, the body parsed as JSON when it says so, the key sent", () => {
    const outcome = classifyResponse(answer(201, { id: "ch_1" }, { "set-cookie": "s=1", etag: '"v1"' }), attemptWith(), NOW);
    expect(outcome).toMatchObject({
      kind: "completed",
      output: {
        status: 201,
        headers: { "content-type": "application/json", etag: '"v1"' },
        body: { id: "ch_1" },
        idempotencyKey: "charge-abc",
      },
    });
    const text = classifyResponse(
      { response: new Response(null, { status: 200 }), text: "plain" },
      { ...attemptWith(), key: undefined },
      NOW,
    );
    expect(text).toMatchObject({ output: { body: "plain", idempotencyKey: null } });
  });

  it("scrubs the secrets just sent from everything recorded of the response", () => {
    const echoed = { echo: `Bearer ${SECRET}`, [SECRET]: [SECRET] };
    const outcome = classifyResponse(answer(400, echoed, { "x-request-id": SECRET }), attemptWith({ clientErrorMode: "complete" }), NOW);
    expect(JSON.stringify(outcome)).not.toContain(SECRET);
    expect(outcome).toMatchObject({
      output: { headers: { "x-request-id": "[redacted]" }, body: { echo: "Bearer [redacted]", "[redacted]": ["[redacted]"] } },
    });
  });

  it("passes Retry-After (seconds or an HTTP date, read against `now`) on to the retry policy", () => {
    expect(classifyResponse(answer(429, {}, { "retry-after": "120" }), attemptWith(), NOW)).toMatchObject({
      kind: "retryable",
      retryAfterMs: 120_000,
    });
    const date = new Date(NOW + 30_000).toUTCString();
    expect(classifyResponse(answer(503, {}, { "retry-after": date }), attemptWith(), NOW)).toMatchObject({ retryAfterMs: 30_000 });
    expect(classifyResponse(answer(503, {}, { "retry-after": "soon" }), attemptWith(), NOW)).toMatchObject({ retryAfterMs: undefined });
  });

  it("a 409 in progress waits, before conflictAsProcessed and clientErrorMode are considered", () => {
    const config = { conflictAsProcessed: true, clientErrorMode: "complete" } as const;
    const withRetryAfter = classifyResponse(answer(409, {}, { "retry-after": "3" }), attemptWith(config), NOW);
    expect(withRetryAfter).toMatchObject({
      kind: "in_progress",
      retryAfterMs: 3000,
      error: `${WHAT} 409 (Retry-After 3 s): the request with this key is still running there`,
    });
    const problem = classifyResponse(answer(409, { code: "idempotency-key-in-progress" }), attemptWith(config), NOW);
    expect(problem).toMatchObject({ kind: "in_progress", error: `${WHAT} 409: the request with this key is still running there` });
  });
});

describe("classifySendFailure", () => {
  it("a network error is retried, its message scrubbed of the secrets sent", () => {
    const outcome = classifySendFailure({ kind: "network_error", error: new TypeError(`refused for ${SECRET}`) }, attemptWith());
    expect(outcome).toEqual({
      kind: "retryable",
      request: attemptWith().request,
      error: "POST api.example.com/v1/charges: network error: refused for [redacted]",
    });
  });

  it("a timeout is retried", () => {
    expect(classifySendFailure({ kind: "timed_out", timeoutMs: 50 }, attemptWith())).toEqual({
      kind: "retryable",
      request: attemptWith().request,
      error: "POST api.example.com/v1/charges: timed out after 50 ms",
    });
  });

  it("a body over maxResponseBytes fails, not retried", () => {
    const error = new ResponseTooLargeError(1000);
    expect(classifySendFailure({ kind: "too_large", error }, attemptWith())).toEqual({
      kind: "failed",
      request: attemptWith().request,
      error: error.message,
    });
  });
});
