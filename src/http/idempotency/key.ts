/**
 * Parsing the `Idempotency-Key` request header.
 *
 * The value is either a bare key (`abc-123`) or an RFC 8941 sf-string (`"abc-123"`); both name
 * the same key. After unquoting, a key is 1–255 printable ASCII characters (0x20–0x7E): the rule
 * in src/lib/key-constraints.ts, which the Gateway step's destination keys share.
 *
 * The Idempotency-Key draft defines the header as an RFC 8941 Item whose value is an sf-string,
 * and an Item may carry parameters (`"k";v=1`). Parameters are accepted and ignored (they are not
 * part of the key), but their syntax is checked strictly against RFC 8941 §3.1.2, so a value that
 * is not a structured field at all is still refused instead of being guessed at. A bare key is not
 * a structured field: `abc;v=1` is the key `abc;v=1`.
 */
import { DEFAULT_KEY_CONSTRAINTS, validateKey, type KeyProblem } from "../../lib/key-constraints";

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const MAX_KEY_LENGTH = DEFAULT_KEY_CONSTRAINTS.maxLength;

export type ParsedKey = { ok: true; key: string } | { ok: false; reason: string };

export function parseIdempotencyKey(headerValue: string): ParsedKey {
  // Fetch already strips leading/trailing whitespace; trim again for wrappers that do not.
  const value = headerValue.trim();
  let key: string;
  if (value.startsWith('"')) {
    const item = parseSfString(value, 0);
    if (item === null) {
      return {
        ok: false,
        reason:
          'the value starts with `"` but is not a valid RFC 8941 sf-string (`"` and `\\` must be escaped with `\\`, and a closing ' +
          '`"` is required)',
      };
    }
    if (!parametersEndAt(value, item.end, value.length)) {
      return { ok: false, reason: 'only RFC 8941 parameters (`;name` or `;name=value`) may follow the closing `"`' };
    }
    key = item.value;
  } else {
    // Several Idempotency-Key headers arrive joined by ", "; a bare key must not be a list.
    if (value.includes(",")) {
      return { ok: false, reason: "send exactly one Idempotency-Key header; quote a key that contains a comma as an sf-string" };
    }
    key = value;
  }
  const check = validateKey(key, DEFAULT_KEY_CONSTRAINTS);
  if (!check.ok) return { ok: false, reason: reasonFor(check.problems) };
  return { ok: true, key };
}

/** In words, for the 400 problem. A key that breaks both rules is told about its characters, as it always was. */
function reasonFor(problems: readonly [KeyProblem, ...KeyProblem[]]): string {
  const problem = problems.find((p) => p.reason === "bad_character") ?? problems[0];
  switch (problem.reason) {
    case "bad_character":
      return "a key may contain only printable ASCII characters (0x20–0x7E)";
    case "empty":
      return "the key is empty";
    case "too_short": // not with the default constraints; named for completeness
      return `the key is ${problem.length} characters long; the minimum is ${DEFAULT_KEY_CONSTRAINTS.minLength}`;
    case "too_long":
      return `the key is ${problem.length} characters long; the limit is ${MAX_KEY_LENGTH}`;
  }
}

/**
 * RFC 8941 §4.2.5: at `start` a DQUOTE, then printable ASCII where `"` and `\` appear only escaped
 * as `\"` / `\\`, then the closing DQUOTE. Returns the unescaped value and the index after the
 * closing quote, or null when malformed.
 */
function parseSfString(value: string, start: number): { value: string; end: number } | null {
  if (value[start] !== '"') return null;
  let out = "";
  for (let i = start + 1; i < value.length; i++) {
    const ch = value[i]!;
    if (ch === "\\") {
      const next = value[i + 1];
      if (next !== '"' && next !== "\\") return null;
      out += next;
      i++;
    } else if (ch === '"') {
      return { value: out, end: i + 1 };
    } else {
      const code = ch.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) return null;
      out += ch;
    }
  }
  return null; // no closing quote
}

// RFC 8941 §3.1.2 parameters: *( ";" *SP key [ "=" bare-item ] ), and the bare items of §3.3.
const PARAM_KEY = /^[a-z*][a-z0-9_\-.*]*/;
const BARE_ITEM = [
  /^-?[0-9]{1,12}\.[0-9]{1,3}(?![0-9.])/, // decimal
  /^-?[0-9]{1,15}(?![0-9.])/, // integer
  /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*/, // token
  /^:[A-Za-z0-9+/=]*:/, // byte sequence
  /^\?[01]/, // boolean
];

/** Whether `value[from..to)` is exactly a (possibly empty) list of RFC 8941 parameters. */
function parametersEndAt(value: string, from: number, to: number): boolean {
  let i = from;
  while (i < to) {
    if (value[i] !== ";") return false;
    i++;
    while (value[i] === " ") i++;
    const key = PARAM_KEY.exec(value.slice(i, to));
    if (!key) return false;
    i += key[0].length;
    if (value[i] !== "=") continue; // a bare key means `true`
    i++;
    const end = bareItemEnd(value, i, to);
    if (end === null) return false;
    i = end;
  }
  return true;
}

function bareItemEnd(value: string, from: number, to: number): number | null {
  if (value[from] === '"') return parseSfString(value.slice(0, to), from)?.end ?? null;
  const rest = value.slice(from, to);
  for (const pattern of BARE_ITEM) {
    const match = pattern.exec(rest);
    if (match) return from + match[0].length;
  }
  return null;
}
