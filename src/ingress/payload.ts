/**
 * Reading a trigger's body: once, as bytes, under the entry point's size limit (413 before any
 * hashing or parsing). JSON bodies (`application/json` or any `+json` media type) are parsed
 * (malformed or nested too deep → 400) and held to the number rule (422, `assertExactNumbers`);
 * any other body stays bytes, and its payload is kept byte for byte (`nonJsonPayload`).
 *
 * The payload is stored as JSON on the execution's row (also the entry step's output: since
 * migrations/0045 the entry has no row of its own; before, a second copy was that row's), and that
 * form can be several times the body: a control character in a text body is stored as `\u0001`,
 * `1e15` as `1000000000000000`. So the stored form is measured too (`assertStorable`), in UTF-8
 * bytes, and a payload D1 could not hold is a 413 before anything is written.
 */
import { utf8 } from "../lib/crypto";
import { findUnsafeNumberLiteral } from "../lib/json-numbers";
import { parseJsonBytesWithText, readRawBody } from "../lib/request-body";
import { ProblemError } from "../lib/problem";
import { commonProblems } from "../lib/common-problems";
import { MAX_OUTPUT_BYTES } from "../steps/run-step";
import { ingressProblems } from "./problems";

export interface TriggerBody {
  raw: Uint8Array;
  /** True when the body was declared and parsed as JSON. */
  isJson: boolean;
  /** The payload as a JSON value: the parsed JSON; for any other body see `nonJsonPayload`. */
  payload: unknown;
  /**
   * The payload's stored form (`JSON.stringify`) and its UTF-8 bytes, as `assertStorable` measured
   * them: the start stores that very text, so it is not serialised again.
   */
  stored?: { json: string; bytes: number };
}

/**
 * The most a payload may take once stored: the UTF-8 bytes of its JSON. It is stored as the entry
 * step's output, on that step's row, so it gets the bound of every step output (D1 refuses a value
 * or row over 2,000,000 bytes; the rest of the row needs the difference). The two copies are on two
 * rows (`executions.payload`, the entry's `steps.output`), so each is held to it alone.
 */
export const MAX_STORED_PAYLOAD_BYTES = MAX_OUTPUT_BYTES;

/**
 * What `payload` is for a body that is not JSON, kept so the bytes can be had back exactly (a start
 * over runs on what the identity was computed from):
 * - empty: `null`;
 * - valid UTF-8: its text, every byte of it (a leading byte order mark is kept, not stripped);
 * - anything else: `{ "kind": "bytes", "base64": "<the body, base64>" }` — decoding it as text would
 *   replace each invalid byte by U+FFFD, and two different bodies (two identities) by one text.
 */
export function nonJsonPayload(raw: Uint8Array): unknown {
  if (raw.byteLength === 0) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    return { kind: "bytes", base64: toBase64(raw) };
  }
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  // In slices: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.byteLength; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/**
 * 413 `stored-payload-too-large` when the payload's stored form (`JSON.stringify`, as the start
 * stores it) is over `MAX_STORED_PAYLOAD_BYTES`. Measured here, before the identity: past D1's
 * limit the start batch would be refused, a 500 the sender retries for ever.
 */
function assertStorable(body: TriggerBody): TriggerBody {
  const json = JSON.stringify(body.payload ?? null);
  const storedBytes = utf8(json).byteLength;
  if (storedBytes > MAX_STORED_PAYLOAD_BYTES) {
    throw ingressProblems.storedPayloadTooLarge({ bodyBytes: body.raw.byteLength, storedBytes, limitBytes: MAX_STORED_PAYLOAD_BYTES });
  }
  return { ...body, stored: { json, bytes: storedBytes } };
}

export function isJsonContentType(contentType: string | null): boolean {
  if (!contentType) return false;
  const media = contentType.split(";")[0]!.trim().toLowerCase();
  return media === "application/json" || media.endsWith("+json");
}

/** Interpret bytes already read (the signed hook verifies the bytes before parsing them). */
export function parseTriggerBody(raw: Uint8Array, contentType: string | null): TriggerBody {
  // Not JSON: the identity hashes the bytes.
  if (!isJsonContentType(contentType)) return assertStorable({ raw, isJson: false, payload: nonJsonPayload(raw) });
  const { text, json } = parseJsonBytesWithText(raw);
  return assertStorable({ raw, isJson: true, payload: assertExactNumbers(text, json, "body") });
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
  } catch (error) {
    // Not JSON: raw bytes, as on /trigger. JSON nested too deeply is still JSON, and still refused.
    if (error instanceof ProblemError && error.code === "malformed-json") return parseTriggerBody(raw, contentType);
    throw error;
  }
  return assertStorable({ raw, isJson: true, payload: assertExactNumbers(parsed.text, parsed.json, "body") });
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

/**
 * The body's bytes under `maxBytes`. A declared `content-length` within the bound is the body's
 * framing (the runtime delivers exactly that many bytes), so the body is taken in one native read
 * instead of a loop over the stream (a duplicate's cheapest path); what arrived is still measured.
 * Without one (chunked), or over the bound, the bounded stream read of every route.
 */
async function readBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  if (request.body === null || declared === null || !/^\d{1,10}$/.test(declared) || Number(declared) > maxBytes) {
    return readRawBody(request, maxBytes);
  }
  const raw = new Uint8Array(await request.arrayBuffer());
  if (raw.byteLength > maxBytes) throw commonProblems.payloadTooLarge(maxBytes);
  return raw;
}

export async function readTriggerBody(request: Request, maxBytes: number): Promise<TriggerBody> {
  const raw = await readBody(request, maxBytes);
  return parseTriggerBody(raw, request.headers.get("content-type"));
}
