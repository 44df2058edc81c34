/**
 * Names of a JavaScript object's prototype in a definition (issue 26, finding 1): a key's body
 * field through `__proto__`, `constructor` or `prototype` is refused at save with its pointer; a
 * name such as `toString` is an ordinary member everywhere validation looks; and the operator's
 * query in docs/definitions.md finds the stored versions saved before the rule.
 */
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import definitionsDoc from "../../docs/definitions.md?raw";
import { WorkflowDefinition } from "../../src/definitions/schema";
import { saveWorkflow } from "../../src/definitions/store";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

function errorsOf(input: unknown): ValidationError[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors;
}

/** entry → pay, a POST whose key is declared by `declaration`. */
const keyed = (id: string, declaration: Record<string, unknown>, config: Record<string, unknown> = {}) => ({
  id,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: {} },
    {
      id: "pay",
      type: "GATEWAY",
      config: {
        method: "POST",
        url: "http://localhost:8788/checkout/payments",
        body: { order: "= payload.order.id" },
        idempotencyKey: { value: "= $idempotencyKey('pay', payload.order.id)", ...declaration },
        ...config,
      },
    },
  ],
  edges: [{ from: "received", to: "pay" }],
});

const BODY_FIELD = "/vertices/1/config/idempotencyKey/bodyField";

