/**
 * Reading a trigger's body: once, as bytes, under the entry point's size limit (413 before any
 * hashing or parsing). JSON bodies (`application/json` or any `+json` media type) are parsed
 * (malformed → 400) and held to the number rule (422, `assertExactNumbers`); any other body stays
 * bytes, and its payload in expressions is its text.
 */
import { findUnsafeNumberLiteral } from "../lib/json-numbers";
import { parseJsonBytesWithText, readRawBody } from "../lib/request-body";
import { ingressProblems } from "./problems";

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
  const { text, json } = parseJsonBytesWithText(raw);
  return { raw, isJson: true, payload: assertExactNumbers(text, json, "body") };
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
  let parsed: { text: string; json: unknown };
  try {
    parsed = parseJsonBytesWithText(raw);
  } catch {
    return parseTriggerBody(raw, contentType); // not JSON: raw bytes, as on /trigger
  }
  return { raw, isJson: true, payload: assertExactNumbers(parsed.text, parsed.json, "body") };
}

/**
 * A start over runs again on the payload stored with the old execution. Payloads stored before
 * the number rule existed may hold an integer that was already rounded: running on it would act
 * on an id the sender never sent, so it is refused like a new trigger would be.
 */
export function parseStoredPayload(text: string): unknown {
  return assertExactNumbers(text, JSON.parse(text) as unknown, "stored");
}

/**
 * Every JSON payload idemflow accepts — trigger, test run, stream run, signed hook, start over —
 * passes here: a number a 64-bit float cannot carry exactly (the rule: src/lib/json-numbers.ts)
 * would merge two identities, round the stored payload, or not serialise at all. One answer on
 * every path, whatever decides the identity (a client id too: the payload is still stored and
 * read by expressions): 422 naming the number's JSON Pointer.
 */
function assertExactNumbers(text: string, json: unknown, where: "body" | "stored"): unknown {
  const found = findUnsafeNumberLiteral(text);
  if (found) throw ingressProblems.numberOutOfRange(found, where);
  return json;
}

export async function readTriggerBody(request: Request, maxBytes: number): Promise<TriggerBody> {
  const raw = await readRawBody(request, maxBytes);
  return parseTriggerBody(raw, request.headers.get("content-type"));
}
