/**
 * Reading a trigger's body: once, as bytes, under the entry point's size limit (413 before any
 * hashing or parsing). JSON bodies (`application/json` or any `+json` media type) are parsed
 * (malformed → 400); any other body stays bytes, and its payload in expressions is its text.
 */
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
  return { raw, isJson: true, payload: parseJsonBytes(raw) };
}

export async function readTriggerBody(request: Request, maxBytes: number): Promise<TriggerBody> {
  const raw = await readRawBody(request, maxBytes);
  return parseTriggerBody(raw, request.headers.get("content-type"));
}
