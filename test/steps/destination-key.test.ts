import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { GatewayVertex } from "../../src/definitions/schema";
import { idempotencyKey } from "../../src/expressions/key-helpers";
import { DEFAULT_KEY_CONSTRAINTS } from "../../src/lib/key-constraints";
import { runGateway } from "../../src/steps/gateway";
import {
  checkDestinationKey,
  DEFAULT_DESTINATION_KEY,
  resolveKeyToSend,
  type DestinationKeyRule,
  type KeyStore,
} from "../../src/steps/gateway/key";
import type { ExpressionContext } from "../../src/steps/plan";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-destination-key";

const storedKey = async (executionId: string): Promise<string | null> =>
  (await env.DB.prepare("SELECT idempotency_key FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
    .bind(executionId)
    .first<{ idempotency_key: string | null }>())!.idempotency_key;

describe("the destination key is persisted before the first send", () => {
  it("a destination that reads the step row while handling the request finds the key it received already stored there", async () => {
    let executionId = "";
    const seen: Array<{ received: string | null; storedDuringCall: string | null }> = [];
    const h: Harness = harness({
      // The destination, on the same workerd and D1, looks at idemflow's row before it answers.
      fetch: async (input, init) => {
        const request = new Request(input, init);
        seen.push({ received: request.headers.get("idempotency-key"), storedDuringCall: await storedKey(executionId) });
        return h.dest.fetch(request);
      },
    });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    executionId = await h.start(wf, { order: { id: unique("P"), total: 10 } });
    await h.drain();
    const step = (await stepsOf(executionId)).charge!;
    expect(step.state).toBe("COMPLETED");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.received).toMatch(/^charge-/);
    expect(seen[0]!.storedDuringCall).toBe(seen[0]!.received);
    expect(step.idempotency_key).toBe(seen[0]!.received);
  });
});

describe("a later attempt sends the stored key", () => {
  it("even when evaluating the key expression again would give another value (the payload it reads changed between attempts)", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "Q-first", total: 10 } });
    h.dest.fault("/payments/charges", 503, 1);
    const [first] = h.queue.take();
    await h.deliver([first!.body]);
    expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED");
    // What the key expression reads is different now: a fresh evaluation would give a new key.
    await env.DB.prepare("UPDATE executions SET payload = ?2 WHERE id = ?1")
      .bind(id, JSON.stringify({ order: { id: "Q-second", total: 10 } }))
      .run();
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "COMPLETED", attempt: 2 });
    const sent = h.dest.requests.filter((r) => r.url.endsWith("/payments/charges"));
    expect(sent).toHaveLength(2);
    // The body WAS evaluated again (it carries the new order id)…
    expect(JSON.parse(sent[1]!.body)).toMatchObject({ order: "Q-second" });
    // …the key was not: both attempts sent the key stored at the first.
    expect(sent.map((r) => r.headers["idempotency-key"])).toEqual([step.idempotency_key, step.idempotency_key]);
  });

  it("sends the key on the step row, not a recomputation (a row whose key differs from the expression sends the row's)", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("R"), total: 10 } });
    h.dest.fault("/payments/charges", 503, 1);
    const [first] = h.queue.take();
    await h.deliver([first!.body]);
    const computed = await storedKey(id);
    expect(computed).toMatch(/^charge-/);
    await env.DB.prepare("UPDATE steps SET idempotency_key = 'stored-key-7f3a' WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(id)
      .run();
    await h.drain();
    expect((await stepsOf(id)).charge).toMatchObject({ state: "COMPLETED", attempt: 2, idempotency_key: "stored-key-7f3a" });
    expect(h.dest.keysSent("/payments/charges")).toEqual([computed, "stored-key-7f3a"]);
  });
});

