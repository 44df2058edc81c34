/**
 * Size bounds for expression results.
 *
 * The step budget bounds time, but a single step can allocate without limit: `$pad('', 1e9)`,
 * `$join` of a long list, `$string` of a structure full of repeated references, or `&` doubling a
 * string are each one step. Workers have 128 MB per isolate, and running out of it kills the
 * isolate instead of failing the step. So an evaluation is also bounded in what it builds:
 *
 * - every string is at most `maxStringLength` characters and every list at most `maxItems` items;
 * - the strings and lists it builds add up to at most `maxProducedSize` (characters + items), so a
 *   loop cannot allocate a just-under-the-limit value thousands of times.
 *
 * Two mechanisms, both deterministic:
 *
 * 1. The `__evaluate_exit` hook sees every node's result. It checks the per-value caps and charges
 *    what operators build (`&`, ranges, array constructors, paths). It runs after the value exists,
 *    which is fine for `&` (one concatenation at most doubles a string that already passed the cap)
 *    but too late for a built-in that allocates a gigabyte before returning. It also catches the
 *    implicit `$string` that `&` applies to non-string operands, by sizing those operands first.
 * 2. The built-ins are shadowed, per compiled expression, by versions that first check the size
 *    they are about to build (`$pad`, `$join`, `$string`, `$replace`, `$split`) and charge every
 *    result they return. Function calls are charged here rather than in the exit hook so that a
 *    built-in passed by reference (`$map(list, $join)`) is charged as well.
 *
 * A shadowing version delegates to JSONata's own implementation, so semantics and signatures stay
 * identical. The originals are obtained by evaluating `$name` once in a plain expression (the
 * variable lookup yields the built-in's definition object `{ implementation, signature }`); that
 * is asynchronous, so it happens on first use and is memoised for the life of the isolate.
 */
import jsonata from "jsonata";
import { ExpressionError } from "./errors";

export interface SizeBudget {
  /** Characters + items built so far by this evaluation. */
  produced: number;
  maxStringLength: number;
  maxItems: number;
  maxProducedSize: number;
}

/** Binding name under which an evaluation's `SizeBudget` is passed. */
export const SIZE_BUDGET = "__idemflow_size";

interface BuiltinDefinition {
  implementation: (this: unknown, ...args: unknown[]) => unknown;
  signature?: { definition: string };
}

interface Focus {
  environment: jsonata.Environment;
}

function budgetOf(focus: Focus | undefined): SizeBudget | undefined {
  return focus?.environment?.lookup(SIZE_BUDGET) as SizeBudget | undefined;
}

function sizeError(message: string): ExpressionError {
  return new ExpressionError(message, "size-limit", undefined);
}

function checkString(budget: SizeBudget, length: number, what: string): void {
  if (length > budget.maxStringLength) {
    throw sizeError(
      `${what} would be a string of ${length} characters, more than the limit of ${budget.maxStringLength} ` +
        "(maxStringLength); work on smaller values (for example with $substring) or keep large content out of expressions",
    );
  }
}

function checkItems(budget: SizeBudget, length: number, what: string): void {
  if (length > budget.maxItems) {
    throw sizeError(
      `${what} would be a list of ${length} items, more than the limit of ${budget.maxItems}; ` +
        "filter or slice the list before building on it",
    );
  }
}

/** Check a value against the per-value caps (strings and lists only; other values are small or references). */
function checkValue(budget: SizeBudget, value: unknown, what: string): void {
  if (typeof value === "string") checkString(budget, value.length, what);
  else if (Array.isArray(value)) checkItems(budget, value.length, what);
}

function charge(budget: SizeBudget, value: unknown): void {
  const size = typeof value === "string" || Array.isArray(value) ? value.length : 0;
  if (size === 0) return;
  budget.produced += size;
  if (budget.produced > budget.maxProducedSize) {
    throw sizeError(
      `the expression built more than ${budget.maxProducedSize} characters and list items in total and was stopped ` +
        "(maxProducedSize); look for a loop that builds large strings or lists",
    );
  }
}

function isFunctionValue(value: object): boolean {
  const v = value as { _jsonata_lambda?: unknown; _jsonata_function?: unknown };
  return v._jsonata_lambda === true || v._jsonata_function === true;
}

/**
 * A lower estimate of `JSON.stringify(value).length`, walked without allocating, that stops as soon
 * as it passes `stopAbove` (so the walk visits at most about `stopAbove` nodes, since each counts ≥ 1).
 * Escapes and indentation are not counted: the estimate only has to stop gigantic outputs before
 * they are built; the real result is checked again afterwards.
 */
