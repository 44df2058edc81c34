/**
 * The send phase (src/steps/gateway/send.ts) against a fake fetch: what each way a call can end
 * comes back as, for the classify phase to judge.
 */
import { describe, expect, it } from "vitest";
import { ResponseTooLargeError } from "../../src/steps/http-response";
import { send } from "../../src/steps/gateway/send";

const request = () => new Request("http://localhost:8788/payments/charges", { method: "POST", body: "{}" });
const limits = { timeoutMs: 50, maxResponseBytes: 1000 };

/** A fetch that never answers, and rejects when its signal aborts (as fetch does). */
const hanging: typeof fetch = (_input, init) =>
  new Promise<Response>((_, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("The operation was aborted"))));

describe("send", () => {
  it("an answer comes back with its body read, and the timer no longer runs", async () => {
    let signal: AbortSignal | undefined;
    const result = await send(request(), limits, async (_input, init) => {
      signal = init?.signal ?? undefined;
      return new Response("hello", { status: 201 });
    });
    expect(result).toMatchObject({ kind: "answered", text: "hello", response: { status: 201 } });
    await new Promise((resolve) => setTimeout(resolve, limits.timeoutMs + 30));
    expect(signal?.aborted).toBe(false);
  });

  it("the request is passed as built (the builder already chose redirect: manual)", async () => {
    let sent: Request | undefined;
    const built = new Request("http://localhost:8788/x", { redirect: "manual" });
    await send(built, limits, async (input) => {
      sent = input as Request;
      return new Response(null, { status: 204 });
    });
    expect(sent).toBe(built);
  });

  it("no answer within timeoutMs: timed_out, whatever error the aborted fetch threw", async () => {
    expect(await send(request(), limits, hanging)).toEqual({ kind: "timed_out", timeoutMs: 50 });
  });

  it("a fetch that throws before the timeout: network_error, with the error as thrown", async () => {
    const error = new TypeError("connection refused");
    expect(
      await send(request(), limits, async () => {
        throw error;
      }),
    ).toEqual({ kind: "network_error", error });
  });

  it("a body over maxResponseBytes: too_large, never a truncated text", async () => {
    const result = await send(request(), limits, async () => new Response("x".repeat(1001)));
    expect(result.kind).toBe("too_large");
    expect(result.kind === "too_large" && result.error).toBeInstanceOf(ResponseTooLargeError);
    expect(result.kind === "too_large" && result.error.limitBytes).toBe(1000);
  });

  it("a body of exactly maxResponseBytes is read whole", async () => {
    expect(await send(request(), limits, async () => new Response("x".repeat(1000)))).toMatchObject({
      kind: "answered",
      text: "x".repeat(1000),
    });
  });
});
