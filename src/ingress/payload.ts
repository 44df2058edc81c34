/**
 * Reading a trigger's body: once, as bytes, under the entry point's size limit (413 before any
 * hashing or parsing). JSON bodies (`application/json` or any `+json` media type) are parsed
 * (malformed → 400); any other body stays bytes, and its payload in expressions is its text.
 */
import { readRawBody } from "../http/body";
import { problems } from "../http/problem";

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
  if (raw.byteLength === 0) throw problems.malformedJson("The request body is empty");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(raw);
  } catch {
    throw problems.malformedJson("The request body is not valid UTF-8");
  }
  try {
    return { raw, isJson: true, payload: JSON.parse(text) as unknown };
  } catch (error) {
    throw problems.malformedJson(`The request body does not parse as JSON (${error instanceof Error ? error.message : String(error)})`);
  }
}

export async function readTriggerBody(request: Request, maxBytes: number): Promise<TriggerBody> {
  const raw = await readRawBody(request, maxBytes);
  return parseTriggerBody(raw, request.headers.get("content-type"));
}
