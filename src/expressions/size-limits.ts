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
 * A shadowing version delegates to JSONata's own implementation, and is registered with the same
 * signature, the same arity and the same parameter list (`native-function.ts`), so it behaves like
 * the original in every position: called, partially applied (`$substring(?, 0, ?)`), or passed to
 * a higher-order function (`$reduce(lists, $append)`). The originals are obtained by evaluating
 * `$name` once in a plain expression (the variable lookup yields the built-in's definition object
 * `{ implementation, signature }`); that is asynchronous, so it happens on first use and is
 * memoised for the life of the isolate.
 *
 * The budget is read from the evaluation's base frame (`environment.base`), where `evaluate()`
 * binds it: one lookup instead of a walk up the frame chain on every node, and an expression
 * cannot shadow it with a variable of the same name.
 */
import jsonata from "jsonata";
import { ExpressionError } from "./errors";
import { declareParameters } from "./native-function";

export interface SizeBudget {
  /** Evaluation steps (nodes evaluated) so far, and the most allowed. */
  steps: number;
  maxSteps: number;
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

type Frame = jsonata.Environment & { base?: jsonata.Environment };

/** The evaluation's budget, bound on its base frame by `evaluate()`; absent in plain JSONata use. */
function budgetIn(environment: Frame | undefined): SizeBudget | undefined {
  return (environment?.base ?? environment)?.lookup(SIZE_BUDGET) as SizeBudget | undefined;
}

function budgetOf(focus: Focus | undefined): SizeBudget | undefined {
  return budgetIn(focus?.environment);
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
  "split",
  "substring",
  "substringBefore",
  "substringAfter",
  "lowercase",
  "uppercase",
  "trim",
  "formatNumber",
  "formatBase",
  "formatInteger",
  "base64encode",
  "base64decode",
  "encodeUrlComponent",
  "encodeUrl",
  "decodeUrlComponent",
  "decodeUrl",
  "fromMillis",
  "match",
  "append",
  "spread",
  "reverse",
  "sort",
  "shuffle",
  "distinct",
  "zip",
  "map",
  "filter",
  "keys",
  "each",
  "lookup",
];

const originals = new Map<string, Promise<BuiltinDefinition>>();
/** The same definitions once resolved, so that later calls need not wait for a promise. */
const resolvedOriginals = new Map<string, BuiltinDefinition>();

/** JSONata's own definition of built-in `name`, looked up once in an expression that shadows nothing. */
export function originalBuiltin(name: string): Promise<BuiltinDefinition> {
  let found = originals.get(name);
  if (!found) {
    found = (jsonata(`$${name}`).evaluate(undefined) as Promise<BuiltinDefinition>).then((definition) => {
      resolvedOriginals.set(name, definition);
      return definition;
    });
    originals.set(name, found);
  }
  return found;
}

/**
 * The parameter lists of the shadowed built-ins, exactly as JSONata 2.x's sources declare them
 * (checked by a test): partial application parses them, and their arity steers the higher-order
 * functions. `string`'s default value and `zip`'s empty list are JSONata's own, quirks included
 * (its `$string(?)` does not parse, nor does ours).
 */
export const PARAMETERS: Record<string, string> = {
  pad: "str, width, char",
  join: "strs, separator",
  string: "arg, prettify = false",
  replace: "str, pattern, replacement, limit",
  split: "str, separator, limit",
  substring: "str, start, length",
  substringBefore: "str, chars",
  substringAfter: "str, chars",
  lowercase: "str",
  uppercase: "str",
  trim: "str",
  formatNumber: "value, picture, options",
  formatBase: "value, radix",
  formatInteger: "value, picture",
  base64encode: "str",
  base64decode: "str",
  encodeUrlComponent: "str",
  encodeUrl: "str",
  decodeUrlComponent: "str",
  decodeUrl: "str",
  fromMillis: "millis, picture, timezone",
  match: "str, regex, limit",
  append: "arg1, arg2",
  spread: "arg",
  reverse: "arr",
  sort: "arr, comparator",
  shuffle: "arr",
  distinct: "arr",
  zip: "",
  map: "arr, func",
  filter: "arr, func",
  keys: "arg",
  each: "obj, func",
  lookup: "input, key",
};

/** The JSONata signatures of the shadowed built-ins (copied from JSONata 2.x, checked by a test). */
export const SIGNATURES: Record<string, string> = {
  pad: "<s-ns?:s>",
  join: "<a<s>s?:s>",
  string: "<x-b?:s>",
  replace: "<s-(sf)(sf)n?:s>",
  split: "<s-(sf)n?:a<s>>",
  substring: "<s-nn?:s>",
  substringBefore: "<s-s:s>",
  substringAfter: "<s-s:s>",
  lowercase: "<s-:s>",
  uppercase: "<s-:s>",
  trim: "<s-:s>",
  formatNumber: "<n-so?:s>",
  formatBase: "<n-n?:s>",
  formatInteger: "<n-s:s>",
  base64encode: "<s-:s>",
  base64decode: "<s-:s>",
  encodeUrlComponent: "<s-:s>",
  encodeUrl: "<s-:s>",
  decodeUrlComponent: "<s-:s>",
  decodeUrl: "<s-:s>",
  fromMillis: "<n-s?s?:s>",
  match: "<s-f<s:o>n?:a<o>>",
  append: "<xx:a>",
  spread: "<x-:a<o>>",
  reverse: "<a:a>",
  sort: "<af?:a>",
  shuffle: "<a:a>",
  distinct: "<x:x>",
  zip: "<a+>",
  map: "<af>",
  filter: "<af>",
  keys: "<x-:a<s>>",
  each: "<o-f:a>",
  lookup: "<x-s:x>",
};

/** Calls JSONata's implementation as JSONata would (a generator-style one yields its value). */
function invoke(original: BuiltinDefinition, focus: unknown, args: unknown[]): unknown {
  const result = original.implementation.apply(focus, args);
  const maybeIterator = result as { next?: unknown } | null;
  if (
    maybeIterator !== null &&
    typeof maybeIterator === "object" &&
    !Array.isArray(maybeIterator) &&
    typeof maybeIterator.next === "function"
  ) {
    return (maybeIterator as Iterator<unknown>).next().value;
  }
  return result;
}

function isPromise(value: unknown): value is Promise<unknown> {
  return value !== null && typeof value === "object" && typeof (value as { then?: unknown }).then === "function";
}

/**
 * A bounded call. Synchronous whenever JSONata's own implementation is (a promise only where
 * the original returns one, or the first time the original is looked up), so the wrapper adds no
 * turns of the event loop to an evaluation.
 */
function bounded(name: string, focus: Focus, args: unknown[]): unknown {
  const budget = budgetOf(focus);
  const original = resolvedOriginals.get(name);
  if (!original) return originalBuiltin(name).then(() => bounded(name, focus, args));
  if (!budget) return invoke(original, focus, args);
  const checked = PRECHECKS[name]?.(budget, args);
  if (isPromise(checked)) return checked.then(() => callCharged(name, original, focus, args, budget));
  return callCharged(name, original, focus, args, budget);
}

function callCharged(name: string, original: BuiltinDefinition, focus: Focus, args: unknown[], budget: SizeBudget): unknown {
  if (name === "split") {
    // Cap how many parts JSONata builds; a caller-given smaller limit is passed on unchanged.
    const limit = typeof args[2] === "number" ? Math.min(args[2], budget.maxItems + 1) : budget.maxItems + 1;
    args = [args[0], args[1], limit];
  }
  const result = invoke(original, focus, args);
  if (isPromise(result)) return result.then((value) => settle(name, budget, value));
  return settle(name, budget, result);
}

function settle(name: string, budget: SizeBudget, result: unknown): unknown {
  checkValue(budget, result, `$${name}`);
  charge(budget, result);
  return result;
}

/** Shadow the size-sensitive built-ins of `expression` with bounded versions. */
export function registerBoundedBuiltins(expression: jsonata.Expression): void {
  for (const name of SHADOWED) {
    const wrapper = declareParameters(
      function (this: Focus, ...args: unknown[]) {
        return bounded(name, this, args);
      },
      name,
      PARAMETERS[name] ?? "",
    );
    expression.registerFunction(name, wrapper, SIGNATURES[name]);
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

function stepError(maxSteps: number): ExpressionError {
  return new ExpressionError(
    `the expression ran for more than ${maxSteps} evaluation steps and was stopped; look for unbounded recursion or very large ranges`,
    "step-limit",
    undefined,
  );
}

/**
 * The `__evaluate_exit` hook for `expression`: counts the step and checks the node's result.
 *
 * Steps are counted on the way out rather than in, so that one hook (and one await per node in
 * JSONata's evaluator) does both jobs. That still bounds every runaway: an evaluation that never
 * ends either nests without end (JSONata's own `stack` guard stops it, see evaluate.ts) or keeps
 * finishing nodes (a tail-recursive loop, a huge `$map`), which this counts.
 */
export function exitHook(expression: jsonata.Expression) {
  const operandsOfConcat = concatOperands(expression.ast());
  return (expr: AstNode, _input: unknown, environment: Frame, result: unknown): void => {
    const budget = budgetIn(environment);
    if (!budget) return;
    if (++budget.steps > budget.maxSteps) throw stepError(budget.maxSteps);
    if (typeof result === "string" || Array.isArray(result)) {
      checkValue(budget, result, expr.type === "binary" && expr.value === "&" ? "the concatenation (&)" : "a value");
      if (expr.type === "path" ? Array.isArray(result) : BUILDING_NODES.has(expr.type ?? "")) charge(budget, result);
    }
    if (result !== null && typeof result === "object" && operandsOfConcat.has(expr)) {
      checkString(budget, estimateJsonLength(result, budget.maxStringLength), "the text of an & operand");
    }
  };
}
