/**
 * A destination key never collapses on absent data (issue 41 finding 4; SPEC section 3: an absent
 * value, null or an empty string is no identity). The shipped demo-payments connector keys a charge
 * `charge-<order id>`; an order without an id — reachable on the production route with
 * `?clientIdempotencyId=`, whose identity skips `idempotencyFields` — made `charge-` for every such
 * order, and the second execution received the first one's charge replayed. Every key rule
 * (a connector's `plain` and `hashed`, a hand-written concatenation or `$idempotencyKey`) now fails
 * the step before anything is sent, not retried, naming the absent value — in the start batch too
 * (src/steps/first-key.ts), which persists no such key. Real D1, the real app and consumer, the
 * harness's destination (the real Idempotency-Key middleware).
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import demoPayments from "../../connectors/demo-payments.json";
import { keyPartsOf } from "../../src/definitions/key-parts";
import { getWorkflow } from "../../src/definitions/store";
import { callApp, chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";
import { charging } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";

/** The charge as docs/connectors.md shows it: the order and its amount. */
const CHARGE_BODY = "= { 'order': payload.order.id, 'amount': payload.order.total }";

const json = async (response: Response) => (await response.json()) as Record<string, unknown>;

async function saveThrough(h: Harness, connector: Record<string, unknown>): Promise<string> {
  const name = connector.name as string;
  expect((await callApp(h, "PUT", `/v1/connectors/${name}`, { body: connector })).status).toBeLessThan(300);
  const wf = charging(name, { body: CHARGE_BODY });
  expect((await callApp(h, "PUT", `/v1/workflows/${wf.id}`, { body: wf })).status).toBe(201);
  return wf.id;
}

/** The charge step failed for good on its first attempt, before any send, naming `part`. */
async function expectRefusedBeforeSend(executionId: string, part: string) {
  const charge = (await stepsOf(executionId)).charge!;
  expect(charge).toMatchObject({ state: "FAILED", attempt: 1, idempotency_key: null });
  expect(charge.error).toContain(`the key's value \`${part}\` is absent`);
  expect(charge.error).toContain("Nothing was sent; not retried");
  expect(await executionStatus(executionId)).toBe("FAILED");
  const sends = await env.DB.prepare("SELECT count(*) AS n FROM destination_key_sends WHERE execution_id = ?1")
    .bind(executionId)
    .first<{ n: number }>();
  expect(sends!.n).toBe(0);
}

