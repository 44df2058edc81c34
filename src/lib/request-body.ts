/**
 * Reading request bodies with a size limit, for every route that accepts one.
 *
 * The body is read once, as bytes, and never re-serialised: ingress hashes the raw bytes and the
 * idempotency ledger fingerprints them, so the bytes a route sees are the bytes the client sent.
 *
 * The limit is enforced twice: a `content-length` that already exceeds it is rejected before
 * reading anything, and the stream is counted while it is read, because `content-length` can be
 * absent (chunked uploads) or wrong. Reading stops at the first chunk that crosses the limit, so an
 * oversize body never sits whole in memory.
 *
 * Every JSON body is parsed here, so its nesting is bounded here too (src/lib/json-depth.ts): one
 * 400 on every route, before anything recursive reads the document.
 */
import { commonProblems } from "./common-problems";
import { BodyTooLargeError, readAtMost } from "./bounded-read";
import { jsonDepth, MAX_JSON_DEPTH } from "./json-depth";
import { errorMessage } from "./log";

/** The raw body bytes (empty when there is no body). Throws 413 `payload-too-large` above `maxBytes`. */
export async function readRawBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  try {
    return await readAtMost(request.body, request.headers.get("content-length"), maxBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw commonProblems.payloadTooLarge(maxBytes);
    throw error;
  }
}

/**
 * The raw bytes and the parsed JSON. Throws 413 above `maxBytes`, 400 `malformed-json` when the
 * body is empty, is not UTF-8, or does not parse (the detail carries the parser's message), and
 * 400 `json-too-deep` when it nests deeper than `MAX_JSON_DEPTH`.
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<{ raw: Uint8Array; json: unknown }> {
  const raw = await readRawBody(request, maxBytes);
  return { raw, json: parseJsonBytes(raw) };
}

/** Parse bytes already read as JSON: 400 `malformed-json` when empty, not UTF-8, or not JSON; 400 `json-too-deep`. */
export function parseJsonBytes(raw: Uint8Array): unknown {
  return parseJsonBytesWithText(raw).json;
}

/** As `parseJsonBytes`, also returning the decoded text (for checks that need the literals as sent). */
export function parseJsonBytesWithText(raw: Uint8Array): { text: string; json: unknown } {
  if (raw.byteLength === 0) throw commonProblems.malformedJson("The request body is empty");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(raw);
  } catch {
    throw commonProblems.malformedJson("The request body is not valid UTF-8");
  }
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch (error) {
    const reason = errorMessage(error);
    throw commonProblems.malformedJson(`The request body does not parse as JSON (${reason})`);
  }
  // Measured after parsing, so the count is of valid JSON (and a body that is not JSON is a 400 for that).
  const depth = jsonDepth(text);
  if (depth > MAX_JSON_DEPTH) throw commonProblems.jsonTooDeep(depth, MAX_JSON_DEPTH);
  return { text, json };
}
