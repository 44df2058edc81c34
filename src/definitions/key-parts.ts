/**
 * The business values a destination key is built from, read out of its expression — so that a key
 * never collapses on absent data (SPEC section 3: an absent value, `null` or an empty string is
 * no identity). `'charge-' & payload.order.id` with no `order.id` is `"charge-"` for every such
 * order: the destination would take all of them as one operation and answer the second with the
 * first one's charge.
 *
 * Two shapes are read, the ones the connectors' key rules make (src/connectors/resolve.ts) and
 * the ones a key is written in by hand:
 * - a concatenation `a & b & …`: every operand that is not a literal is a part;
 * - `$idempotencyKey(prefix, v1, v2, …)`: every value after the prefix is a part (the helper
 *   refuses an absent value itself, ./key-helpers.ts; reading the part here names it).
 * Any other shape (a block, a condition, a lambda…) has no parts the check can tell: its value is
 * still checked as a key (an empty key is refused by its minimum length).
 *
 * The parts are sliced from the source at the operators' positions in the compiled AST (JSONata
 * records the position just after each `&` and each call's `(`), so the slices are exactly the
 * author's sub-expressions; each is evaluated on its own, against the same context, before the key.
 */
import { compile, DEFAULT_LIMITS, evaluate } from "../expressions/evaluate";
import type { KeyConstraints } from "../lib/key-constraints";
import { isNode, type AstNode } from "./ast";

/** A literal that is a value (a non-empty string, a number, `true`, `false`): never absent, not a part. */
function isPresentLiteral(node: AstNode): boolean {
  if (node.type === "string") return node.value !== "";
  if (node.type === "number") return true;
  return node.type === "value" && node.value !== null;
}

/** Parts per expression source (the definitions' key expressions: a bounded set). */
const cache = new Map<string, readonly string[]>();
const CACHE_LIMIT = 500;

/** The sources of the parts of a key expression (without its leading `=`); [] when it cannot tell. */
export function keyPartsOf(source: string): readonly string[] {
  const cached = cache.get(source);
  if (cached !== undefined) return cached;
  let parts: string[];
  try {
    parts = partsOf(source, compile(source).ast() as unknown as AstNode);
  } catch {
    parts = []; // the compile check reports it
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string);
  cache.set(source, parts);
  return parts;
}

function partsOf(source: string, root: AstNode): string[] {
  if (root.type === "binary" && root.value === "&") return concatenationParts(source, root);
  const procedure = root.procedure;
  if (root.type === "function" && isNode(procedure) && procedure.type === "variable" && procedure.value === "idempotencyKey") {
    return callParts(source, root);
  }
  return [];
}

/** `a & b & c` parses left-nested: ((a & b) & c). Its operands, sliced between the operators. */
function concatenationParts(source: string, root: AstNode): string[] {
  const operators: number[] = [];
  const operands: AstNode[] = [];
  let node: AstNode = root;
  while (node.type === "binary" && node.value === "&" && isNode(node.lhs) && isNode(node.rhs)) {
    if (typeof node.position !== "number" || source[node.position - 1] !== "&") return [];
    operators.unshift(node.position);
    operands.unshift(node.rhs);
    node = node.lhs;
  }
  operands.unshift(node);
  const bounds = [0, ...operators, source.length + 1];
  const parts: string[] = [];
  operands.forEach((operand, i) => {
    if (isPresentLiteral(operand)) return;
    parts.push(source.slice(bounds[i], bounds[i + 1]! - 1).trim());
  });
  return parts.filter((p) => p !== "");
}

/** `$idempotencyKey(prefix, v1, …)`: the values after the prefix, sliced at the call's top-level commas. */
function callParts(source: string, call: AstNode): string[] {
  const args = Array.isArray(call.arguments) ? call.arguments.filter(isNode) : [];
  if (typeof call.position !== "number" || source[call.position - 1] !== "(") return [];
  const slices = topLevelArguments(source, call.position);
  if (slices === null || slices.length !== args.length) return [];
  return slices.flatMap((slice, i) => (i === 0 || isPresentLiteral(args[i]!) ? [] : [slice.trim()]));
}

/**
 * The argument sources of a call whose `(` ends just before `start`: split at the commas outside
 * any string, name, comment or bracket, up to the matching `)`. Null when the call does not close.
 */
function topLevelArguments(source: string, start: number): string[] | null {
  const slices: string[] = [];
  let depth = 0;
  let from = start;
  for (let i = start; i < source.length; i++) {
    const c = source[i]!;
    if (c === '"' || c === "'" || c === "`") {
      i = closingQuote(source, i, c);
      if (i < 0) return null;
    } else if (c === "/" && source[i + 1] === "*") {
      i = source.indexOf("*/", i + 2);
      if (i < 0) return null;
      i++;
    } else if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) {
        if (c !== ")") return null;
        slices.push(source.slice(from, i));
        return slices;
      }
      depth--;
    } else if (c === "," && depth === 0) {
      slices.push(source.slice(from, i));
      from = i + 1;
    }
  }
  return null;
}

/** The index of the quote that closes the one at `open` (backslash escapes skipped), or -1. */
function closingQuote(source: string, open: number, quote: string): number {
  for (let i = open + 1; i < source.length; i++) {
    if (source[i] === "\\" && quote !== "`") i++;
    else if (source[i] === quote) return i;
  }
  return -1;
}

/**
 * The parts of a key expression that are absent whatever the data: a literal `null` or `''`. The
 * key lint refuses them at save (`idempotency-key-absent-part`): the step could never run.
 */
export function alwaysAbsentParts(source: string): string[] {
  return keyPartsOf(source).filter((part) => {
    try {
      const ast = compile(part).ast() as unknown as AstNode;
      return (ast.type === "value" && ast.value === null) || (ast.type === "string" && ast.value === "");
    } catch {
      return false;
    }
  });
}

/** What an absent part held: nothing, `null`, or an empty string. */
export type Absence = "no value" | "null" | "an empty string";

export function absenceOf(value: unknown): Absence | null {
  if (value === undefined) return "no value";
  if (value === null) return "null";
  if (value === "") return "an empty string";
  return null;
}

/**
 * The first part of the key expression `source` (without its `=`) that is absent in `context`, or
 * null. A part whose evaluation fails is left to the key's own evaluation, which reports it.
 */
export async function absentKeyPart(
  source: string,
  context: unknown,
  keyConstraints?: KeyConstraints,
): Promise<{ part: string; absence: Absence } | null> {
  for (const part of keyPartsOf(source)) {
    let value: unknown;
    try {
      value = await evaluate(part, context, DEFAULT_LIMITS, keyConstraints);
    } catch {
      continue;
    }
    const absence = absenceOf(value);
    if (absence !== null) return { part, absence };
  }
  return null;
}
