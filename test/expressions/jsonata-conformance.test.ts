/**
 * Apart from its bounds, an idemflow expression behaves exactly like JSONata: every expression
 * below gives the same result through `evaluate()` as through plain `jsonata(source).evaluate()`,
 * after the engine's documented normalisation of results to plain JSON (`normalise`: sequences
 * become arrays, `undefined` stays `undefined`). Errors must match too (same JSONata code).
 *
 * The list is ordinary expressions as users copy them from JSONata's documentation, with extra
 * weight on the built-ins idemflow wraps (size-limits.ts) in every position: called, partially
 * applied, passed to a higher-order function, chained with `~>`.
 */
import jsonata from "jsonata";
import { describe, expect, it } from "vitest";
import { evaluate, normalise } from "../../src/expressions/evaluate";

const context = {
  payload: {
    order: {
      id: "A-1001",
      total: 1234.5,
      currency: "EUR",
      email: "ada.lovelace@example.com",
      created: "2026-12-02T10:20:30.000Z",
      items: [
        { sku: "B-2", qty: 2, price: 10, tags: ["gift"] },
        { sku: "A-1", qty: 1, price: 25.5, tags: [] },
        { sku: "C-3", qty: 5, price: 3, tags: ["bulk", "gift"] },
        { sku: "A-9", qty: 2, price: 7.25, tags: ["bulk"] },
      ],
    },
    customer: { name: "Ada Lovelace", tier: "gold", address: { city: "London", zip: "NW1" } },
    words: ["delta", "alpha", "charlie", "bravo"],
    numbers: [3, 1, 4, 1, 5, 9, 2, 6],
    nested: [[1, 2], [3], [4, 5, 6]],
  },
  steps: { charge: { status: 201, body: { id: "ch_1", amount: 1234.5 } } },
  execution: { id: "ex-1", workflowId: "order-fulfilment", trigger: "webhook" },
};