describe("a key never collapses on absent data", () => {
  it("demo-payments, two orders without an id via ?clientIdempotencyId=: neither sends `charge-`, both FAILED, no charge", async () => {
    const h = harness();
    const workflowId = await saveThrough(h, demoPayments);
    const stored = (await getWorkflow(env.DB, WS, workflowId))!;
    expect(stored.definition.vertices[1]).toMatchObject({ config: { idempotencyKey: { value: '= "charge-" & (payload.order.id)' } } });
    const ids: string[] = [];
    for (const [client, total] of [
      ["client-a", 10],
      ["client-b", 20],
    ] as const) {
      const response = await callApp(h, "POST", `/v1/workflows/${workflowId}/trigger?clientIdempotencyId=${unique(client)}`, {
        body: { order: { total } },
      });
      expect(response.status).toBe(202);
      ids.push((await json(response)).executionId as string);
    }
    expect(new Set(ids).size).toBe(2);
    await h.drain();
    for (const id of ids) await expectRefusedBeforeSend(id, "(payload.order.id)");
    expect(h.dest.requests).toHaveLength(0);
    expect(h.dest.effects).toHaveLength(0);
    const collapsed = await env.DB.prepare("SELECT count(*) AS n FROM steps WHERE idempotency_key = 'charge-'").first<{ n: number }>();
    expect(collapsed!.n).toBe(0);
  });

  it("the start batch computes no key from absent data (a chained first step): FAILED before any send, no key persisted", async () => {
    const h = harness({}, { chain: true });
    const workflowId = await saveThrough(h, { ...demoPayments, name: unique("pay") });
    const stored = (await getWorkflow(env.DB, WS, workflowId))!;
    const first = await h.start(stored, { order: { id: null, total: 1 } });
    const second = await h.start(stored, { order: { id: "", total: 2 } });
    await h.drain();
    await expectRefusedBeforeSend(first, "(payload.order.id)");
    await expectRefusedBeforeSend(second, "(payload.order.id)");
    expect((await stepsOf(first)).charge!.error).toContain("is absent (null)");
    expect((await stepsOf(second)).charge!.error).toContain("is absent (an empty string)");
    expect(h.dest.effects).toHaveLength(0);
  });

  it("a hashed rule: an absent, null or empty order id fails the step before any send; a present one is charged once", async () => {
    const h = harness();
    const name = unique("pay");
    const connector = { ...demoPayments, name, key: { profile: "stripe", rule: { fields: ["order"], format: "hashed" } } };
    const workflowId = await saveThrough(h, connector);
    const stored = (await getWorkflow(env.DB, WS, workflowId))!;
    expect(stored.definition.vertices[1]).toMatchObject({
      config: { idempotencyKey: { value: '= $idempotencyKey("charge", (payload.order.id))' } },
    });
    const absent = [await h.start(stored, { order: { total: 1 } }), await h.start(stored, { order: { id: null } })];
    absent.push(await h.start(stored, { order: { id: "" } }));
    const present = await h.start(stored, { order: { id: unique("O"), total: 4 } });
    await h.drain();
    for (const id of absent) await expectRefusedBeforeSend(id, "(payload.order.id)");
    expect(await executionStatus(present)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
  });

  it("an inline key: a concatenation names the absent value; $idempotencyKey refuses null and an empty string", async () => {
    const h = harness();
    const concatenated = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), {
        headers: { "Idempotency-Key": "= 'charge-' & payload.order.id & '-' & payload.order.line" },
      }),
    );
    const hashed = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const missingLine = await h.start(concatenated, { order: { id: "A-1" } });
    const nullId = await h.start(hashed, { order: { id: null } });
    const emptyId = await h.start(hashed, { order: { id: "" } });
    await h.drain();
    await expectRefusedBeforeSend(missingLine, "payload.order.line");
    await expectRefusedBeforeSend(nullId, "payload.order.id");
    await expectRefusedBeforeSend(emptyId, "payload.order.id");
    expect(h.dest.effects).toHaveLength(0);
  });

  it('a key part that is absent whatever the data is refused at save: a literal null, a connector key field given as ""', async () => {
    const h = harness();
    const inline = chargeWorkflow(unique("wf"), { headers: { "Idempotency-Key": "= 'charge-' & payload.order.id & '-' & null" } });
    const refused = await callApp(h, "PUT", `/v1/workflows/${inline.id}`, { body: inline });
    expect(refused.status).toBe(422);
    expect((await json(refused)).errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ pointer: "/vertices/1/config/headers/Idempotency-Key", code: "idempotency-key-absent-part" }),
      ]),
    );
    const name = unique("pay");
    const connector = { ...demoPayments, name, key: { profile: "stripe", rule: { fields: ["order", "line"], format: "plain" } } };
    expect((await callApp(h, "PUT", `/v1/connectors/${name}`, { body: connector })).status).toBe(201);
    const wf = charging(name, { body: CHARGE_BODY });
    (wf.vertices[1]!.config as Record<string, unknown>).keyFields = { order: "= payload.order.id", line: "" };
    const viaConnector = await callApp(h, "PUT", `/v1/workflows/${wf.id}`, { body: wf });
    expect(viaConnector.status).toBe(422);
    expect(((await json(viaConnector)).errors as Array<{ code: string }>).map((e) => e.code)).toContain("idempotency-key-absent-part");
  });

  it("reads the parts of the shapes a key is written in, and none of a shape it cannot tell", () => {
    expect(keyPartsOf('"charge-" & (payload.order.id) & "-" & (payload.line)')).toEqual(["(payload.order.id)", "(payload.line)"]);
    expect(keyPartsOf("payload.a & 'x'")).toEqual(["payload.a"]);
    expect(keyPartsOf("'a' & null & ''")).toEqual(["null", "''"]);
    expect(keyPartsOf("$idempotencyKey('c', payload.a, $join([payload.b, ','], ')'), /* , */ \"x\", 3)")).toEqual([
      "payload.a",
      "$join([payload.b, ','], ')')",
    ]);
    expect(keyPartsOf("($x := payload.a; 'c-' & $x)")).toEqual([]);
    expect(keyPartsOf("payload.a ? 'c-' & payload.a : 'c-x'")).toEqual([]);
    expect(keyPartsOf("$idempotencyKey(")).toEqual([]);
  });
});
