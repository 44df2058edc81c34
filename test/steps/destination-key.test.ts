import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
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

  it("the key sent is the value on the step row, not a recomputation (a row whose key differs from the expression's value sends the row's)", async () => {
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