describe("checkDestinationKey with the default rule (Idempotency-Key, 1–255 printable ASCII)", () => {
  const LENGTH = "; use $idempotencyKey(prefix, …) to bound it";
  const ASCII = "the Idempotency-Key must be printable ASCII only; use $idempotencyKey(prefix, …) to encode other values";
  it.each([
    ["k", { key: "k" }],
    ["k".repeat(255), { key: "k".repeat(255) }],
    [1234, { key: "1234" }],
    [1.5, { key: "1.5" }],
    ["", { error: `the Idempotency-Key must be 1-255 characters, got 0${LENGTH}` }],
    ["k".repeat(256), { error: `the Idempotency-Key must be 1-255 characters, got 256${LENGTH}` }],
    // Both rules broken: the length is named (the middleware names the characters instead).
    [`${"k".repeat(300)}é`, { error: `the Idempotency-Key must be 1-255 characters, got 301${LENGTH}` }],
    ["clé", { error: ASCII }],
    ["a\tb", { error: ASCII }],
    [undefined, { error: "the Idempotency-Key expression produced nothing, not a string" }],
    [null, { error: "the Idempotency-Key expression produced object, not a string" }],
    [true, { error: "the Idempotency-Key expression produced boolean, not a string" }],
    [{ id: 1 }, { error: "the Idempotency-Key expression produced object, not a string" }],
    [Number.NaN, { error: "the Idempotency-Key expression produced number, not a string" }],
  ])("%j", (value, expected) => {
    expect(checkDestinationKey(value, DEFAULT_DESTINATION_KEY)).toEqual(expected);
  });
});

/** A destination with its own key header and constraints (what the destination-keys issue adds). */
const CUSTOM: DestinationKeyRule = {
  location: { header: "X-Request-Key" },
  declaredBy: "declaration",
  constraints: {
    minLength: 8,
    maxLength: 40,
    alphabet: {
      name: "lowercase letters, digits and '-'",
      ranges: [
        [0x30, 0x39],
        [0x61, 0x7a],
        [0x2d, 0x2d],
      ],
    },
  },
};

describe("checkDestinationKey with a destination's own rule", () => {
  it("names the destination's header and bounds in its errors", () => {
    expect(checkDestinationKey("abc", CUSTOM)).toEqual({
      error: "the X-Request-Key must be 8-40 characters, got 3; use $idempotencyKey(prefix, …) to bound it",
    });
    expect(checkDestinationKey("Charge-1234", CUSTOM)).toEqual({
      error: "the X-Request-Key must be lowercase letters, digits and '-' only; use $idempotencyKey(prefix, …) to encode other values",
    });
    expect(checkDestinationKey("charge-1234", CUSTOM)).toEqual({ key: "charge-1234" });
    expect(checkDestinationKey(12345678, CUSTOM)).toEqual({ key: "12345678" });
  });
});

const DESTINATION = "http://localhost:8788";
const SEND = { firstSentAt: 0, countedFrom: 0 };

