import { describe, expect, it } from "vitest";
import { compile, evaluate, evaluateValue, ExpressionError, DEFAULT_LIMITS } from "../../src/expressions/evaluate";
import { idempotencyKey, sha256Of } from "../../src/expressions/key-helpers";
import { parameterText, arityOf } from "../../src/expressions/native-function";
import { originalBuiltin, PARAMETERS, SIGNATURES } from "../../src/expressions/size-limits";
import jsonata from "jsonata";

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
    const deep = await failure(
      evaluate("($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100))", {}, { maxDepth: 50, maxSteps: 100_000 }),
    );
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
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => evaluate("$sum($map([1..100], function($v){ $v }))", { i }, limits)),
    );
    expect(results).toEqual(Array(10).fill(5050));
  });
});

describe("size limits", () => {
  it("refuses $pad('', 1e9) before allocating it, within milliseconds", async () => {
    const started = Date.now();
    const error = await failure(evaluate("$pad('', 1e9)", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/\$pad.*1000000000 characters.*limit of 1048576.*maxStringLength/);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("refuses a $pad whose multi-character padding would be huge even though the width is small", async () => {
    // JSONata builds padLength copies of the pad string before trimming: 100 000 × 1 000 characters.
    const error = await failure(evaluate("$pad('', 100000, $pad('', 1000, 'ab'))", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/padding/);
  });

  it("refuses a $join of a 200 000-element generated list into a huge string", async () => {
    // The 200 000-element list itself is already refused (JSONata's sequence limit or ours).
    const error = await failure(evaluate("$join($append([1..100000], [1..100000]).$string(), '------')", {}));
    expect(["size-limit", "sequence-limit", "step-limit"]).toContain(error.code);
  });

  it("$join checks the joined length before joining", async () => {
    // 100 000 parts + 99 999 separators of 20 characters ≈ 2.1 M characters.
    const error = await failure(evaluate("$join($split($pad('', 100000, 'x'), ''), $pad('', 20, '-'))", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/^\$join would be a string of 2099980 characters/);
  });

  it("stops repeated & doubling in a recursive function", async () => {
    const error = await failure(evaluate("($double := function($s, $n){ $n = 0 ? $s : $double($s & $s, $n - 1) }; $double('x', 64))", {}));
    expect(["size-limit", "step-limit"]).toContain(error.code);
    expect(error.message).toMatch(/concatenation|limit/);
  });

  it("bounds the total a loop builds, not only each value", async () => {
    // Each string is under the 1 MiB cap, but 5 000 of them would be 5 GB.
    const error = await failure(evaluate("$count($map([1..5000], function($i){ $pad('', 1000000) }))", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/maxProducedSize/);
  });

  it("charges built-ins passed by reference to higher-order functions", async () => {
    // $uppercase by reference: each call builds a 100 000-character string; 1 000 of them exceed
    // maxProducedSize. (Not $join: with JSONata's arity, $map passes it the index as separator.)
    const source = "($s := $pad('', 100000, 'x'); $count($map([1..1000], function($i){ $s }) ~> $map($uppercase)))";
    const error = await failure(evaluate(source, {}));
    expect(error.code).toBe("size-limit");
  });

  it("refuses $string of a structure whose JSON would be huge, before building it", async () => {
    const source = "($s := $pad('', 1000000, 'x'); $string([$s, $s, $s, $s]))";
    const error = await failure(evaluate(source, {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/^\$string/);
  });

  it("refuses the implicit $string that & applies to a huge structure", async () => {
    const error = await failure(evaluate("($s := $pad('', 1000000, 'x'); [$s, $s, $s] & '')", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/& operand/);
  });

  it("refuses a $replace whose result would be huge, for string and regex patterns", async () => {
    const big = "($s := $pad('', 100000, 'x'); ";
    expect((await failure(evaluate(`${big}$replace($s, 'x', 'yyyyyyyyyyyyyyyyyyyy'))`, {}))).code).toBe("size-limit");
    expect((await failure(evaluate(`${big}$replace($s, /(x)/, '$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1'))`, {}))).code).toBe("size-limit");
  });

  it("refuses a $split into more parts than a list may hold", async () => {
    const error = await failure(evaluate("$count($split($pad('', 200000, 'x'), ''))", {}));
    expect(error.code).toBe("size-limit");
    expect(error.message).toMatch(/\$split would be a list of 100001 items/);
  });

  it("honours a custom maxStringLength", async () => {
    expect(await evaluate("$pad('x', 100)", {})).toHaveLength(100);
    const error = await failure(evaluate("$pad('x', 100)", {}, { maxStringLength: 50 }));
    expect(error.code).toBe("size-limit");
    expect(error.message).toContain("limit of 50");
  });

  it("leaves normal use of the shadowed built-ins unchanged", async () => {
    expect(await evaluate("$pad('x', 5)", {})).toBe("x    ");
    expect(await evaluate("$pad('x', -5, '#')", {})).toBe("####x");
    expect(await evaluate("$join(['a','b'], ',')", {})).toBe("a,b");
    expect(await evaluate("$join(payload.tags)", { payload: { tags: ["a", "b"] } })).toBe("ab");
    expect(await evaluate("$string({'a':1})", {})).toBe('{"a":1}');
    expect(await evaluate("$string({'a':[1, 2.5]}, true)", {})).toBe('{\n  "a": [\n    1,\n    2.5\n  ]\n}');
    expect(await evaluate("$replace('abcabc', 'b', 'XY')", {})).toBe("aXYcaXYc");
    expect(await evaluate("$replace('John Smith', /(\\w+)\\s(\\w+)/, '$2, $1')", {})).toBe("Smith, John");
    expect(await evaluate("$replace('a1b22', /\\d+/, function($m){ '<' & $m.match & '>' })", {})).toBe("a<1>b<22>");
    expect(await evaluate("$replace('aaa', 'a', 'b', 2)", {})).toBe("bba");
    expect(await evaluate("$split('a,b,c', ',')", {})).toEqual(["a", "b", "c"]);
    expect(await evaluate("$split('a,b,c', ',', 2)", {})).toEqual(["a", "b"]);
    expect(await evaluate("$map([1,2,3], $string)", {})).toEqual(["1", "2", "3"]);
    expect(await evaluate("'a' & 1 & {'b': true}", {})).toBe('a1{"b":true}');
    expect(await evaluate("$uppercase(payload.name) & '!'", { payload: { name: "ada" } })).toBe("ADA!");
    // Signature errors are JSONata's own.
    expect((await failure(evaluate("$pad(1, 5)", {}))).code).toBe("T0410");
  });

  it("shadows the built-ins only for idemflow's compiled expressions, with JSONata's own signatures", async () => {
    // registerFunction on one expression does not leak into plain JSONata.
    expect(await jsonata("$pad('', 2000000)").evaluate({})).toHaveLength(2_000_000);
    for (const [name, signature] of Object.entries(SIGNATURES)) {
      expect((await originalBuiltin(name)).signature?.definition, name).toBe(signature);
    }
    expect(await evaluate("$keys({'a': 1, 'b': 2})", {})).toEqual(["a", "b"]);
  });

  it("registers each bounded built-in with JSONata's own parameter list and arity", async () => {
    expect(Object.keys(PARAMETERS).sort()).toEqual(Object.keys(SIGNATURES).sort());
    for (const name of Object.keys(SIGNATURES)) {
      const original = (await originalBuiltin(name)).implementation;
      expect(PARAMETERS[name], name).toBe(parameterText(original));
      expect(arityOf(PARAMETERS[name]!), name).toBe(original.length);
    }
  });

  it("keeps the bounded built-ins usable in every position: partially applied, by reference, chained", async () => {
    expect(await evaluate("$substring(?, 0, ?)('hello', 2)", {})).toBe("he");
    expect(await evaluate("($d := $substringAfter(?, '@') ~> $substringBefore(?, '.'); $d('ada@example.com'))", {})).toBe("example");
    expect(await evaluate("$reduce([[1], [2], [3]], $append)", {})).toEqual([1, 2, 3]);
    expect(await evaluate("$map(['a b', 'c'], $split(?, ' '))", {})).toEqual([["a", "b"], ["c"]]);
    // Partial applications are bounded too: the wrapper runs underneath.
    expect((await failure(evaluate("$pad(?, 2000000)('x')", {}))).code).toBe("size-limit");
  });

  it("$idempotencyKey still works next to the bounded built-ins", async () => {
    const key = await evaluate("$idempotencyKey('charge', $pad(payload.id, 3, '0'), $join(payload.tags, ','))", {
      payload: { id: "7", tags: ["a"] },
    });
    expect(key).toBe(await idempotencyKey("charge", "700", "a"));
  });
});

describe("key helpers", () => {
  it("$idempotencyKey is stable, scoped by prefix, bounded, and order-sensitive in its parts", async () => {
    const a = await evaluate("$idempotencyKey('charge', payload.order.id, payload.order.total)", {
      payload: { order: { id: "A-1", total: 10 } },
    });
    expect(a).toBe(await idempotencyKey("charge", "A-1", 10));
    expect(a).toMatch(/^charge-[A-Za-z0-9_-]{43}$/);
    // `prefix-<hash of the parts>` (docs/definitions.md): another prefix scopes the same parts apart.
    const ship = await idempotencyKey("ship", "A-1", 10);
    expect(ship).not.toBe(a);
    expect(ship).toBe((a as string).replace(/^charge-/, "ship-"));
    expect(await idempotencyKey("charge", 10, "A-1")).not.toBe(a);
    // canonical: key order inside objects does not matter
    expect(await idempotencyKey("c", { b: 1, a: 2 })).toBe(await idempotencyKey("c", { a: 2, b: 1 }));
  });

  it("$idempotencyKey refuses a missing business value instead of collapsing keys", async () => {
    const error = await failure(evaluate("$idempotencyKey('charge', payload.order.id)", { payload: {} }));
    expect(error.message).toMatch(/missing/);
  });

  it("$idempotencyKey and $sha256 refuse a number a float cannot carry exactly, instead of giving neighbours one key", async () => {
    // A destination answered with a 20-digit id: it reads as 12345678901234567000, like its neighbours.
    const big = JSON.parse('{"id":12345678901234567891}') as { id: number };
    const direct = await failure(evaluate("$idempotencyKey('refund', steps.charge.body.id)", { steps: { charge: { body: big } } }));
    expect(direct.message).toMatch(/\$idempotencyKey: value 1 holds the number 12345678901234567000, an integer beyond ±9007199254740991/);
    expect(direct.message).toMatch(/as a string/);
    const nested = await failure(
      evaluate("$idempotencyKey('c', 'A', payload.order)", { payload: { order: { lines: [{ n: 1 }, { n: 2 ** 60 }] } } }),
    );
    expect(nested.message).toMatch(/value 2 holds the number 1152921504606847000 at \/lines\/1\/n/);
    const computed = await failure(evaluate("$idempotencyKey('c', payload.n * 1e10)", { payload: { n: 1e10 } }));
    expect(computed.message).toMatch(/integer beyond/);
    expect((await failure(evaluate("$sha256(payload)", { payload: { a: [big.id] } }))).message).toMatch(
      /\$sha256: the value holds the number .* at \/a\/0/,
    );
    await expect(idempotencyKey("c", Infinity)).rejects.toThrow(/not a finite number/);
    await expect(sha256Of({ x: -Infinity })).rejects.toThrow(/not a finite number/);
    // The edge of the rule, fractions and digits in strings are keys as before.
    expect(
      await evaluate("$idempotencyKey('c', payload.n, 0.1, '12345678901234567891')", { payload: { n: Number.MAX_SAFE_INTEGER } }),
    ).toBe(await idempotencyKey("c", 9007199254740991, 0.1, "12345678901234567891"));
    expect(await sha256Of("12345678901234567891")).toMatch(/^[0-9a-f]{64}$/);
  });

  it("behave like any JSONata function with their signatures: partial application, higher-order use, signature errors", async () => {
    const context = { payload: { order: { id: "A-1" }, items: ["x", "y"] } };
    expect(await evaluate("$map(payload.items, $idempotencyKey('line', ?))", context)).toEqual([
      await idempotencyKey("line", "x"),
      await idempotencyKey("line", "y"),
    ]);
    expect(await evaluate("$idempotencyKey(?, payload.order.id)('charge')", context)).toBe(await idempotencyKey("charge", "A-1"));
    expect(await evaluate("payload.order.id ~> $idempotencyKey('charge', ?)", context)).toBe(await idempotencyKey("charge", "A-1"));
    expect(await evaluate("$map(payload.items, $sha256)", context)).toEqual([await sha256Of("x"), await sha256Of("y")]);
    expect(await evaluate("$sha256(?)('abc')", {})).toBe(await sha256Of("abc"));
    // Still variadic when called.
    expect(await evaluate("$idempotencyKey('c', 1, 2, 3)", {})).toBe(await idempotencyKey("c", 1, 2, 3));
    // Signatures: JSONata's own type errors.
    expect((await failure(evaluate("$idempotencyKey(1, 'x')", {}))).code).toBe("T0410");
    expect((await failure(evaluate("$idempotencyKey('p')", {}))).code).toBe("T0410");
    // A value missing when the partial application is called is refused, as in a direct call.
    expect((await failure(evaluate("$idempotencyKey('line', ?)(payload.nope)", context))).message).toMatch(/missing/);
  });

  it("$sha256 hashes strings directly and other values canonically", async () => {
    expect(await sha256Of("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await evaluate("$sha256(payload)", { payload: { b: 1, a: 2 } })).toBe(await sha256Of({ a: 2, b: 1 }));
  });
});

describe("ExpressionError codes", () => {
  it("names idemflow's bounds, passes JSONata's own codes through, and falls back to the phase", async () => {
    const codeOf = (source: string, context: unknown = {}) =>
      evaluate(source, context).then(
        () => "no error",
        (error: ExpressionError) => error.code,
      );
    expect(await codeOf("[1..10000000]")).toBe("sequence-limit");
    expect(await codeOf("($f := function($x){ $f($x) }; $f(1))")).toBe("step-limit");
    expect(await codeOf("$substring(1, 'x')")).toMatch(/^T\d{4}$/);
    expect(await codeOf("payload.(")).toMatch(/^S\d{4}$/);
    // A key helper's own refusal carries no JSONata code: the phase stands in.
    expect(await codeOf("$idempotencyKey('c', payload.missing)", { payload: {} })).toBe("evaluate");
  });
});
