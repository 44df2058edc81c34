/**
 * Reading a destination's response into a step output: allowlisted headers, a body parsed as
 * JSON when it says it is JSON, and a hard bound on its size. Over the bound the read stops and
 * the step fails loudly: a truncated body stored as if it were the answer would be worse.
 */
import { BodyTooLargeError, readAtMost } from "../lib/bounded-read";

/** Response headers kept in the step output (the rest may carry cookies or tokens). */
export const RESPONSE_HEADER_ALLOWLIST = [
  "content-type",
  "location",
  "retry-after",
  "etag",
  "idempotency-key",
  "idempotent-replayed",
  "x-request-id",
] as const;

export class ResponseTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(
      `the response body exceeds maxResponseBytes (${limitBytes} bytes); it was not stored. ` +
        "Raise maxResponseBytes on the vertex, or have the destination return less",
    );
    this.name = "ResponseTooLargeError";
  }
}

export function allowlistedHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of RESPONSE_HEADER_ALLOWLIST) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/** Read at most `limit` bytes; throws `ResponseTooLargeError` beyond it (never truncates). */
export async function readBoundedText(response: Response, limit: number): Promise<string> {
  try {
    return new TextDecoder().decode(await readAtMost(response.body, response.headers.get("content-length"), limit));
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw new ResponseTooLargeError(limit);
    throw error;
  }
}

/** JSON when the content type says so and it parses; otherwise the text itself. */
export function parseBody(text: string, contentType: string | null): unknown {
  if (text.length === 0) return null;
  if (contentType && /[/+]json\b/i.test(contentType)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}
