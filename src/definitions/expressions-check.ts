/**
 * Every expression in a definition compiles, with the engine's own `compile` (so a definition
 * that saves is one the engine can run), and calls only functions that exist: JSONata reports an
 * unknown function only when the expression runs, which for a Gateway step is too late.
 */
import { compile, ExpressionError } from "../expressions/evaluate";
import { KEY_HELPER_NAMES, KEY_HELPERS } from "../expressions/key-helpers";
import { arityOf } from "../expressions/native-function";
import { allNodes, isNode, type AstNode } from "./ast";
import type { ValidationError } from "./errors";
import { expressionSites } from "./expression-sites";

/** JSONata's built-in functions (jsonata 2.x), plus `$now`/`$millis` which it binds per expression. */
export const JSONATA_FUNCTIONS = new Set(
  (
    "sum count max min average string substring substringBefore substringAfter lowercase uppercase length trim pad " +
    "match contains replace split join formatNumber formatBase formatInteger parseInteger number floor ceil round abs " +
    "sqrt power random boolean not map zip filter single reduce sift keys lookup append exists spread merge reverse " +
    "each error assert type sort shuffle distinct base64encode base64decode encodeUrlComponent encodeUrl " +
    "decodeUrlComponent decodeUrl eval toMillis fromMillis clone now millis"
  ).split(" "),
);

export function checkExpressions(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  for (const site of expressionSites(document)) {
    if (site.source.trim() === "") {
      errors.push({
        pointer: site.pointer,
        code: "expression-empty",
        message: "the expression after `=` is empty; write a JSONata expression, or drop the `=` for a literal",
      });
      continue;
    }
    let ast: AstNode;
    try {
      ast = compile(site.source).ast() as unknown as AstNode;
    } catch (error) {
      const message = error instanceof ExpressionError ? error.message : String(error);
      errors.push({
        pointer: site.pointer,
        code: "expression-syntax",
        message: `the expression does not compile: ${message} (positions count from the character after \`=\`)`,
      });
      continue;
    }
    for (const { name, count, declared } of overfullHelperPartials(ast)) {
      errors.push({
        pointer: site.pointer,
        code: "helper-partial-arguments",
        message:
          `a partial application of \`$${name}\` takes at most ${declared} argument(s) (${KEY_HELPERS[name].parameters}), got ${count}; ` +
          `JSONata would drop the rest without a word. To key on more values, write a function, e.g. \`function($v){ ` +
          `$idempotencyKey('line', payload.order.id, $v) }\``,
      });
    }
    for (const name of unknownFunctions(ast)) {
      errors.push({
        pointer: site.pointer,
        code: "unknown-function",
        message:
          `the expression calls \`$${name}\`, which is neither a JSONata function nor an idemflow helper ` +
          `(${[...KEY_HELPER_NAMES].map((n) => `$${n}`).join(", ")}) nor a variable bound in the expression; check its spelling`,
      });
    }
  }
  return errors;
}

function unknownFunctions(ast: AstNode): string[] {
  const bound = new Set<string>();
  const called: string[] = [];
  for (const node of allNodes(ast)) {
    if (node.type === "bind" && isNode(node.lhs) && typeof node.lhs.value === "string") bound.add(node.lhs.value);
    if (node.type === "lambda" && Array.isArray(node.arguments)) {
      for (const arg of node.arguments) if (isNode(arg) && typeof arg.value === "string") bound.add(arg.value);
    }
    if ((node.type === "function" || node.type === "partial") && isNode(node.procedure) && node.procedure.type === "variable") {
      if (typeof node.procedure.value === "string") called.push(node.procedure.value);
    }
  }
  return [...new Set(called.filter((name) => !JSONATA_FUNCTIONS.has(name) && !KEY_HELPER_NAMES.has(name) && !bound.has(name)))];
}

/**
 * Partial applications of a key helper with more arguments than it declares. JSONata binds a
 * native function's partial application to its declared parameters and drops the rest, so
 * `$idempotencyKey('line', payload.order.id, ?)` would silently key on the order id alone.
 */
function overfullHelperPartials(ast: AstNode): Array<{ name: keyof typeof KEY_HELPERS; count: number; declared: number }> {
  const out: Array<{ name: keyof typeof KEY_HELPERS; count: number; declared: number }> = [];
  for (const node of allNodes(ast)) {
    if (node.type !== "partial" || !isNode(node.procedure) || node.procedure.type !== "variable") continue;
    const name = node.procedure.value;
    if (typeof name !== "string" || !Object.hasOwn(KEY_HELPERS, name)) continue;
    const helper = name as keyof typeof KEY_HELPERS;
    const declared = arityOf(KEY_HELPERS[helper].parameters);
    const count = Array.isArray(node.arguments) ? node.arguments.length : 0;
    if (count > declared) out.push({ name: helper, count, declared });
  }
  return out;
}
