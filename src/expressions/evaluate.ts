/**
 * Bounded JSONata evaluation.
 *
 * A definition's expressions run inside the engine's Worker, so a runaway one must end with a
 * clear error instead of hanging it. Two bounds, both deterministic:
 *
 * - **depth**: the evaluation nesting depth, through JSONata's own `stack` option (non-tail
 *   infinite recursion ends here; JSONata turns tail calls into a loop, so
 *   `($f := function($x){ $f($x) }; $f(1))` never gets deeper and is stopped by the step budget
 *   instead). The option is fixed at compile time, so the cache is keyed by depth and source;
 * - **steps**: a count of evaluated nodes, through JSONata's `__evaluate_exit` hook (the same hook
 *   that checks sizes, see `size-limits.ts`). Wall-clock time is not a usable bound in Workers:
 *   `Date.now()` does not advance during CPU-bound work (it only moves on I/O), so JSONata's
 *   `timeout` option would never fire. A step budget is the time bound that actually holds
 *   there, and it behaves the same in tests and in production.
 *
 * - **sequence length**: a range such as `[1..10000000]` is refused before it is allocated (it
 *   costs one step but megabytes of memory; Workers have 128 MB).
 * - **size**: strings, lists and the total an evaluation builds are capped, including inside
 *   built-ins such as `$pad('', 1e9)` that allocate within one step (see `size-limits.ts`).
 *
 * Apart from these bounds an expression behaves exactly as in JSONata (test/definitions/
 * jsonata-conformance.test.ts); its result is normalised to plain JSON (`normalise`). The
 * overhead over plain JSONata is measured by `npm run bench:expressions` (docs/benchmarks.md).
 *
 * No `eval` and no `new Function` anywhere on this path (both are blocked in Workers).
 */
import jsonata from "jsonata";
import { EXPRESSION_PREFIX, isExpression } from "./prefix";
import { ExpressionError, isJsonataErrorCode } from "./errors";
import type { KeyConstraints } from "../lib/key-constraints";
import { setOwnMember } from "../lib/own-member";
import { KEY_CONSTRAINTS_BINDING, registerKeyHelpers } from "./key-helpers";
import { exitHook, registerBoundedBuiltins, SIZE_BUDGET, type SizeBudget } from "./size-limits";

export { ExpressionError };

export interface EvaluationLimits {
  /** Maximum nesting depth of evaluation (JSONata `stack`). */
  maxDepth: number;
  /** Maximum number of evaluation steps. */
  maxSteps: number;
  /** Longest string (in UTF-16 code units) any part of the expression may build. */
  maxStringLength: number;
  /**
   * Total characters + list items the evaluation may build. The per-value caps alone would let a
   * loop build a just-under-the-cap string thousands of times; this bounds the sum.
   */
  maxProducedSize: number;
}

/** Longest sequence (e.g. a range) or list an expression may build. */
export const MAX_SEQUENCE_LENGTH = 100_000;

/**
 * 200 000 steps take roughly half a second of CPU in workerd. Strings up to 1 MiB characters and
 * 16 Mi characters + items in total keep an evaluation well inside a Worker's 128 MB.
 */
export const DEFAULT_LIMITS: EvaluationLimits = {
  maxDepth: 250,
  maxSteps: 200_000,
  maxStringLength: 1_048_576,
  maxProducedSize: 16_777_216,
};

const cache = new Map<string, jsonata.Expression>();
const CACHE_LIMIT = 1_000;

/**
 * Compile a JSONata source (without the leading `=`) for evaluations nested at most `maxDepth`
 * deep. Throws `ExpressionError` with the position.
 */
export function compile(source: string, maxDepth: number = DEFAULT_LIMITS.maxDepth): jsonata.Expression {
  const cacheKey = `${maxDepth}\u0000${source}`;
  const cached = cache.get(cacheKey);
  if (cached) return cached;
  let expression: jsonata.Expression;
  try {
    // `sequence` bounds ranges at allocation; `stack` bounds the nesting depth (JSONata checks it
    // synchronously on entry to every node, at no extra cost).
    expression = jsonata(source, { sequence: MAX_SEQUENCE_LENGTH, stack: maxDepth } as jsonata.JsonataOptions);
  } catch (error) {
    throw toExpressionError(error, "compile");
  }
  expression.assign(Symbol.for("jsonata.__evaluate_exit") as unknown as string, exitHook(expression));
  registerBoundedBuiltins(expression);
  registerKeyHelpers(expression);
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string);
  cache.set(cacheKey, expression);
  return expression;
}

