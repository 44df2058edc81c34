/**
 * The correlation value an event and a wait meet on (SPEC section 14): a string or a number,
 * compared as the trigger identity compares values (src/ingress/identity.ts) — by the RFC 8785
 * canonical JSON of the value. So `1001` and `1001.0` meet (JSON has one number 1001), `1001` and
 * `"1001"` do not (a string is not a number), and a number a double cannot hold exactly never got
 * this far (the body is refused first, src/lib/json-numbers.ts).
 *
 * Both sides use it — an event's delivery (src/events) and a wait's registration
 * (src/steps/wait-for-event.ts) — so it lives below both.
 */
import { canonicalJson } from "./canonical-json";
import { sha256Hex } from "./crypto";
import { isExactNumber } from "./json-numbers";

/** The most bytes a correlation value's canonical JSON may have (the column's CHECK). */
export const MAX_MATCH_BYTES = 1024;

export interface Correlation {
  /** Canonical JSON of the value: stored for display. */
  value: string;
  /** SHA-256 (hex) of `value`: what compares. */
  hash: string;
}

/** The correlation of `value`, or why it cannot be one (a sentence that ends without a period). */
export async function correlationOf(value: unknown): Promise<Correlation | { problem: string }> {
  if (typeof value === "string") {
    if (value.trim() === "") return { problem: "it is an empty string: an empty value would match every event without one" };
  } else if (typeof value === "number") {
    if (!Number.isFinite(value) || !isExactNumber(value)) return { problem: `${value} is not a number JSON carries exactly` };
  } else {
    const gave = value === undefined ? "nothing" : Array.isArray(value) ? "an array" : value === null ? "null" : `a ${typeof value}`;
    return { problem: `it is ${gave}; a correlation value is a string or a number` };
  }
  const text = canonicalJson(value);
  if (new TextEncoder().encode(text).byteLength > MAX_MATCH_BYTES) {
    return { problem: `it is over ${MAX_MATCH_BYTES} bytes as JSON; correlate on an id, not a document` };
  }
  return { value: text, hash: await sha256Hex(text) };
}
