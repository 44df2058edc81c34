/**
 * What makes a string an expression: a definition's string that begins with `=` is a JSONata
 * expression (evaluated by ./evaluate.ts), any other string a literal. The rule belongs to the
 * expressions; the definitions' schema (src/definitions/schema.ts) states it to authors from here.
 */

/** A string that begins with `=` is a JSONata expression; any other string is a literal. */
export const EXPRESSION_PREFIX = "=";
export function isExpression(value: unknown): value is string {
  return typeof value === "string" && value.startsWith(EXPRESSION_PREFIX);
}
