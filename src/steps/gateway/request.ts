/**
 * Phase 4 of a Gateway attempt: the `Request` to send, and the summary recorded in its place.
 *
 * Pure. Nothing here throws: anything that cannot be built comes back as a reason that fails the
 * step (not retried: it would fail the same way again). A throw would read as a worker crash and
 * be re-run until the crash allowance ran out.
 */
import { HEADER_NAME_PATTERN } from "../../definitions/schema";
import { errorMessage } from "../../lib/log";
import type { RequestSummary } from "../outcome";

const MAX_SUMMARY_BODY_CHARS = 4096;

/**
 * A header value that reaches the destination as written: printable ASCII, space and tab. No
 * control characters — CR/LF would split the header (injection), NUL ends it in some servers —
 * and nothing beyond ASCII: a header byte is ISO-8859-1, but workerd sends any non-ASCII
 * character as UTF-8 bytes (a quirk), so even `é` would arrive as two other characters.
 */
const VALID_HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/** What is wrong with a header value, in words (never the value itself). */
function invalidHeaderCharacters(value: string): string {
  if (/[\r\n]/.test(value)) return "CR or LF";
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this refuses
  if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) return "a control character (e.g. NUL)";
  return "non-ASCII characters (workerd would send them as UTF-8 bytes, not as ISO-8859-1)";
}

/**
 * The request, or why it cannot be built. An error names the header, never its value (it may
 * carry a resolved secret or payload data). Redirects are not followed: one could leave the
 * outbound allowlist.
 */
export function buildRequest(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: unknown,
): { request: Request } | { error: string } {
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME_PATTERN.test(name))
      return { error: `header name ${JSON.stringify(name.slice(0, 64))} is not a valid HTTP header name` };
    if (!VALID_HEADER_VALUE.test(value)) {
      return {
        error:
          `the value of header ${name} contains ${invalidHeaderCharacters(value)}, which an HTTP header cannot carry; ` +
          "encode the value (e.g. $encodeUrlComponent) or send it in the body",
      };
    }
  }
  try {
    const sendHeaders = new Headers(headers);
    let sendBody: string | undefined;
    if (body !== undefined) {
      if (typeof body === "string") {
        sendBody = body;
        if (!sendHeaders.has("content-type")) sendHeaders.set("content-type", "text/plain; charset=utf-8");
      } else {
        sendBody = JSON.stringify(body) as string | undefined;
        if (typeof sendBody !== "string") return { error: `the body evaluated to ${typeof body}, which is not JSON` };
        if (!sendHeaders.has("content-type")) sendHeaders.set("content-type", "application/json");
      }
    }
    return { request: new Request(url.toString(), { method, headers: sendHeaders, body: sendBody, redirect: "manual" }) };
  } catch (error) {
    return { error: `the request could not be built: ${errorMessage(error)}` };
  }
}

/** What the trace records of the request: redacted headers, a bounded body. */
export function summariseRequest(method: string, url: URL, redactedHeaders: Record<string, string>, body: unknown): RequestSummary {
  return {
    method,
    url: url.toString(),
    headers: redactedHeaders,
    ...(body === undefined ? {} : { body: summaryBody(body) }),
  };
}

function summaryBody(body: unknown): unknown {
  let text: string | undefined;
  try {
    text = typeof body === "string" ? body : (JSON.stringify(body) as string | undefined);
  } catch {
    text = undefined; // the send fails the step with the reason (buildRequest)
  }
  if (text === undefined) return `[not JSON: ${typeof body}]`;
  return text.length <= MAX_SUMMARY_BODY_CHARS ? body : `[omitted: ${text.length} characters]`;
}
