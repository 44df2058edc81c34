import { describe, expect, it } from "vitest";
import { compile, evaluate, evaluateValue, ExpressionError, DEFAULT_LIMITS } from "../../src/expressions/evaluate";
import { idempotencyKey, sha256Of } from "../../src/expressions/key-helpers";

async function failure(promise: Promise<unknown>): Promise<ExpressionError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ExpressionError);
    return error as ExpressionError;
  }
  throw new Error("expected the evaluation to fail");
}

describe("bounded evaluation", () => {
  it("evaluates against the context", async () => {
    expect(await evaluate("payload.a + 1", { payload: { a: 41 } })).toBe(42);
    expect(await evaluate("payload.missing", { payload: {} })).toBeUndefined();
  });

  it("stops the infinite (tail) recursion of the issue within its step budget, with a clear error", async () => {
    const started = Date.now();
    const error = await failure(evaluate("($f := function($x){ $f($x) }; $f(1))", {}));
    expect(["step-limit", "depth-limit"]).toContain(error.code);
    expect(error.message).toMatch(/stopped/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("stops a non-tail infinite recursion at the depth limit", async () => {
    const error = await failure(evaluate("($f := function($x){ 1 + $f($x) }; $f(1))", {}));
    expect(error.code).toBe("depth-limit");
    expect(error.message).toContain(String(DEFAULT_LIMITS.maxDepth));
  });

  it("honours custom limits", async () => {
    const error = await failure(evaluate("$sum($map([1..1000], function($v){ $v * 2 }))", {}, { maxDepth: 250, maxSteps: 500 }));
    expect(error.code).toBe("step-limit");
    expect(await evaluate("$sum($map([1..1000], function($v){ $v * 2 }))", {})).toBe(1001000);
    const deep = await failure(evaluate("($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100))", {}, { maxDepth: 50, maxSteps: 100_000 }));
    expect(deep.code).toBe("depth-limit");
  });

  it("refuses a huge range before allocating it", async () => {
    const error = await failure(evaluate("$count([1..10000000])", {}));
    expect(error.code).toBe("sequence-limit");
    expect(error.message).toMatch(/range|sequence/);
  });

  it("stops a large range walked element by element", async () => {
    const error = await failure(evaluate("$sum($map([1..100000], function($v){ $v * $v }))", {}));
    expect(error.code).toBe("step-limit");
  });

  it("reports syntax errors with their position", () => {
    try {
      compile("payload.(");
      throw new Error("expected a syntax error");
    } catch (error) {
      expect(error).toBeInstanceOf(ExpressionError);
      expect((error as ExpressionError).position).toBe(9);
      expect((error as ExpressionError).message).toMatch(/^syntax error at position 9/);
    }
  });

  it("evaluates `=` strings inside JSON values and leaves other strings alone", async () => {
    const value = { a: "= payload.x * 2", b: ["literal", "= payload.y"], c: { d: 1, e: null } };
    expect(await evaluateValue(value, { payload: { x: 2, y: "z" } })).toEqual({ a: 4, b: ["literal", "z"], c: { d: 1, e: null } });
  });

  it("keeps the budget per evaluation, so concurrent evaluations do not share it", async () => {
    const limits = { maxDepth: 250, maxSteps: 2_000 };
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => evaluate("$sum($map([1..100], function($v){ $v }))", { i }, limits)));
    expect(results).toEqual(Array(10).fill(5050));
  });
});

describe("key helpers", () => {
  it("$idempotencyKey is stable, scoped by prefix, bounded, and order-sensitive in its parts", async () => {
    const a = await evaluate("$idempotencyKey('charge', payload.order.id, payload.order.total)", { payload: { order: { id: "A-1", total: 10 } } });
    expect(a).toBe(await idempotencyKey("charge", "A-1", 10));
    expect(a).toMatch(/^charge-[A-Za-z0-9_-]{43}$/);
    expect(await idempotencyKey("ship", "A-1", 10)).not.toBe((a as string).replace(/^charge/, "ship") + "x");
    expect(await idempotencyKey("ship", "A-1", 10)).toMatch(/^ship-/);
    expect(await idempotencyKey("charge", 10, "A-1")).not.toBe(a);
    // canonical: key order inside objects does not matter
    expect(await idempotencyKey("c", { b: 1, a: 2 })).toBe(await idempotencyKey("c", { a: 2, b: 1 }));
  });

  it("$idempotencyKey refuses a missing business value instead of collapsing keys", async () => {
    const error = await failure(evaluate("$idempotencyKey('charge', payload.order.id)", { payload: {} }));
    expect(error.message).toMatch(/missing/);
  });

  it("$sha256 hashes strings directly and other values canonically", async () => {
    expect(await sha256Of("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await evaluate("$sha256(payload)", { payload: { b: 1, a: 2 } })).toBe(await sha256Of({ a: 2, b: 1 }));
  });
});