describe("resolveKeyToSend", () => {
  const context: ExpressionContext = {
    payload: { order: { id: "O-1" } },
    steps: {},
    execution: { id: "e", workflowId: "w", trigger: "t" },
  };
  const store = (persistedKey: string | null, answer: (key: string) => string | null = (key) => key) => {
    const persisted: string[] = [];
    const keys: KeyStore & { persisted: string[] } = {
      persistedKey,
      persisted,
      keySends: { [DESTINATION]: SEND },
      stepCreatedAt: 0,
      persistKey: async (key) => {
        persisted.push(key);
        const stored = answer(key);
        return stored === null ? null : { key: stored, send: SEND };
      },
      recordSend: async () => SEND,
    };
    return keys;
  };

  it("a persisted key is sent as is: the expression is not evaluated, nothing is persisted again", async () => {
    const keys = store("stored-1");
    expect(await resolveKeyToSend("charge", "= $error('never evaluated')", context, keys, DEFAULT_DESTINATION_KEY, DESTINATION)).toEqual({
      key: "stored-1",
      send: SEND,
    });
    expect(keys.persisted).toEqual([]);
  });

  it("otherwise the evaluated key is persisted and the stored value (the only-if-absent winner) is sent", async () => {
    const keys = store(null, () => "winner");
    expect(await resolveKeyToSend("charge", "= 'order-' & payload.order.id", context, keys, DEFAULT_DESTINATION_KEY, DESTINATION)).toEqual({
      key: "winner",
      send: SEND,
    });
    expect(keys.persisted).toEqual(["order-O-1"]);
  });

  it("an invalid key, or an expression that fails, fails the attempt before anything is persisted", async () => {
    const keys = store(null);
    expect(await resolveKeyToSend("charge", "= 'clé'", context, keys, DEFAULT_DESTINATION_KEY, DESTINATION)).toEqual({
      error:
        "gateway charge: invalid Idempotency-Key: the Idempotency-Key must be printable ASCII only; use $idempotencyKey(prefix, " +
        "…) to encode other values",
    });
    expect(await resolveKeyToSend("charge", "= $error('boom')", context, keys, DEFAULT_DESTINATION_KEY, DESTINATION)).toEqual({
      error: expect.stringMatching(/^gateway charge: invalid Idempotency-Key: .*boom/),
    });
    expect(await resolveKeyToSend("charge", "= 'short'", context, keys, CUSTOM, DESTINATION)).toEqual({
      error: expect.stringMatching(/^gateway charge: invalid X-Request-Key: the X-Request-Key must be 8-40 characters, got 5/),
    });
    expect(keys.persisted).toEqual([]);
  });

  it("fenced out while persisting: fails, nothing sent", async () => {
    expect(
      await resolveKeyToSend(
        "charge",
        "= 'order-1'",
        context,
        store(null, () => null),
        DEFAULT_DESTINATION_KEY,
        DESTINATION,
      ),
    ).toEqual({
      error: "the step was taken over before its key was persisted; nothing was sent",
    });
  });

  it("the default rule is the shared key rule", () => {
    expect(DEFAULT_DESTINATION_KEY).toEqual({
      location: { header: "Idempotency-Key" },
      constraints: DEFAULT_KEY_CONSTRAINTS,
      declaredBy: "header",
    });
  });
});

describe("runGateway with a declared key header", () => {
  it("persists the declared key, shaped to its maxLength, and sends it in that header", async () => {
    const vertex = GatewayVertex.parse({
      id: "charge",
      type: "GATEWAY",
      config: {
        method: "POST",
        url: "http://localhost:8788/payments/charges",
        headers: { "X-Order": "= payload.order.id" },
        idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", header: "X-Request-Key", maxLength: 40 },
        body: { order: "= payload.order.id" },
      },
    });
    const persisted: string[] = [];
    const sent: Request[] = [];
    const outcome = await runGateway(
      vertex,
      { payload: { order: { id: "o-42" } }, steps: {}, execution: { id: "e", workflowId: "w", trigger: "t" } },
      {
        env: { OUTBOUND_ALLOWLIST: "localhost:8788" } as unknown as Env,
        secret: async (name) => {
          throw new Error(`no secret ${name} in this test`);
        },
        fetch: async (input) => {
          sent.push(input as Request);
          return new Response(JSON.stringify({ id: "ch_1" }), { status: 201, headers: { "content-type": "application/json" } });
        },
        now: () => 0,
        persistedKey: null,
        keySends: {},
        stepCreatedAt: 0,
        persistKey: async (key) => {
          persisted.push(key);
          return { key, send: SEND };
        },
        recordSend: async () => SEND,
      },
    );
    const key = (await idempotencyKey("charge", "o-42")).slice(0, 40);
    expect(outcome).toMatchObject({ kind: "completed", output: { status: 201, idempotencyKey: key } });
    expect(persisted).toEqual([key]);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers.get("x-request-key")).toBe(key);
    expect(sent[0]!.headers.get("x-order")).toBe("o-42");
    expect(sent[0]!.headers.has("idempotency-key")).toBe(false);
  });
});
