/**
 * MAP at save (SPEC section 16, issue 43): the vertex's own rules, and every save-time check of a
 * Gateway applied to the Gateway inside a MAP's `step`, with pointers under `/vertices/i/config/step`.
 * One mistake, one error, at what the author wrote.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { authorsErrors, resolveConnectors } from "../../src/connectors/resolve";
import { ConnectorDefinition, type StoredConnector } from "../../src/connectors/schema";
import { stepInputsOf, STEP_INPUTS_VERSION } from "../../src/definitions/step-inputs";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";
import { callApp, harness, unique, type Harness } from "../steps/helpers";

const STEP = "/vertices/1/config/step/config";

/** entry → refund, a MAP over the order's lines whose step refunds one line; `config`/`step` override. */
function refunds(config: Record<string, unknown> = {}, step: Record<string, unknown> = {}, id = "refund-lines") {
  return {
    id,
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
              body: "= { 'order': payload.order.id, 'sku': line.sku, 'amount': line.amount }",
              ...step,
            },
          },
          ...config,
        },
      },
    ],
    edges: [{ from: "received", to: "refund" }],
  };
}

function errorsOf(input: unknown): ValidationError[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors;
}
const pairs = (errors: ValidationError[]) => errors.map((e) => [e.pointer, e.code]);

