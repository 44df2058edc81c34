/**
 * How deeply a JSON document nests arrays and objects, and the most idemflow accepts.
 *
 * `JSON.parse` reads any depth, but nearly everything after it recurses: the canonicaliser,
 * `JSON.stringify`, zod, the expression engine. A body 20,000 levels deep parses, then overflows
 * the stack in one of them: a 500, on every way in. So every JSON body is measured where it is
 * parsed (src/lib/request-body.ts) and refused past `MAX_JSON_DEPTH` with a 400 that names both
 * numbers, before anything reads it.
 */
import { endOfString } from "./json-numbers";

/**
 * The deepest a JSON body may nest: `[]` and `{}` are depth 1, a number or string alone 0. Far
 * deeper than webhook payloads and definitions go (their templates included), and far from any
 * stack's limit for the recursive walks above.
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * The deepest nesting of arrays and objects in `text`, JSON that `JSON.parse` accepted. One pass
 * over the text, no recursion: a bracket inside a string is text and is skipped with its string.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = endOfString(text, i) - 1;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return deepest;
}
