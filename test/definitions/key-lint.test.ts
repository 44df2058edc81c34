import { describe, expect, it } from "vitest";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

function withKey(key: string, headerName = "Idempotency-Key"): unknown {
  return {
    id: "keyed",
    vertices: [
      { id: "received", type: "ENTRY_POINT" },
      {
        id: "charge",
        type: "GATEWAY",
        config: { method: "POST", url: "http://localhost:8788/payments/charges", headers: { [headerName]: key } },
      },
    ],
    edges: [{ from: "received", to: "charge" }],
  };
}

function keyErrors(key: string, headerName?: string): ValidationError[] {
  const result = validateDefinition(withKey(key, headerName));
  return result.ok ? [] : result.errors;
}

describe("the key lint", () => {
  it.each([
    ["$now()", "= 'charge-' & $now()"],
    ["$millis()", "= 'charge-' & $string($millis())"],
    ["$random()", "= 'charge-' & $string($random())"],
    ["$shuffle()", "= $join($shuffle([payload.a, payload.b]), '-')"],
    ["execution.id", "= 'charge-' & execution.id"],
    ["$$.execution.id", "= 'charge-' & $$.execution.id"],
    ["$.execution.id", "= 'charge-' & $.execution.id"],
    ["execution['id']", "= 'charge-' & execution['id']"],
    ["$lookup(execution, 'id')", "= $idempotencyKey('charge', $lookup(execution, 'id'))"],
    ["$lookup($$, …)", "= $idempotencyKey('charge', $lookup($lookup($$, 'execution'), 'id'))"],
    ["$sha256($$)", "= 'charge-' & $sha256($$)"],
    ["**.id at the root", "= $idempotencyKey('charge', **.id)"],
    ["attempt", "= 'charge-' & payload.order.id & '-' & $string(attempt)"],
    ["$eval", "= $eval('$now()')"],
    ["a $-variable assigned from $now()", "= ($t := $now(); 'charge-' & payload.order.id & $t)"],
    ["a variable aliasing $millis", "= ($clock := $millis; 'charge-' & $string($clock()))"],
    ["a variable holding execution", "= ($e := execution; 'charge-' & $e.id)"],
    ["a function calling $random", "= ($salt := function() { $random() }; $idempotencyKey('charge', payload.order.id, $salt()))"],
    ["a function given execution", "= ($id := function($x) { $x.id }; 'charge-' & $id(execution))"],
    ["a function reading the root", "= ($f := function() { execution.id }; 'charge-' & $f())"],
  ])("rejects a key that depends on %s", (_what, key) => {
    const errors = keyErrors(key);
    expect(errors.length).toBeGreaterThan(0);
    for (const error of errors) {
      expect(error).toMatchObject({ pointer: "/vertices/1/config/headers/Idempotency-Key", code: "idempotency-key-unstable" });
      expect(error.message).toContain("business data");
    }
  });

  it("names the variable or function a forbidden source was reached through", () => {
    expect(keyErrors("= ($t := $now(); 'k-' & payload.id & $t)")[0]?.message).toContain("through `$t`");
    expect(keyErrors("= ($f := function() { $random() }; 'k-' & payload.id & $f())")[0]?.message).toContain("through the function `$f`");
  });

  it.each(["Idempotency-Key", "idempotency-key", "IDEMPOTENCY-KEY", "idempotency-KEY"])(
    "checks the header in any letter case: %s",
    (name) => {
      expect(keyErrors("= 'c-' & $now()", name).map((e) => e.code)).toEqual(["idempotency-key-unstable"]);
    },
  );

  it.each([
    ["the key helper over payload fields", "= $idempotencyKey('charge', payload.order.id)"],
    ["a concatenation of payload fields", "= 'charge-' & payload.order.id & '-' & $string(payload.order.total)"],
    ["a previous step's output", "= 'ship-' & steps.charge.body.id"],
    ["$$.payload", "= 'charge-' & $$.payload.order.id"],
    ["the workflow id with business data", "= execution.workflowId & '-' & payload.order.id"],
    ["a field named like a forbidden one inside the payload", "= 'charge-' & payload.execution.id & payload.attempt"],
    ["a variable assigned from business data", "= ($o := payload.order; $idempotencyKey('charge', $o.id))"],
    ["a filter using $ as the item", "= 'charge-' & payload.items[$.sku = 'A'].id"],
    ["a function over business data", "= ($k := function($o) { 'charge-' & $o.id }; $k(payload.order))"],
  ])("accepts a key built from %s", (_what, key) => {
    expect(keyErrors(key)).toEqual([]);
  });

  it("rejects a literal key and an expression that reads no business data: every execution would share them", () => {
    expect(keyErrors("charge-1").map((e) => e.code)).toEqual(["idempotency-key-constant"]);
    expect(keyErrors("= 'charge-' & execution.workflowId").map((e) => e.code)).toEqual(["idempotency-key-constant"]);
  });

  it("does not lint other headers", () => {
    const doc = withKey("= $idempotencyKey('c', payload.id)") as { vertices: Array<{ config: { headers?: Record<string, string> } }> };
    doc.vertices[1]!.config.headers!["X-Request-Time"] = "= $now()";
    expect(validateDefinition(doc).ok).toBe(true);
  });
});
