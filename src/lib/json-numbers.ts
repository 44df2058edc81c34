/**
 * The one rule for numbers that may reach an identity, a stored payload or a key helper.
 *
 * JSON numbers become 64-bit floats here (JSON.parse) and in RFC 8785. A float carries every
 * integer up to 2^53 − 1 exactly; past it, neighbouring integers share one float, so the orders
 * `12345678901234567891` and `…892` would parse equal, hash to one identity, and the second would
 * silently never run. A literal past the float range (`1e400`) parses as Infinity, which JSON
 * cannot even write back.
 *
 * **The rule:** a number is accepted when its float value is finite and at most
 * `Number.MAX_SAFE_INTEGER` (2^53 − 1 = 9007199254740991) in magnitude. Every float that large is an
 * integer, so this refuses exactly the integers beyond the safe range, whatever their spelling
 * (`9007199254740992`, `12345678901234567891`, `1e20`, `-9.1e15`), the literals that round to one
 * (`9007199254740991.5`), and overflow (`1e400`, `-1e999`). It never refuses a fraction a float
 * holds (`0.1`, `4503599627370495.5`, `1e-7`); `1.0` is the number 1. Fractions with more digits
 * than a float keeps (~17 significant) are rounded like any float: that is not refused.
 *
 * Two ways to apply it, with the same verdict:
 * - `findUnsafeNumberLiteral(text)` scans raw JSON text (request bodies, stored payloads). It
 *   reads each literal from the text so a refusal can quote it as sent (after JSON.parse,
 *   `12345678901234567891` reads `12345678901234567000`) and name its JSON Pointer. A linear
 *   pass, no recursion, no allocation per value; only literals that could break the rule (more
 *   than 15 digits, or an exponent) are converted. (JSON.parse's reviver with `context.source`
 *   works in workerd too, but a reviver is a call per value and never sees its ancestors' keys.)
 * - `findUnsafeNumber(value)` walks a value already in memory (expression arguments).
 */

/** 2^53 − 1: the largest magnitude a number may have. */
export const MAX_EXACT_NUMBER = Number.MAX_SAFE_INTEGER;

/** The rule itself. */
export function isExactNumber(value: number): boolean {
  return Number.isFinite(value) && Math.abs(value) <= MAX_EXACT_NUMBER;
}

export interface UnsafeNumber {
  /** RFC 6901 JSON Pointer to the number (`""` is the whole document). */
  pointer: string;
  /** The number as written (scanner) or as JavaScript prints it (value walk). */
  literal: string;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;

/**
 * Up to 15 digits without an exponent stay below 10^15 < 2^53 − 1: such literals (nearly all of
 * them) are passed without converting.
 */
const ALWAYS_EXACT_DIGITS = 15;

/**
 * A number can break the rule only with an exponent (a digit then `e`) or 16 digits in a row
 * before any `.`: one native regex pass clears most bodies without the scan. A match inside a
 * string (a hex hash) only costs the full scan, never a wrong answer.
 */
const MAY_HOLD_UNSAFE_NUMBER = /\d{16}|\d[eE]/;

/** Where the scanner is: an array with the index of the current element, or an object. */
interface Frame {
  array: boolean;
  index: number;
  /** In an object: the next string is a member name. */
  expectKey: boolean;
  /** In an object: the current member name, as the raw quoted text (decoded only to report). */
  keyStart: number;
  keyEnd: number;
}

/**
 * The first number in `text` that breaks the rule, or `undefined`. `text` must be JSON that
 * `JSON.parse` accepted (call it after parsing); on other text it still ends, in one pass, but its
 * answer means nothing. Members whose name repeats are all scanned, also those JSON.parse drops.
 */
export function findUnsafeNumberLiteral(text: string): UnsafeNumber | undefined {
  if (!MAY_HOLD_UNSAFE_NUMBER.test(text)) return undefined;
  const stack: Frame[] = [];
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = endOfString(text, i);
      const top = stack[stack.length - 1];
      if (top !== undefined && !top.array && top.expectKey) {
        top.keyStart = i;
        top.keyEnd = end;
        top.expectKey = false;
      }
      i = end;
    } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const start = i;
      let digits = 0;
      let exponent = false;
      for (; i < length; i++) {
        const d = text.charCodeAt(i);
        if (d >= ZERO && d <= NINE) digits++;
        else if (d === LOWER_E || d === UPPER_E) exponent = true;
        else if (d !== DOT && d !== MINUS && d !== PLUS) break;
      }
      if (exponent || digits > ALWAYS_EXACT_DIGITS) {
        const literal = text.slice(start, i);
        if (!isExactNumber(Number(literal))) return { pointer: pointerOf(text, stack), literal };
      }
    } else {
      if (c === OPEN_ARRAY) stack.push({ array: true, index: 0, expectKey: false, keyStart: 0, keyEnd: 0 });
      else if (c === OPEN_OBJECT) stack.push({ array: false, index: 0, expectKey: true, keyStart: 0, keyEnd: 0 });
      else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) stack.pop();
      else if (c === COMMA) {
        const top = stack[stack.length - 1];
        if (top?.array) top.index++;
        else if (top) top.expectKey = true;
      }
      // Anything else (whitespace, `:`, the letters of true/false/null) carries no number.
      i++;
    }
  }
  return undefined;
}

/** The index just past the closing quote of the JSON string that opens at `start` (src/lib/json-depth.ts uses it too). */
export function endOfString(text: string, start: number): number {
  let quote = text.indexOf('"', start + 1);
  while (quote !== -1) {
    // The quote is escaped when an odd number of backslashes precedes it (`\"` yes, `\\"` no).
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    quote = text.indexOf('"', quote + 1);
  }
  return text.length;
}

function pointerOf(text: string, stack: Frame[]): string {
  return stack
    .map(
      (frame) =>
        `/${frame.array ? String(frame.index) : escapePointerToken(JSON.parse(text.slice(frame.keyStart, frame.keyEnd)) as string)}`,
    )
    .join("");
}

function escapePointerToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/**
 * The first number in a value that breaks the rule (depth first, in key order), or `undefined`.
 * Iterative: a deeply nested payload must not overflow the call stack.
 */
export function findUnsafeNumber(value: unknown): UnsafeNumber | undefined {
  interface Node {
    value: unknown;
    parent: Node | undefined;
    token: string;
  }
  const stack: Node[] = [{ value, parent: undefined, token: "" }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === "number") {
      if (!isExactNumber(v)) return { pointer: pointerOfNode(node), literal: String(v) };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: node, token: String(i) });
    } else if (v !== null && typeof v === "object") {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--)
        stack.push({ value: (v as Record<string, unknown>)[keys[i]!], parent: node, token: keys[i]! });
    }
  }
  return undefined;
}

function pointerOfNode(node: { parent: unknown; token: string }): string {
  const tokens: string[] = [];
  for (let n = node as { parent: unknown; token: string } | undefined; n?.parent !== undefined; n = n.parent as typeof n) {
    tokens.push(escapePointerToken(n.token));
  }
  return tokens
    .reverse()
    .map((t) => `/${t}`)
    .join("");
}
