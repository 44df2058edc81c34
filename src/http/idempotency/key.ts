/**
 * Parsing the `Idempotency-Key` request header.
 *
 * The value is either a bare key (`abc-123`) or an RFC 8941 sf-string (`"abc-123"`); both name
 * the same key. After unquoting, a key is 1–255 printable ASCII characters (0x20–0x7E).
 */

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const MAX_KEY_LENGTH = 255;

export type ParsedKey = { ok: true; key: string } | { ok: false; reason: string };

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

export function parseIdempotencyKey(headerValue: string): ParsedKey {
  // Fetch already strips leading/trailing whitespace; trim again for wrappers that do not.
  const value = headerValue.trim();
  let key: string;
  if (value.startsWith('"')) {
    const unquoted = parseSfString(value);
    if (unquoted === null) {
      return { ok: false, reason: 'the value starts with `"` but is not a valid RFC 8941 sf-string (`"` and `\\` must be escaped with `\\`, nothing may follow the closing quote)' };
    }
    key = unquoted;
  } else {
    // Several Idempotency-Key headers arrive joined by ", "; a bare key must not be a list.
    if (value.includes(",")) {
      return { ok: false, reason: "send exactly one Idempotency-Key header; quote a key that contains a comma as an sf-string" };
    }
    key = value;
  }
  if (!PRINTABLE_ASCII.test(key)) return { ok: false, reason: "a key may contain only printable ASCII characters (0x20–0x7E)" };
  if (key.length < 1) return { ok: false, reason: "the key is empty" };
  if (key.length > MAX_KEY_LENGTH) return { ok: false, reason: `the key is ${key.length} characters long; the limit is ${MAX_KEY_LENGTH}` };
  return { ok: true, key };
}

/**
 * RFC 8941 §4.2.5: a DQUOTE, then printable ASCII where `"` and `\` appear only escaped as
 * `\"` / `\\`, then the closing DQUOTE and nothing else. Returns null when malformed.
 */
function parseSfString(value: string): string | null {
  let out = "";
  for (let i = 1; i < value.length; i++) {
    const ch = value[i]!;
    if (ch === "\\") {
      const next = value[i + 1];
      if (next !== '"' && next !== "\\") return null;
      out += next;
      i++;
    } else if (ch === '"') {
      return i === value.length - 1 ? out : null;
    } else {
      const code = ch.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) return null;
      out += ch;
    }
  }
  return null; // no closing quote
}
