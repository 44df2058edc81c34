/**
 * `compensate` at save (SPEC section 18, issue 45, docs/steps.md "Compensation"): the undo is a
 * write with its own key — never the step's — and its expressions are the step's own sites (the
 * key lint, the compile check, the step-inputs analysis). Each mistake a 422 with its pointer,
 * nothing saved.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { stepInputsOf } from "../../src/definitions/step-inputs";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";
import { callApp, harness, unique, type Harness } from "../steps/helpers";

const UNDO = "/vertices/1/config/compensate";

/** entry → charge (with `compensate`) → ship. */
export function chargeThenShip(compensate: Record<string, unknown> | null, id = "order-with-refund", chargeKey?: unknown) {
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: "http://localhost:8788/payments/charges",
          idempotencyKey: chargeKey ?? { value: "= $idempotencyKey('charge', payload.order.id)" },
          body: "= { 'order': payload.order.id, 'amount': payload.order.total }",
          ...(compensate
            ? {
                compensate: {
                  method: "POST",
                  url: "http://localhost:8788/payments/refunds",
                  idempotencyKey: { value: "= $idempotencyKey('refund', payload.order.id)" },
                  body: "= { 'charge': output.body.id, 'order': payload.order.id }",
                  ...compensate,
                },
              }
            : {}),
        },
      },
      {
        id: "ship",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: "http://localhost:8788/shipping/labels",
          idempotencyKey: { value: "= $idempotencyKey('ship', payload.order.id)" },
          body: "= { 'order': payload.order.id }",
        },
      },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "ship" },
    ],
  };
}

const codesAt = (errors: ValidationError[], pointer: string) => errors.filter((e) => e.pointer === pointer).map((e) => e.code);

describe("compensate at save", () => {
  it("a good one is valid, and the step's inputs learn what its undo reads", () => {
    const undo = { body: "= { 'charge': output.body.id, 'order': payload.order.id, 'note': steps.received.order.note }" };
    const result = validateDefinition(chargeThenShip(undo));
    expect(result.ok, JSON.stringify(result)).toBe(true);
    if (!result.ok) return;
    expect(result.definition.vertices[1]).toMatchObject({ config: { compensate: { method: "POST" } } });
    expect(stepInputsOf(result.definition).vertices.charge).toMatchObject({ payload: true });
  });

  it("an undo keyed on the step's output (its charge id) passes the key lint; a constant key does not", () => {
    expect(validateDefinition(chargeThenShip({ idempotencyKey: { value: "= 'refund-' & output.body.id" } })).ok).toBe(true);
    const constant = validateDefinition(chargeThenShip({ idempotencyKey: { value: "= 'refund'" } }));
    expect(constant.ok).toBe(false);
    if (!constant.ok) expect(codesAt(constant.errors, `${UNDO}/idempotencyKey/value`)).toEqual(["idempotency-key-constant"]);
  });

  it("the key equal to the step's, in another spacing, is refused at the undo's key", () => {
    const result = validateDefinition(chargeThenShip({ idempotencyKey: { value: "=  $idempotencyKey('charge',payload.order.id)" } }));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(codesAt(result.errors, `${UNDO}/idempotencyKey/value`)).toEqual(["compensation-key-equals-step-key"]);
  });

  it("an Idempotency-Key header is a key too", () => {
    const headerKey = { idempotencyKey: undefined, headers: { "Idempotency-Key": "= 'refund-' & payload.order.id" } };
    expect(validateDefinition(chargeThenShip(headerKey)).ok).toBe(true);
  });

  it("a MAP's step may declare one, its key per item (each completed item undone: test/steps/compensation-map.test.ts)", () => {
    const def = {
      id: "m",
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
        {
          id: "refund",
          type: "MAP",
          config: {
            items: "= payload.order.lines",
            as: "line",
            step: {
              type: "GATEWAY",
              config: {
                method: "POST",
                url: "http://localhost:8788/payments/refunds",
                idempotencyKey: { value: "= $idempotencyKey('refund', payload.order.id, line.sku)" },
                compensate: { method: "POST", idempotencyKey: { value: "= $idempotencyKey('undo', payload.order.id, line.sku)" } },
              },
            },
          },
        },
      ],
      edges: [{ from: "received", to: "refund" }],
    };
    const result = validateDefinition(def);
    expect(result.ok ? [] : result.errors).toEqual([]);
  });
});

describe("at most 1,000 undo steps an execution (the trigger that inserts them keeps that many)", () => {
  /** entry → charge (compensable) → a MAP of `maxItems` compensable refunds. */
  const chargeThenMap = (maxItems: number) => {
    const def = chargeThenShip({}) as { vertices: Record<string, unknown>[]; edges: unknown[] };
    def.vertices[2] = {
      id: "lines",
      type: "MAP",
      config: {
        items: "= payload.order.lines",
        as: "line",
        maxItems,
        maxCollectBytes: 64,
        step: {
          type: "GATEWAY",
          config: {
            method: "POST",
            url: "http://localhost:8788/refunds/lines",
            idempotencyKey: { value: "= $idempotencyKey('line', payload.order.id, line.sku)" },
            compensate: { method: "POST", idempotencyKey: { value: "= $idempotencyKey('unline', payload.order.id, line.sku)" } },
          },
        },
      },
    };
    def.edges = [
      { from: "received", to: "charge" },
      { from: "charge", to: "lines" },
    ];
    return def;
  };

  it("1 + 999 fits; 1 + 1,000 is refused at the compensate that passes the cap, with the arithmetic", () => {
    const fits = validateDefinition(chargeThenMap(999));
    expect(fits.ok ? [] : fits.errors).toEqual([]);
    const over = validateDefinition(chargeThenMap(1000));
    expect(over.ok).toBe(false);
    if (over.ok) return;
    expect(codesAt(over.errors, "/vertices/2/config/step/config/compensate")).toEqual(["compensation-too-many-undos"]);
    expect(over.errors.find((e) => e.code === "compensation-too-many-undos")?.message).toContain("1,001 compensable calls");
  });
});

describe("PUT /v1/workflows refuses a bad compensate with 422 and saves nothing", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it.each([
    ["compensation-key-missing", { idempotencyKey: undefined }, UNDO],
    [
      "compensation-key-equals-step-key",
      { idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)" } },
      `${UNDO}/idempotencyKey/value`,
    ],
    ["compensation-not-a-write", { method: "GET", body: undefined }, `${UNDO}/method`],
    [
      "idempotency-key-unstable",
      { idempotencyKey: { value: "= $idempotencyKey('refund', payload.order.id, $millis())" } },
      `${UNDO}/idempotencyKey/value`,
    ],
    ["unknown-key", { onFailure: "x" }, `${UNDO}/onFailure`],
  ] as const)("%s", async (code, undo, pointer) => {
    const id = unique("comp");
    const res = await callApp(h, "PUT", `/v1/workflows/${id}`, { body: chargeThenShip(undo as Record<string, unknown>, id) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { errors: ValidationError[] };
    expect(codesAt(body.errors, pointer), JSON.stringify(body.errors)).toEqual([code]);
    expect((await callApp(h, "GET", `/v1/workflows/${id}`)).status).toBe(404);
  });

  it("saves a good one (201) and serves it back with its compensate", async () => {
    const id = unique("comp");
    const res = await callApp(h, "PUT", `/v1/workflows/${id}`, { body: chargeThenShip({}, id) });
    expect(res.status).toBe(201);
    const got = await callApp(h, "GET", `/v1/workflows/${id}`);
    expect(JSON.stringify(await got.json())).toContain("refund");
  });
});
