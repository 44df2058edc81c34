/**
 * Reading a trigger's body: once, as bytes, under the entry point's size limit (413 before any
 * hashing or parsing). JSON bodies (`application/json` or any `+json` media type) are parsed
 * (malformed → 400); any other body stays bytes, and its payload in expressions is its text.
 */
import { ProblemError } from "../lib/problem";
import { parseJsonBytes, readRawBody } from "../lib/request-body";

export interface TriggerBody {
  raw: Uint8Array;
  /** True when the body was declared and parsed as JSON. */
  isJson: boolean;
  /** The payload as a JSON value: the parsed JSON; the body's text otherwise; `null` when empty. */
  payload: unknown;
}

export function isJsonContentType(contentType: string | null): boolean {
  if (!contentType) return false;
  const media = contentType.split(";")[0]!.trim().toLowerCase();
  return media === "application/json" || media.endsWith("+json");
}

/** Interpret bytes already read (the signed hook verifies the bytes before parsing them). */
export function parseTriggerBody(raw: Uint8Array, contentType: string | null): TriggerBody {
  if (!isJsonContentType(contentType)) {
    // Not JSON: the identity hashes the bytes; expressions see the text (invalid UTF-8 replaced).
    return { raw, isJson: false, payload: raw.byteLength === 0 ? null : new TextDecoder().decode(raw) };
  }
  return { raw, isJson: true, payload: assertFiniteNumbers(parseJsonBytes(raw)) };
}

/**
 * The public signed hook: only the body bytes are signed, so nothing unsigned may change what a
 * delivery IS. Were JSON-ness taken from `content-type`, a captured delivery replayed inside the
 * tolerance with `content-type: text/plain` would hash as bytes instead of canonical JSON — a new
 * identity, so a second execution. Here the bytes alone decide: bytes that parse as JSON are JSON
 * whatever the header says; a JSON `content-type` on bytes that do not parse is still a 400.
 */
export function parseSignedTriggerBody(raw: Uint8Array, contentType: string | null): TriggerBody {
  if (isJsonContentType(contentType)) return parseTriggerBody(raw, contentType);
  let payload: unknown;
  try {
    payload = parseJsonBytes(raw);
  } catch {
    return parseTriggerBody(raw, contentType); // not JSON: raw bytes, as on /trigger
  }
  return { raw, isJson: true, payload: assertFiniteNumbers(payload) };
}

/**
 * `JSON.parse` turns an out-of-range number (`1e400`) into Infinity, which JSON cannot carry: the
 * identity (RFC 8785) and the stored payload could not be written. Refuse it as bad input (400)
 * instead of failing later with a 500.
 */
function assertFiniteNumbers(value: unknown): unknown {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new ProblemError({
        status: 400,
        code: "json-number-out-of-range",
        title: "A number in the JSON body is out of range",
        detail: "The body contains a number too large for a 64-bit float (it parses as Infinity). Send it as a string.",
      });
    }
    // A loop, not push(...items): a 1 MiB array has more elements than a call may take arguments.
    if (v !== null && typeof v === "object") for (const item of Array.isArray(v) ? v : Object.values(v)) stack.push(item);
  }
  return value;
}

export async function readTriggerBody(request: Request, maxBytes: number): Promise<TriggerBody> {
  const raw = await readRawBody(request, maxBytes);
  return parseTriggerBody(raw, request.headers.get("content-type"));
}