/**
 * Evaluate JSONata `source` (without the leading `=`) against `context`. `overrides` replaces the
 * defaults one by one. `keyConstraints`: only for a destination key's expression, whose
 * `$idempotencyKey` then shapes its keys to them (./key-shape.ts).
 */
export async function evaluate(
  source: string,
  context: unknown,
  overrides: Partial<EvaluationLimits> = DEFAULT_LIMITS,
  keyConstraints?: KeyConstraints,
): Promise<unknown> {
  const limits: EvaluationLimits = overrides === DEFAULT_LIMITS ? DEFAULT_LIMITS : { ...DEFAULT_LIMITS, ...overrides };
  const expression = compile(source, limits.maxDepth);
  const budget: SizeBudget = {
    steps: 0,
    maxSteps: limits.maxSteps,
    produced: 0,
    maxStringLength: limits.maxStringLength,
    maxItems: MAX_SEQUENCE_LENGTH,
    maxProducedSize: limits.maxProducedSize,
  };
  try {
    const bindings = keyConstraints ? { [SIZE_BUDGET]: budget, [KEY_CONSTRAINTS_BINDING]: keyConstraints } : { [SIZE_BUDGET]: budget };
    const result = await expression.evaluate(context, bindings);
    return normalise(result);
  } catch (error) {
    throw toExpressionError(error, "evaluate");
  }
}

/**
 * Evaluate a definition value: a string beginning with `=` is an expression, other strings are
 * literals, and arrays/objects are walked so that every expression inside them is evaluated.
 */
export async function evaluateValue(
  value: unknown,
  context: unknown,
  limits: Partial<EvaluationLimits> = DEFAULT_LIMITS,
  keyConstraints?: KeyConstraints,
): Promise<unknown> {
  if (isExpression(value)) return evaluate(value.slice(EXPRESSION_PREFIX.length), context, limits, keyConstraints);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const item of value) out.push(await evaluateValue(item, context, limits, keyConstraints));
    return out;
  }
  if (value !== null && typeof value === "object") {
    // Member names are the definition's: an own member whatever the name (`out["__proto__"] = {…}` would set the prototype).
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) setOwnMember(out, key, await evaluateValue(item, context, limits, keyConstraints));
    return out;
  }
  return value;
}

/**
 * JSONata results can carry sequence markers and `undefined`; turn them into plain JSON values
 * (what `JSON.stringify` keeps). `undefined` (no result) stays `undefined`. Strings, booleans and
 * finite numbers are already JSON and are returned as they are.
 */
export function normalise(value: unknown): unknown {
  if (value === undefined) return undefined;
  if (typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))) return value;
  return JSON.parse(JSON.stringify(value)) as unknown;
}

function toExpressionError(error: unknown, phase: "compile" | "evaluate"): ExpressionError {
  if (error instanceof ExpressionError) return error;
  const e = error as { code?: string; message?: string; position?: number; value?: unknown };
  if (e.code === "D1011") {
    return new ExpressionError(
      `the expression nested deeper than ${String(e.value)} levels and was stopped; look for unbounded recursion`,
      "depth-limit",
      e.position,
    );
  }
  if (e.code === "D2014" || e.code === "D2015") {
    return new ExpressionError(
      `the expression tried to build a sequence (range) longer than ${MAX_SEQUENCE_LENGTH} items and was stopped; use a smaller range`,
      "sequence-limit",
      e.position,
    );
  }
  const where = typeof e.position === "number" ? ` at position ${e.position}` : "";
  const message = e.message ?? String(error);
  return new ExpressionError(
    phase === "compile" ? `syntax error${where}: ${message}` : `evaluation failed${where}: ${message}`,
    isJsonataErrorCode(e.code) ? e.code : phase,
    e.position,
  );
}