export function estimateJsonLength(value: unknown, stopAbove: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && total <= stopAbove) {
    const v = stack.pop();
    if (typeof v === "string") total += v.length + 2;
    else if (typeof v === "number") total += 8;
    else if (typeof v === "boolean" || v === null) total += 5;
    else if (typeof v === "function" || v === undefined) total += 2;
    else if (Array.isArray(v)) {
      total += 1 + v.length;
      for (let i = v.length - 1; i >= 0 && stack.length <= stopAbove; i -= 1) stack.push(v[i]);
    } else if (typeof v === "object") {
      if (isFunctionValue(v)) {
        total += 2;
        continue;
      }
      total += 1;
      for (const key in v) {
        total += key.length + 4;
        stack.push((v as Record<string, unknown>)[key]);
        if (total > stopAbove || stack.length > stopAbove) break;
      }
    }
  }
  return total;
}

function stringLength(value: unknown): number {
  return typeof value === "string" ? value.length : 0;
}

/** Checks run before a built-in allocates; each throws `size-limit` if the result would be too large. */
const PRECHECKS: Record<string, (budget: SizeBudget, args: unknown[]) => void | Promise<void>> = {
  pad(budget, [str, width, char]) {
    if (typeof str !== "string" || typeof width !== "number") return;
    const target = Math.abs(Math.trunc(width));
    checkString(budget, target, "$pad");
    // JSONata builds the padding as `padLength` copies of `char` before trimming it to length, so a
    // multi-character pad string multiplies the allocation.
    const charLength = typeof char === "string" && char.length > 0 ? char.length : 1;
    checkString(budget, Math.max(0, target - str.length) * charLength, "$pad's padding");
  },
  join(budget, [strs, separator]) {
    if (!Array.isArray(strs)) return;
    const sep = stringLength(separator);
    let total = Math.max(0, strs.length - 1) * sep;
    for (const s of strs) total += stringLength(s);
    checkString(budget, total, "$join");
  },
  string(budget, [arg]) {
    if (arg === null || typeof arg !== "object") return;
    checkString(budget, estimateJsonLength(arg, budget.maxStringLength), "$string");
  },
  async replace(budget, [str, pattern, replacement, limit]) {
    if (typeof str !== "string" || typeof replacement !== "string") return;
    const max = typeof limit === "number" ? limit : Infinity;
    let bound = str.length;
    if (typeof pattern === "string") {
      if (pattern === "") return; // JSONata rejects it itself
      // A string pattern inserts the replacement literally: the exact length is countable.
      let count = 0;
      for (let at = str.indexOf(pattern); at !== -1 && count < max; at = str.indexOf(pattern, at + pattern.length)) count += 1;
      bound += count * (replacement.length - pattern.length);
    } else if (typeof pattern === "function") {
      // A regex (JSONata hands it over wrapped as an async function): walk the matches once without
      // building anything. Each `$` in the replacement inserts at most one of the match or its
      // groups, so this bounds the substitute's length. A custom matcher that returns another shape
      // is left to the check on the result.
      const dollars = replacement.split("$").length - 1;
      type Match = { match?: unknown; groups?: unknown; next?: unknown };
      let match = (await (pattern as (s: string) => unknown)(str)) as Match | undefined;
      for (let count = 0; match !== undefined && count < max && bound <= budget.maxStringLength; count += 1) {
        if (typeof match.match !== "string" || !Array.isArray(match.groups) || typeof match.next !== "function") return;
        let longest = match.match.length;
        for (const group of match.groups as unknown[]) longest = Math.max(longest, stringLength(group));
        bound += replacement.length + dollars * longest;
        match = (await (match.next as () => unknown)()) as Match | undefined;
      }
    } else {
      return; // a custom matcher function: checked on the result only
    }
    checkString(budget, bound, "$replace");
  },
};

/** Built-ins that build strings or lists: each call's result is checked and charged. */
const SHADOWED = [
  ...Object.keys(PRECHECKS),
  "split", "substring", "substringBefore", "substringAfter", "lowercase", "uppercase", "trim",
  "formatNumber", "formatBase", "formatInteger", "base64encode", "base64decode", "encodeUrlComponent",
  "encodeUrl", "decodeUrlComponent", "decodeUrl", "fromMillis", "match", "append", "spread", "reverse",
  "sort", "shuffle", "distinct", "zip", "map", "filter", "keys", "each", "lookup",
];

const originals = new Map<string, Promise<BuiltinDefinition>>();

/** JSONata's own definition of built-in `name`, looked up once in an expression that shadows nothing. */
export function originalBuiltin(name: string): Promise<BuiltinDefinition> {
  let found = originals.get(name);
  if (!found) {
    found = jsonata(`$${name}`).evaluate(undefined) as Promise<BuiltinDefinition>;
    originals.set(name, found);
  }
  return found;
}