describe("a key's body field through a prototype name", () => {
  it.each(["/__proto__/x", "/__proto__", "/constructor", "/payment/constructor/key", "/prototype/key"])(
    "refuses %s at its pointer, naming the pointer",
    (bodyField) => {
      const errors = errorsOf(keyed("proto", { bodyField }));
      expect(errors.map((e) => [e.pointer, e.code])).toEqual([[BODY_FIELD, "key-body-field-prototype"]]);
      expect(errors[0]!.message).toContain(JSON.stringify(bodyField));
      expect(errors[0]!.message).toMatch(/another member, such as `\/idempotency_key`, or in a header/);
    },
  );

  it("is judged on the raw document, beside a schema error elsewhere in the config", () => {
    const errors = errorsOf(keyed("proto", { bodyField: "/__proto__/x" }, { timeoutMs: -1 }));
    expect(errors.map((e) => e.code)).toContain("key-body-field-prototype");
  });

  it("accepts names that only contain one, and a built-in method's name (an ordinary member)", () => {
    for (const bodyField of ["/proto", "/x__proto__y", "/constructors", "/toString", "/payment/valueOf"]) {
      expect(errorsOf(keyed("proto", { bodyField }))).toEqual([]);
    }
    // The literal body's own member is what counts: a body that sets `toString` is refused for that.
    expect(errorsOf(keyed("proto", { bodyField: "/toString" }, { body: { toString: "x" } })).map((e) => e.code)).toEqual([
      "key-body-field-set",
    ]);
  });

  it("PUT /v1/workflows answers 422 with the pointer and the code", async () => {
    const response = await SELF.fetch("http://idemflow.test/v1/workflows/proto-put", {
      method: "PUT",
      headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
      body: JSON.stringify(keyed("proto-put", { bodyField: "/__proto__/x" })),
    });
    expect(response.status).toBe(422);
    const problem = await response.json<{ errors: ValidationError[] }>();
    expect(problem.errors.map((e) => [e.pointer, e.code])).toEqual([[BODY_FIELD, "key-body-field-prototype"]]);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe("a member named __proto__ (it would vanish from the saved version)", () => {
  // As a client sends it: JSON keeps `__proto__` as an ordinary member.
  const document = JSON.parse(
    JSON.stringify(keyed("proto-member", { header: "Idempotency-Key" }))
      .replace('"body":{', '"headers":{"__proto__":"x","constructor":"kept"},"body":{"__proto__":1,')
      .replace('"config":{}', '"config":{}'),
  ) as unknown;

  it("is refused at save, where it stands (a header, a body field), while `constructor` is kept", () => {
    expect(errorsOf(document).map((e) => [e.pointer, e.code])).toEqual([
      ["/vertices/1/config/headers/__proto__", "prototype-member"],
      ["/vertices/1/config/body/__proto__", "prototype-member"],
    ]);
    const withoutProto = JSON.parse(JSON.stringify(document).replace('"__proto__":"x",', "").replace('"__proto__":1,', "")) as unknown;
    const saved = validateDefinition(withoutProto);
    expect(saved.ok).toBe(true);
    if (saved.ok) expect(saved.definition.vertices[1]!.config).toMatchObject({ headers: { constructor: "kept" } });
  });

  it("PUT /v1/workflows answers 422 naming it, and stores nothing", async () => {
    const response = await SELF.fetch("http://idemflow.test/v1/workflows/proto-member", {
      method: "PUT",
      headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
      body: JSON.stringify(document),
    });
    expect(response.status).toBe(422);
    const problem = await response.json<{ errors: ValidationError[] }>();
    expect(problem.errors.map((e) => e.code)).toEqual(["prototype-member", "prototype-member"]);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM workflows WHERE workflow_id = 'proto-member'").first("n")).toBe(0);
  });
});

describe("the key lint with a variable named like a built-in", () => {
  it("does not take `$toString` or `$constructor` bound in the key for a forbidden function", () => {
    for (const name of ["toString", "constructor", "valueOf"]) {
      const value = `= ($${name} := function($v){ $v }; $idempotencyKey('pay', $${name}(payload.order.id)))`;
      expect(errorsOf(keyed("lint", { value, header: "X-Key" }))).toEqual([]);
    }
    // A real forbidden function is still reported.
    expect(errorsOf(keyed("lint", { value: "= $idempotencyKey('pay', $now())", header: "X-Key" })).map((e) => e.code)).toContain(
      "idempotency-key-unstable",
    );
  });
});

describe("the operator's query for stored versions with such a pointer (docs/definitions.md)", () => {
  const query = /<!-- prototype-pointer-query -->\s*```sql\n([\s\S]*?)```/.exec(definitionsDoc)?.[1];

  it("lists exactly the versions whose key travels through a prototype name, against D1", async () => {
    expect(query).toBeDefined();
    const workspace = "proto-query";
    // Saved with the schema's parse only: as versions saved before the rule are stored.
    const store = async (id: string, declaration: Record<string, unknown>) => {
      const definition = WorkflowDefinition.parse(keyed(id, declaration));
      return (await saveWorkflow(env.DB, workspace, definition, Date.now())).version;
    };
    const flagged = [
      await store("q-proto-nested", { bodyField: "/__proto__/x" }),
      await store("q-proto-alone", { bodyField: "/__proto__" }),
      await store("q-constructor", { bodyField: "/payment/constructor/key" }),
      await store("q-prototype", { bodyField: "/prototype" }),
      await store("q-header", { header: "__proto__" }),
    ];
    for (const [id, declaration] of [
      ["q-plain", { bodyField: "/idempotency_key" }],
      ["q-lookalike", { bodyField: "/x__proto__y/a_proto_b" }],
      ["q-tostring", { bodyField: "/toString" }],
      ["q-header-ok", { header: "X-Proto" }],
    ] as const) {
      await store(id, declaration);
    }
    // Another member of the definition named like one is not a key pointer.
    await saveWorkflow(
      env.DB,
      workspace,
      WorkflowDefinition.parse(keyed("q-elsewhere", { bodyField: "/k" }, { headers: { constructor: "x" } })),
      Date.now(),
    );

    const { results } = await env.DB.prepare(query!).all<{ workspace: string; workflow_id: string; version: string; declared: string }>();
    const mine = results.filter((r) => r.workspace === workspace);
    expect(mine.map((r) => r.version).sort()).toEqual([...flagged].sort());
    expect(mine.find((r) => r.workflow_id === "q-constructor")?.declared).toBe("/payment/constructor/key");
    expect(mine.find((r) => r.workflow_id === "q-header")?.declared).toBe("__proto__");
  });
});