const EXPRESSIONS: string[] = [
  // paths, predicates, wildcards
  "payload.order.id",
  "payload.order.items.sku",
  "payload.order.items[0].sku",
  "payload.order.items[-1].sku",
  "payload.order.items[qty > 1].sku",
  "payload.order.items[price > 5 and 'gift' in tags].sku",
  "payload.order.items[[0..1]].sku",
  "payload.customer.*",
  "payload.**.city",
  "payload.order.items.tags",
  "payload.order.items.(qty * price)",
  "payload.missing.path",
  "steps.charge.status = 201",
  "$.execution.workflowId",
  // numbers and arithmetic
  "payload.order.total * 1.2",
  "$round(payload.order.total * 1.19, 2)",
  "$floor(7.8) + $ceil(1.2) - $abs(-3)",
  "$power(2, 10) % 7",
  "$sqrt(16)",
  "$sum(payload.order.items.(qty * price))",
  "$max(payload.numbers)",
  "$min(payload.numbers)",
  "$average(payload.numbers)",
  "$count(payload.order.items)",
  "$number('42.5') + 1",
  "$formatNumber(1234.5, '#,##0.00')",
  "$formatBase(255, 16)",
  "$formatInteger(42, 'w')",
  "[1..5]",
  // strings
  "'charge-' & payload.order.id",
  "$string(payload.order.total)",
  "$string({'a': [1, 2]})",
  "$string({'a': 1}, true)",
  "$length(payload.customer.name)",
  "$substring(payload.customer.name, 0, 3)",
  "$substring(payload.customer.name, -8)",
  "$substringBefore(payload.order.email, '@')",
  "$substringAfter(payload.order.email, '@')",
  "$uppercase(payload.customer.tier) & $lowercase('X')",
  "$trim('  a   b  ')",
  "$pad('7', 5, '0')",
  "$pad('7', -5, '#')",
  "$contains(payload.order.email, 'example')",
  "$split('a,b,,c', ',')",
  "$split('a,b,c', ',', 2)",
  "$join(payload.words, '-')",
  "$join(payload.order.items.sku)",
  "$replace('abcabc', 'b', 'XY')",
  "$replace('abcabc', 'b', 'XY', 1)",
  "$base64encode('idemflow') ~> $base64decode()",
  "$encodeUrlComponent('a b&c') & '|' & $decodeUrlComponent('a%20b')",
  "$encodeUrl('https://x.test/a b') & '|' & $decodeUrl('https://x.test/a%20b')",
  // regular expressions
  "$match('ab12cd345', /\\d+/)",
  "$match('ab12cd345', /\\d+/, 1).match",
  "$replace('John Smith', /(\\w+)\\s(\\w+)/, '$2, $1')",
  "$contains('Hello', /^h/i)",
  "$split('a1b22c', /\\d+/)",
  "payload.words[$contains($, /a$/)]",
  // booleans and conditionals
  "$boolean('') or $boolean([0, 1])",
  "$not(payload.customer.tier = 'gold')",
  "$exists(payload.order.id) and $exists(payload.nope) = false",
  "payload.customer.tier = 'gold' ? payload.order.total * 0.9 : payload.order.total",
  "payload.order.total > 2000 ? 'big'",
  "'gold' in payload.customer.tier",
  // arrays and objects
  "$append(payload.words, ['echo'])",
  "$append(1, 2)",
  "$reverse(payload.words)",
  "$distinct(payload.numbers)",
  "$sort(payload.words)",
  "$sort(payload.order.items, function($a, $b){ $a.price > $b.price }).sku",
  "payload.order.items^(>price).sku",
  "payload.order.items^(qty, >sku).sku",
  "$zip([1, 2, 3], ['a', 'b', 'c'])",
  "$keys(payload.customer)",
  "$lookup(payload.customer, 'tier')",
  "$spread(payload.customer.address)",
  "$merge([{'a': 1}, {'b': 2}, {'a': 3}])",
  "$each(payload.customer.address, function($v, $k){ $k & '=' & $v })",
  "$type(payload.numbers) & ' ' & $type(payload.customer) & ' ' & $type(null)",
  "{ 'order': payload.order.id, 'amount': payload.order.total, 'lines': $count(payload.order.items) }",
  "payload.order.items{ sku: qty * price }",
  "payload.order.items.tags{ $: $count($) }",
  "payload.order.items{ $string(qty): $sum(price) }",
  "payload.nested.$",
  "payload.nested[1]",
  "[payload.nested]",
  "payload.order.items.{ 'sku': sku, 'line': qty * price }",
  "payload.order ~> | items | { 'total': qty * price } |",
  // higher-order functions and lambdas
  "$map(payload.numbers, function($n){ $n * 2 })",
  "$map(payload.numbers, function($v, $i){ $v * $i })",
  "$map(payload.numbers, function($v, $i, $a){ $count($a) })",
  "$filter(payload.numbers, function($n){ $n > 3 })",
  "$filter(payload.numbers, function($v, $i){ $i < 2 })",
  "$reduce(payload.numbers, function($acc, $n){ $acc + $n })",
  "$reduce(payload.numbers, function($acc, $n){ $acc + $n }, 100)",
  "$sift(payload.customer, function($v){ $type($v) = 'string' })",
  "$single(payload.order.items, function($i){ $i.sku = 'C-3' }).qty",
  "($double := function($x){ $x * 2 }; $map([1, 2, 3], $double))",
  "($fact := function($n){ $n <= 1 ? 1 : $n * $fact($n - 1) }; $fact(10))",
  "(function($x, $y){ $x & $y })('a', 'b')",
  "($twice := function($f){ function($x){ $f($f($x)) } }; $twice(function($n){ $n + 3 })(1))",
  // built-ins passed by reference to higher-order functions
  "$reduce([[1], [2], [3]], $append)",
  "$map(payload.words, $uppercase)",
  "$map(payload.numbers, $string)",
  "$map([[1, 2], [3]], $reverse)",
  "$map(['a b', 'c'], $split(?, ' '))",
  "$map(payload.nested, $join(?, ''))",
  "$filter(['a', '', 'b'], $boolean)",
  "$map(['x', 'y'], $pad(?, 3, '.'))",
  "$each({'a': 'x'}, $lowercase)",
  // partial application
  "$substring(?, 0, ?)('hello', 2)",
  "$substring('hello', ?, 2)(1)",
  "($first3 := $substring(?, 0, 3); $first3(payload.customer.name))",
  "($domain := $substringAfter(?, '@') ~> $substringBefore(?, '.'); $domain(payload.order.email))",
  "$replace(?, 'a', 'o')('banana')",
  "$join(?, '+')(payload.words)",
  "$split(?, ',')('a,b')",
  "$append(?, [9])([1, 2])",
  "$zip(?, [3, 4])([1, 2])",
  "$sum(?)(payload.numbers)",
  // chaining
  "payload.order.email ~> $substringAfter('@') ~> $uppercase()",
  "payload.words ~> $sort() ~> $join(', ')",
  "payload.numbers ~> $filter(function($n){ $n % 2 = 0 }) ~> $map(function($n){ $n * $n }) ~> $sum()",
  "payload.customer.name ~> $lowercase ~> $split(' ')",
  // dates (fixed inputs only)
  "$fromMillis(1700000000000)",
  "$fromMillis(1700000000000, '[Y0001]-[M01]-[D01]')",
  "$toMillis(payload.order.created)",
  // blocks, variables, misc
  "($a := 2; $b := 3; $a * $b)",
  "payload.order.items#$i[$i > 1].sku",
  "payload.order.items@$it.tags@$t.{ 'sku': $it.sku, 'tag': $t }",
  "($assert(true, 'never'); 'ok')",
];

/** Known JSONata failures: the engine must fail the same way (same JSONata error code). */
const FAILURES: string[] = [
  "$string(?)(1)", // JSONata's own $string declares a default parameter, which its partial application cannot parse
  "$pad(1, 5)",
  "$substring(123, 0, 1)",
  "$reduce([1, 2], function($a){ $a })",
  "$sum(['a'])",
  "$undefinedFunction(1)",
  "$error('custom failure')",
  "1 + 'a'",
  "$each({'a': 'x'}, $substring)", // $each passes (value, key): the key is not a number
  "$map(?, $uppercase)(payload.words)", // JSONata hands the partially applied $map a raw definition
];

async function plain(source: string): Promise<unknown> {
  return normalise(await jsonata(source).evaluate(context));
}

describe("expressions behave exactly like JSONata", () => {
  it("covers a broad set", () => {
    expect(EXPRESSIONS.length).toBeGreaterThanOrEqual(60);
    expect(new Set(EXPRESSIONS).size).toBe(EXPRESSIONS.length);
  });

  it.each(EXPRESSIONS)("%s", async (source) => {
    const expected = await plain(source);
    expect(await evaluate(source, context)).toStrictEqual(expected);
  });

  it.each(FAILURES)("fails like JSONata: %s", async (source) => {
    let expected: unknown;
    try {
      await plain(source);
      throw new Error("expected plain JSONata to fail");
    } catch (error) {
      expected = (error as { code?: string }).code;
    }
    await expect(evaluate(source, context)).rejects.toMatchObject({ code: expected ?? "evaluate" });
  });
});