/** The JSONata signatures of the shadowed built-ins (copied from JSONata 2.x, checked by a test). */
export const SIGNATURES: Record<string, string> = {
  pad: "<s-ns?:s>", join: "<a<s>s?:s>", string: "<x-b?:s>", replace: "<s-(sf)(sf)n?:s>", split: "<s-(sf)n?:a<s>>",
  substring: "<s-nn?:s>", substringBefore: "<s-s:s>", substringAfter: "<s-s:s>", lowercase: "<s-:s>",
  uppercase: "<s-:s>", trim: "<s-:s>", formatNumber: "<n-so?:s>", formatBase: "<n-n?:s>", formatInteger: "<n-s:s>",
  base64encode: "<s-:s>", base64decode: "<s-:s>", encodeUrlComponent: "<s-:s>", encodeUrl: "<s-:s>",
  decodeUrlComponent: "<s-:s>", decodeUrl: "<s-:s>", fromMillis: "<n-s?s?:s>", match: "<s-f<s:o>n?:a<o>>",
  append: "<xx:a>", spread: "<x-:a<o>>", reverse: "<a:a>", sort: "<af?:a>", shuffle: "<a:a>", distinct: "<x:x>",
  zip: "<a+>", map: "<af>", filter: "<af>", keys: "<x-:a<s>>", each: "<o-f:a>", lookup: "<x-s:x>",
};

async function callOriginal(name: string, focus: unknown, args: unknown[]): Promise<unknown> {
  const original = await originalBuiltin(name);
  let result = original.implementation.apply(focus, args);
  // JSONata also accepts generator-style implementations: take their first value, as it does.
  const maybeIterator = result as { next?: unknown } | null;
  if (maybeIterator !== null && typeof maybeIterator === "object" && !Array.isArray(maybeIterator) && typeof maybeIterator.next === "function") {
    result = (maybeIterator as Iterator<unknown>).next().value;
  }
  return await result;
}

async function bounded(name: string, focus: Focus, args: unknown[]): Promise<unknown> {
  const budget = budgetOf(focus);
  if (!budget) return callOriginal(name, focus, args);
  await PRECHECKS[name]?.(budget, args);
  if (name === "split") {
    // Cap how many parts JSONata builds; a caller-given smaller limit is passed on unchanged.
    const limit = typeof args[2] === "number" ? Math.min(args[2], budget.maxItems + 1) : budget.maxItems + 1;
    args = [args[0], args[1], limit];
    const parts = await callOriginal(name, focus, args);
    checkValue(budget, parts, "$split");
    charge(budget, parts);
    return parts;
  }
  const result = await callOriginal(name, focus, args);
  checkValue(budget, result, `$${name}`);
  charge(budget, result);
  return result;
}

/** Shadow the size-sensitive built-ins of `expression` with bounded versions. */
export function registerBoundedBuiltins(expression: jsonata.Expression): void {
  for (const name of SHADOWED) {
    expression.registerFunction(
      name,
      function (this: Focus, ...args: unknown[]) {
        return bounded(name, this, args);
      },
      SIGNATURES[name],
    );
  }
}

interface AstNode {
  type?: string;
  value?: unknown;
  lhs?: unknown;
  rhs?: unknown;
}

/** The AST nodes that are operands of `&`: JSONata turns non-string operands into JSON text itself. */
function concatOperands(ast: unknown): WeakSet<object> {
  const operands = new WeakSet<object>();
  const seen = new WeakSet<object>();
  const stack: unknown[] = [ast];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== "object" || seen.has(node)) continue;
    seen.add(node);
    const n = node as AstNode;
    if (n.type === "binary" && n.value === "&") {
      if (n.lhs && typeof n.lhs === "object") operands.add(n.lhs);
      if (n.rhs && typeof n.rhs === "object") operands.add(n.rhs);
    }
    for (const child of Object.values(node)) if (child && typeof child === "object") stack.push(child);
  }
  return operands;
}

/** Node types whose string/list results are newly built by an operator (function calls charge themselves). */
const BUILDING_NODES = new Set(["binary", "unary", "path", "wildcard", "descendant"]);

/** The `__evaluate_exit` hook for `expression`. */
export function sizeExitHook(expression: jsonata.Expression) {
  const operandsOfConcat = concatOperands(expression.ast());
  return (expr: AstNode, _input: unknown, environment: jsonata.Environment, result: unknown): void => {
    const budget = environment.lookup(SIZE_BUDGET) as SizeBudget | undefined;
    if (!budget) return;
    const what = expr.type === "binary" && expr.value === "&" ? "the concatenation (&)" : "a value";
    checkValue(budget, result, what);
    if (expr.type === "path" ? Array.isArray(result) : BUILDING_NODES.has(expr.type ?? "")) charge(budget, result);
    if (result !== null && typeof result === "object" && operandsOfConcat.has(expr)) {
      checkString(budget, estimateJsonLength(result, budget.maxStringLength), "the text of an & operand");
    }
  };
}