describe("a MAP that saves", () => {
  it("fills in its defaults and keeps its step", () => {
    const doc = refunds({ as: undefined }, { idempotencyKey: { value: "= $idempotencyKey('refund', payload.order.id, item.sku)" } });
    delete (doc.vertices[1]!.config as Record<string, unknown>).as;
    const result = validateDefinition(doc);
    expect(result.ok ? [] : result.errors).toEqual([]);
    if (!result.ok) return;
    expect(result.warnings).toEqual([]);
    const map = result.definition.vertices[1]!;
    expect(map.type).toBe("MAP");
    if (map.type !== "MAP") return;
    expect(map.config).toMatchObject({ as: "item", concurrency: 10, maxItems: 100, onItemFailure: "fail", maxCollectBytes: 1024 });
    expect(map.config.step).toMatchObject({ type: "GATEWAY", config: { method: "POST", timeoutMs: 10_000 } });
  });

  it("accepts a TRANSFORM step, `collect`, and every bound at its limit", () => {
    const doc = refunds({
      concurrency: 50,
      maxItems: 91,
      maxCollectBytes: 16_384, // 16,384 × 91 = 1,490,944 ≤ 1.5 MB
      onItemFailure: "continue",
      collect: "= { 'sku': line.sku, 'at': index, 'price': price }", // a TRANSFORM item's output members are roots
      step: { type: "TRANSFORM", config: { output: { price: "= line.amount * 100", order: "= payload.order.id" } } },
    });
    expect(errorsOf(doc)).toEqual([]);
    expect(errorsOf(refunds({ concurrency: 1, maxItems: 1000, maxCollectBytes: 1500 }))).toEqual([]);
  });

  it("accepts a key that reads the item beside `index`, through a header, and through `$idempotencyKey` or `&`", () => {
    for (const value of [
      "= 'refund-' & payload.order.id & '-' & line.sku",
      "= $idempotencyKey('refund', line)",
      "= $idempotencyKey('refund', line.sku, index)",
    ]) {
      expect(errorsOf(refunds({}, { idempotencyKey: { value } }))).toEqual([]);
    }
    const header = refunds({}, { idempotencyKey: undefined, headers: { "Idempotency-Key": "= 'r-' & line.sku" } });
    delete (header.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config.idempotencyKey;
    expect(errorsOf(header)).toEqual([]);
  });

  it("reads a `__proto__` field of the item safely: saved as written, never the prototype", () => {
    const value = "= 'refund-' & payload.order.id & '-' & line.__proto__";
    const result = validateDefinition(refunds({}, { idempotencyKey: { value }, body: "= { 'sku': line.__proto__ }" }));
    expect(result.ok ? [] : result.errors).toEqual([]);
    if (!result.ok) return;
    const map = result.definition.vertices[1]!;
    if (map.type !== "MAP" || map.config.step.type !== "GATEWAY") throw new Error("not a MAP with a GATEWAY step");
    expect(map.config.step.config.idempotencyKey?.value).toBe(value);
    expect(Object.getPrototypeOf(map.config.step.config)).toBe(Object.prototype);
    // A key that reads `__proto__` of something else than the item is still a key that ignores the item.
    const other = errorsOf(refunds({}, { idempotencyKey: { value: "= 'refund-' & payload.__proto__" } }));
    expect(pairs(other)).toEqual([[`${STEP}/idempotencyKey/value`, "map-item-key-ignores-item"]]);
  });
});

describe("a key inside a MAP: one key per item, from the item's data", () => {
  it("refuses a key that does not read the item (map-item-key-ignores-item), once, at the key", () => {
    for (const value of ["= $idempotencyKey('refund', payload.order.id)", "= 'refund-' & steps.received.order.id", "= 'refund-x'"]) {
      const errors = errorsOf(refunds({}, { idempotencyKey: { value } }));
      expect(pairs(errors)).toEqual([[`${STEP}/idempotencyKey/value`, "map-item-key-ignores-item"]]);
      expect(errors[0]!.message).toContain("`line`");
      expect(errors[0]!.message).toContain("line.sku");
    }
  });

  it("refuses an Idempotency-Key header that does not read the item, at the header", () => {
    const doc = refunds({}, { headers: { "idempotency-key": "= 'refund-' & payload.order.id" } });
    delete (doc.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config.idempotencyKey;
    expect(pairs(errorsOf(doc))).toEqual([[`${STEP}/headers/idempotency-key`, "map-item-key-ignores-item"]]);
  });

  it("refuses a key built from `index` alone (map-item-key-from-index), once", () => {
    for (const value of ["= 'refund-' & payload.order.id & '-' & index", "= $idempotencyKey('refund', index)"]) {
      const errors = errorsOf(refunds({}, { idempotencyKey: { value } }));
      expect(pairs(errors)).toEqual([[`${STEP}/idempotencyKey/value`, "map-item-key-from-index"]]);
      expect(errors[0]!.message).toMatch(/re-ordered/);
    }
  });

  it("names the item by its `as`: `item` by default, and a key reading another name reads nothing", () => {
    const doc = refunds({}, { idempotencyKey: { value: "= $idempotencyKey('refund', item.sku)" } });
    delete (doc.vertices[1]!.config as Record<string, unknown>).as;
    expect(errorsOf(doc)).toEqual([]);
    const wrongName = errorsOf(refunds({}, { idempotencyKey: { value: "= $idempotencyKey('refund', item.sku)" } }));
    expect(pairs(wrongName)).toEqual([[`${STEP}/idempotencyKey/value`, "map-item-key-ignores-item"]]);
  });

  it("keeps the key lint's other answers (an unstable key is that, not also an item error)", () => {
    const errors = errorsOf(refunds({}, { idempotencyKey: { value: "= 'refund-' & line.sku & $now()" } }));
    expect(pairs(errors)).toEqual([[`${STEP}/idempotencyKey/value`, "idempotency-key-unstable"]]);
    const noItem = errorsOf(refunds({}, { idempotencyKey: { value: "= 'refund-' & $millis()" } }));
    expect(pairs(noItem)).toEqual([[`${STEP}/idempotencyKey/value`, "idempotency-key-unstable"]]);
  });

  it("judges nothing of the kind outside a MAP: `index` and `line` there are plain (absent) names", () => {
    const plain = {
      id: "plain",
      vertices: [
        { id: "received", type: "ENTRY_POINT" },
        {
          id: "charge",
          type: "GATEWAY",
          config: { method: "POST", url: "http://localhost:8788/x", idempotencyKey: { value: "= 'c-' & line.sku" } },
        },
      ],
      edges: [{ from: "received", to: "charge" }],
    };
    expect(pairs(errorsOf(plain))).toEqual([["/vertices/1/config/idempotencyKey/value", "idempotency-key-constant"]]);
  });
});

describe("the MAP's own bounds", () => {
  const at = (member: string) => `/vertices/1/config/${member}`;

  it("refuses `items` that is not an expression, once, saying how", () => {
    for (const items of ["payload.order.lines", [1, 2, 3]]) {
      const errors = errorsOf(refunds({ items }));
      expect(errors).toHaveLength(1);
      expect(errors[0]!.pointer).toBe(at("items"));
    }
    expect(errorsOf(refunds({ items: "payload.order.lines" }))[0]!.message).toMatch(/expression starting with `=`/);
    expect(pairs(errorsOf(refunds({ items: "= payload.order.lines[" })))).toEqual([[at("items"), "expression-syntax"]]);
  });

  it("refuses concurrency outside 1–50 and maxItems outside 1–1000, once each", () => {
    for (const [member, value] of [
      ["concurrency", 0],
      ["concurrency", 51],
      ["concurrency", 2.5],
      ["maxItems", 0],
      ["maxItems", 1001],
      ["maxCollectBytes", 16_385],
      ["maxCollectBytes", 0],
    ] as const) {
      const errors = errorsOf(refunds({ [member]: value }));
      expect(errors.map((e) => e.pointer)).toEqual([at(member)]);
    }
    expect(errorsOf(refunds({ concurrency: 51 }))[0]!.message).toContain("at most 50");
    expect(errorsOf(refunds({ maxItems: 1001 }))[0]!.message).toContain("at most 1000");
  });

  it("refuses maxCollectBytes × maxItems past 1.5 MB (map-output-too-large), the arithmetic in the message", () => {
    const errors = errorsOf(refunds({ maxCollectBytes: 16_384, maxItems: 100 }));
    expect(pairs(errors)).toEqual([[at("maxCollectBytes"), "map-output-too-large"]]);
    expect(errors[0]!.message).toContain("16,384 × 100 = 1,638,400 bytes, past 1,500,000");
    expect(errors[0]!.message).toContain("at most 15,000"); // 1,500,000 / 100
    expect(errors[0]!.message).toContain("at most 91"); // 1,500,000 / 16,384
    // The default maxItems counts: 2,000 × 1,000 is past it, 1,500 × 1,000 is not.
    expect(pairs(errorsOf(refunds({ maxCollectBytes: 2000, maxItems: 1000 })))).toEqual([[at("maxCollectBytes"), "map-output-too-large"]]);
    expect(errorsOf(refunds({ maxCollectBytes: 1500, maxItems: 1000 }))).toEqual([]);
    // An out-of-range number is the schema's one error, not also this one.
    expect(pairs(errorsOf(refunds({ maxCollectBytes: 20_000 })))).toEqual([[at("maxCollectBytes"), "invalid-too-big"]]);
  });

  it("refuses a MAP inside a MAP (map-nested), once, saying it is not supported yet", () => {
    const inner = { type: "MAP", config: { items: "= line.parts", step: { type: "TRANSFORM", config: { output: "= item" } } } };
    const errors = errorsOf(refunds({ step: inner }));
    expect(pairs(errors)).toEqual([[at("step/type"), "map-nested"]]);
    expect(errors[0]!.message).toMatch(/not supported yet/);
    // Another unknown step type is the schema's answer.
    expect(pairs(errorsOf(refunds({ step: { type: "DELAY", config: { for: "1m" } } })))).toEqual([
      [at("step/type"), "invalid-vertex-type"],
    ]);
  });

  it("refuses an item name that collides with the context's own names (map-item-name-reserved), once", () => {
    for (const name of ["payload", "steps", "index", "execution", "attempt"]) {
      const doc = refunds(
        { as: name },
        {
          idempotencyKey: { value: `= $idempotencyKey('refund', payload.order.id, ${name}.sku)` },
          body: `= { 'sku': ${name}.sku }`,
        },
      );
      expect(pairs(errorsOf(doc)), name).toEqual([[at("as"), "map-item-name-reserved"]]);
    }
    // `__proto__` is not a name at all (a letter first), refused by the schema once.
    expect(pairs(errorsOf(refunds({ as: "__proto__" }, { idempotencyKey: { value: "= line.sku" } })))).toContainEqual([
      at("as"),
      "invalid-format",
    ]);
  });
});

describe("every Gateway check reaches the Gateway inside a MAP", () => {
  it("the key rules, the key lint's other codes, secrets, verify probes and the Gateway's own rules, at step pointers", () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [
        { method: "GET", body: undefined, idempotencyKey: { value: "= line.sku", bodyField: "/k" } },
        `${STEP}/idempotencyKey/bodyField`,
        "key-body-field-without-body",
      ],
      [{ body: { note: "{{ secrets.KEY }}" } }, `${STEP}/body/note`, "secret-not-allowed-here"],
      [
        { verify: { url: "http://localhost:8788/x", condition: "= true" }, method: "GET", body: undefined, idempotencyKey: undefined },
        `${STEP}/verify`,
        "verify-on-read",
      ],
      [{ method: "GET", idempotencyKey: undefined }, `${STEP}/body`, "body-not-allowed"],
      [{ url: "ftp://x" }, `${STEP}/url`, "invalid-url"],
      [{ body: "= $nope(line)" }, `${STEP}/body`, "unknown-function"],
      [{ headers: { Accept: "a", accept: "b" } }, `${STEP}/headers/accept`, "duplicate-header"],
    ];
    for (const [step, pointer, code] of cases) {
      const doc = refunds({}, step);
      const config = (doc.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config;
      for (const k of Object.keys(config)) if (config[k] === undefined) delete config[k];
      expect(pairs(errorsOf(doc)), code).toEqual([[pointer, code]]);
    }
  });

  it("accepts a secret template in a literal header of the MAP's step, as at top level", () => {
    expect(errorsOf(refunds({}, { headers: { Authorization: "Bearer {{ secrets.REFUNDS_KEY }}" } }))).toEqual([]);
    expect(pairs(errorsOf(refunds({}, { headers: { Authorization: "= 'Bearer {{ secrets.REFUNDS_KEY }}'" } })))).toEqual([
      [`${STEP}/headers/Authorization`, "secret-in-expression"],
    ]);
  });

  it("warns of a write without a key inside a MAP, at the step's config", () => {
    const doc = refunds();
    delete (doc.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config.idempotencyKey;
    const result = validateDefinition(doc);
    expect(result.ok).toBe(true);
    if (result.ok) expect(pairs(result.warnings)).toEqual([[STEP, "write-without-key"]]);
  });

  it("compiles `collect` and the step's expressions and refuses a secret in `collect`", () => {
    expect(pairs(errorsOf(refunds({ collect: "= { 'sku': line.sku " })))).toEqual([["/vertices/1/config/collect", "expression-syntax"]]);
    expect(pairs(errorsOf(refunds({ collect: "= '{{ secrets.KEY }}'" })))).toEqual([
      ["/vertices/1/config/collect", "secret-not-allowed-here"],
    ]);
  });

  it("the step-inputs analysis counts `items`, `collect` and the step's reads as the MAP's own (version 2)", () => {
    const doc = {
      id: "inputs",
      vertices: [
        { id: "received", type: "ENTRY_POINT" },
        { id: "quote", type: "TRANSFORM", config: { output: "= payload.x" } },
        { id: "rates", type: "TRANSFORM", config: { output: "= payload.y" } },
        {
          id: "each",
          type: "MAP",
          config: {
            items: "= steps.quote.lines",
            as: "line",
            collect: "= { 'rate': steps.rates.eur, 'sku': line.sku, 'i': index }",
            step: { type: "TRANSFORM", config: { output: "= line.amount" } },
          },
        },
      ],
      edges: [
        { from: "received", to: "quote" },
        { from: "received", to: "rates" },
        { from: "quote", to: "each" },
        { from: "rates", to: "each" },
      ],
    };
    const result = validateDefinition(doc);
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const spec = stepInputsOf(result.definition);
    expect(STEP_INPUTS_VERSION).toBe(2);
    expect(spec.vertices.each).toEqual({ all: false, payload: false, steps: ["quote", "rates"] });
  });
});

describe("a MAP's step through a connector", () => {
  const refundsConnector = ConnectorDefinition.parse({
    name: "refunds",
    baseUrl: "http://localhost:8788/payments",
    key: { rule: { fields: ["order", "sku"], format: "plain" } },
  });
  const connectors = new Map<string, StoredConnector>([
    ["refunds", { workspace: "dev", name: "refunds", version: "a".repeat(64), definition: refundsConnector, createdAt: 0 }],
  ]);
  const through = (keyFields: Record<string, string>, config: Record<string, unknown> = {}) => {
    const doc = refunds(config);
    (doc.vertices[1]!.config as { step: unknown }).step = {
      type: "GATEWAY",
      config: { connector: "refunds", operation: "refund", method: "POST", path: "/refunds", keyFields, body: "= line" },
    };
    return doc;
  };
  const errors = (doc: unknown) => {
    const resolution = resolveConnectors(doc, connectors);
    const result = validateDefinition(resolution.document);
    return authorsErrors(resolution, result.ok ? [] : result.errors);
  };

  it("resolves it into the MAP's step, key and provenance included", () => {
    const resolution = resolveConnectors(through({ order: "= payload.order.id", sku: "= line.sku" }), connectors);
    expect(resolution.errors).toEqual([]);
    const result = validateDefinition(resolution.document);
    expect(result.ok ? [] : result.errors).toEqual([]);
    if (!result.ok) return;
    const map = result.definition.vertices[1]!;
    if (map.type !== "MAP" || map.config.step.type !== "GATEWAY") throw new Error("not a MAP with a GATEWAY step");
    expect(map.config.step.config).toMatchObject({
      url: "http://localhost:8788/payments/refunds",
      idempotencyKey: { value: '= "refund-" & (payload.order.id) & "-" & (line.sku)' },
      connector: { name: "refunds", operation: "refund" },
    });
  });

  it("refuses keyFields that do not read the item, or only its index, once, at keyFields", () => {
    const ignores = errors(through({ order: "= payload.order.id", sku: "= payload.order.sku" }));
    expect(ignores.map((e) => e.code)).toEqual(["map-item-key-ignores-item"]);
    expect(ignores[0]!.pointer).toMatch(new RegExp(`^${STEP}/keyFields`));
    const fromIndex = errors(through({ order: "= payload.order.id", sku: "= index" }));
    expect(fromIndex.map((e) => e.code)).toEqual(["map-item-key-from-index"]);
    expect(fromIndex[0]!.pointer).toMatch(new RegExp(`^${STEP}/keyFields`));
  });

  it("refuses a connector whose key rule is a fixed expression that ignores the item, once, at `connector`", () => {
    const fixed = ConnectorDefinition.parse({
      name: "fixed",
      baseUrl: "http://localhost:8788/payments",
      key: { rule: { expression: "= 'refund-' & payload.order.id" } },
    });
    const withFixed = new Map(connectors);
    withFixed.set("fixed", { workspace: "dev", name: "fixed", version: "b".repeat(64), definition: fixed, createdAt: 0 });
    const doc = through({ order: "= payload.order.id", sku: "= line.sku" });
    (doc.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config = {
      connector: "fixed",
      method: "POST",
      path: "/refunds",
      body: "= line",
    };
    const resolution = resolveConnectors(doc, withFixed);
    const result = validateDefinition(resolution.document);
    const refused = authorsErrors(resolution, result.ok ? [] : result.errors);
    expect(pairs(refused)).toEqual([[`${STEP}/connector`, "map-item-key-ignores-item"]]);
    expect(refused[0]!.message).toContain('connector "fixed"');
  });

  it("reads a `__proto__` field of the item in keyFields safely", () => {
    expect(errors(through({ order: "= payload.order.id", sku: "= line.__proto__" }))).toEqual([]);
  });

  it("refuses an unknown connector and a missing key field at the step's pointers", () => {
    const doc = through({ order: "= payload.order.id" });
    expect(pairs(errors(doc))).toEqual([[`${STEP}/keyFields`, "connector-key-field-missing"]]);
    const unknown = through({ order: "= payload.order.id", sku: "= line.sku" });
    (unknown.vertices[1]!.config as { step: { config: Record<string, unknown> } }).step.config.connector = "nope";
    expect(pairs(errors(unknown))).toEqual([[`${STEP}/connector`, "connector-not-found"]]);
  });
});

describe("PUT /v1/workflows refuses a bad MAP with 422 and saves nothing", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it.each([
    [
      "map-item-key-ignores-item",
      {},
      { idempotencyKey: { value: "= $idempotencyKey('refund', payload.order.id)" } },
      `${STEP}/idempotencyKey/value`,
    ],
    [
      "map-item-key-from-index",
      {},
      { idempotencyKey: { value: "= 'r-' & payload.order.id & '-' & index" } },
      `${STEP}/idempotencyKey/value`,
    ],
    ["map-output-too-large", { maxCollectBytes: 16_384, maxItems: 1000 }, {}, "/vertices/1/config/maxCollectBytes"],
    ["invalid-format", { items: "payload.order.lines" }, {}, "/vertices/1/config/items"],
    ["invalid-too-big", { concurrency: 51 }, {}, "/vertices/1/config/concurrency"],
    ["invalid-too-big", { maxItems: 1001 }, {}, "/vertices/1/config/maxItems"],
    [
      "map-nested",
      { step: { type: "MAP", config: { items: "= line.parts", step: { type: "TRANSFORM", config: { output: 1 } } } } },
      {},
      "/vertices/1/config/step/type",
    ],
    [
      "map-item-name-reserved",
      { as: "execution" },
      { idempotencyKey: { value: "= $idempotencyKey('r', execution.workflowId, line.sku)" } },
      "/vertices/1/config/as",
    ],
  ] as const)("%s", async (code, config, step, pointer) => {
    const id = unique("map");
    const res = await callApp(h, "PUT", `/v1/workflows/${id}`, { body: refunds(config, step, id) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { errors: ValidationError[] };
    expect(body.errors.filter((e) => e.pointer === pointer).map((e) => e.code)).toEqual([code]);
    expect((await callApp(h, "GET", `/v1/workflows/${id}`)).status).toBe(404);
  });

  it("saves a good MAP (201) and serves it back", async () => {
    const id = unique("map");
    const res = await callApp(h, "PUT", `/v1/workflows/${id}`, { body: refunds({}, {}, id) });
    expect(res.status).toBe(201);
    expect((await callApp(h, "GET", `/v1/workflows/${id}`)).status).toBe(200);
  });
});
