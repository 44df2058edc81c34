/**
 * What the validators enforce, as JSON Schema `pattern`s for the OpenAPI document — built from the
 * validators' own constants (src/lib/key-constraints.ts, src/definitions, src/events), so the document
 * cannot drift from them. Patterns are ECMA-262, as JSON Schema 2020-12 reads them, without flags.
 */
import { DEFAULT_KEY_CONSTRAINTS, type CodePointRange } from "../../lib/key-constraints";

const escape = (cp: number): string => (cp <= 0xff ? `\\x${cp.toString(16).padStart(2, "0")}` : `\\u${cp.toString(16).padStart(4, "0")}`);

/** A character class of `ranges` without the code points of `except`: `[\x20-\x21\x23-\x7e]`. */
export function characterClass(ranges: readonly CodePointRange[], except: readonly string[] = []): string {
  const excluded = new Set(except.map((ch) => ch.codePointAt(0)!));
  const parts: string[] = [];
  for (const [first, last] of ranges) {
    let start: number | undefined;
    for (let cp = first; cp <= last + 1; cp++) {
      const inside = cp <= last && !excluded.has(cp);
      if (inside && start === undefined) start = cp;
      if (!inside && start !== undefined) {
        const end = cp - 1;
        parts.push(start === end ? escape(start) : `${escape(start)}-${escape(end)}`);
        start = undefined;
      }
    }
  }
  return `[${parts.join("")}]`;
}

const { minLength, maxLength, alphabet } = DEFAULT_KEY_CONSTRAINTS;

/** A key under the shared key rule (1–255 printable ASCII): an event's `id`, a `clientIdempotencyId`. */
export const KEY_PATTERN = `^${characterClass(alphabet.ranges)}{${minLength},${maxLength}}$`;

/**
 * The `Idempotency-Key` header (src/http/idempotency/key.ts): a bare key — no `,` (several headers
 * arrive joined by one), not starting with `"`, no surrounding space (it is trimmed) — or an RFC 8941
 * sf-string whose `"` and `\` are escaped with `\`; either way the key is 1–255 printable ASCII.
 * (The server also accepts RFC 8941 parameters after an sf-string and ignores them; the document does
 * not state them.)
 */
export const IDEMPOTENCY_KEY_HEADER_PATTERN = (() => {
  const inner = characterClass(alphabet.ranges, [","]);
  const edge = characterClass(alphabet.ranges, [",", " ", '"']);
  const last = characterClass(alphabet.ranges, [",", " "]);
  const bare = `${edge}(?:${inner}{0,${maxLength - 2}}${last})?`;
  const quoted = `"(?:${characterClass(alphabet.ranges, ['"', "\\"])}|\\\\["\\\\]){${minLength},${maxLength}}"`;
  return `^(?:${bare}|${quoted})$`;
})();
