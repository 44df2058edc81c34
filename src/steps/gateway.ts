/**
 * GATEWAY vertices: one HTTP call to a third party, with a stable destination key.
 *
 * Order of work on each attempt:
 * 1. evaluate url, headers, query and body against the execution context (a failing expression
 *    fails the step: it would fail the same way on every retry);
 * 2. the `Idempotency-Key` header (any letter case): the key persisted by an earlier attempt if
 *    there is one; otherwise evaluate it, validate it (1–255 printable ASCII) and persist it —
 *    fenced and only-if-absent — BEFORE the first send, so every retry, takeover and operator
 *    retry sends the same value;
 * 3. resolve `{{ secrets.NAME }}` in header values for the execution's workspace (missing or
 *    undecryptable → fail, not retried), check the host
 *    against the outbound allowlist (outside → fail, not retried);
 * 4. build the request: every header value is checked (printable ASCII, space and tab only: no
 *    CR/LF/NUL or other control characters, nothing non-ASCII), the body serialised; anything that cannot be built fails the
 *    step (not retried: it would fail the same way again) — never a throw, which would read as a
 *    worker crash and be re-run until the crash allowance ran out;
 * 5. send with a timeout; redirects are not followed (a redirect could leave the allowlist);
 * 6. classify: 2xx completes; a 409 saying this key's earlier request is still in progress waits
 *    (`in_progress`, before any 409 rule); 409 completes when `conflictAsProcessed`; 408, 429 and
 *    5xx, network errors and timeouts are retryable (`Retry-After` honoured up to a ceiling); any
 *    other status fails unless `clientErrorMode` is `complete`, in which case the response becomes
 *    the output for edges.
 */
import { HEADER_NAME_PATTERN, isExpression, type GatewayVertex } from "../definitions/schema";
import { evaluateValue } from "../expressions/evaluate";
import { isAllowed } from "./allowlist";
import { allowlistedHeaders, parseBody, readBoundedText, ResponseTooLargeError } from "./http-response";
import type { RequestSummary, RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { isRetryableStatus, parseRetryAfter } from "./retry-policy";
import { MasterKeyError, SecretUnreadableError } from "../secrets/crypto";
import type { SecretLookup } from "../secrets/resolve";
import { MissingSecretError, resolveSecrets, scrubDeep, scrubSecrets, secretNamesIn } from "./secrets";
import { errorMessage } from "../lib/log";

export const IDEMPOTENCY_HEADER = "idempotency-key";
/**
 * The `code` of idemflow's own Idempotency-Key middleware's in-progress problem
 * (src/http/idempotency/problems.ts; a test keeps them equal — steps do not import the http layer).
 */
export const IN_PROGRESS_PROBLEM_CODE = "idempotency-key-in-progress";
const MAX_SUMMARY_BODY_CHARS = 4096;

export interface GatewayDeps {
  /** `OUTBOUND_ALLOWLIST`. */
  env: Env;
  /** `{{ secrets.NAME }}` for the execution's workspace (src/secrets/resolve.ts). */
  secret: SecretLookup;
  fetch: typeof fetch;
  now: () => number;
  /** The key an earlier attempt persisted, from the claim. */
  persistedKey: string | null;
  /** Fenced, only-if-absent persist; returns the stored key, or null when fenced out. */
  persistKey: (key: string) => Promise<string | null>;
}

export class InvalidKeyError extends Error {}

/** 1–255 printable ASCII characters (the same rule as idemflow's own API keys). */
export function validateDestinationKey(value: unknown): string {
  if (typeof value === "number" && Number.isFinite(value)) value = String(value);
  if (typeof value !== "string") {
    throw new InvalidKeyError(`the Idempotency-Key expression produced ${value === undefined ? "nothing" : typeof value}, not a string`);
  }
  if (value.length < 1 || value.length > 255) {
    throw new InvalidKeyError(
      `the Idempotency-Key must be 1-255 characters, got ${value.length}; use $idempotencyKey(prefix, …) to bound it`,
    );
  }
  if (!/^[\x20-\x7e]+$/.test(value)) {
    throw new InvalidKeyError("the Idempotency-Key must be printable ASCII only; use $idempotencyKey(prefix, …) to encode other values");
  }
  return value;
}

/**
 * A 409 that says "the request with this key is still running here": with a `Retry-After` (the
 * Idempotency-Key draft's advice to come back), or idemflow's own in-progress problem.
 */
export function isInProgress(status: number, retryAfterMs: number | undefined, body: unknown): boolean {
  if (status !== 409) return false;
  if (retryAfterMs !== undefined) return true;
  if (body === null || typeof body !== "object") return false;
  const problem = body as { code?: unknown; type?: unknown };
  return (
    problem.code === IN_PROGRESS_PROBLEM_CODE || (typeof problem.type === "string" && problem.type.endsWith(`:${IN_PROGRESS_PROBLEM_CODE}`))
  );
}

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
 * carry a resolved secret or payload data).
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

function summaryBody(body: unknown): unknown {
  if (body === undefined) return undefined;
  let text: string | undefined;
  try {
    text = typeof body === "string" ? body : (JSON.stringify(body) as string | undefined);
  } catch {
    text = undefined; // the send fails the step with the reason (buildRequest)
  }
  if (text === undefined) return `[not JSON: ${typeof body}]`;
  return text.length <= MAX_SUMMARY_BODY_CHARS ? body : `[omitted: ${text.length} characters]`;
}

export async function runGateway(vertex: GatewayVertex, context: ExpressionContext, deps: GatewayDeps): Promise<RunOutcome> {
  const config = vertex.config;
  const method = config.method;

  // 1. Expressions.
  let url: URL;
  const headers: Record<string, string> = {};
  let keyHeaderName: string | undefined;
  let keyExpression: string | undefined;
  let body: unknown;
  try {
    const rawUrl = await evaluateValue(config.url, context);
    if (typeof rawUrl !== "string") return { kind: "failed", error: `url evaluated to ${typeof rawUrl}, not a string` };
    try {
      url = new URL(rawUrl);
    } catch {
      return { kind: "failed", error: `url ${JSON.stringify(rawUrl.slice(0, 200))} is not an absolute URL` };
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      // fetch would refuse it with a TypeError, which reads as a network error and is retried.
      return {
        kind: "failed",
        error: `url ${url.protocol}//${url.host}${url.pathname} is not http(s); a Gateway step only calls http:// or https:// URLs`,
      };
    }
    if (url.username !== "" || url.password !== "") {
      // They would be stored in the request summary and shown in the trace.
      return {
        kind: "failed",
        error: `url ${url.host}${url.pathname} carries credentials (user:password@); send them in a header with {{ secrets.NAME }} instead`,
      };
    }
    for (const [name, value] of Object.entries(config.headers ?? {})) {
      if (name.toLowerCase() === IDEMPOTENCY_HEADER) {
        keyHeaderName = name;
        keyExpression = value;
        continue;
      }
      const evaluated = await evaluateValue(value, context);
      if (evaluated === undefined || evaluated === null) continue;
      headers[name] = typeof evaluated === "string" ? evaluated : JSON.stringify(evaluated);
    }
    for (const [name, value] of Object.entries(config.query ?? {})) {
      const evaluated = await evaluateValue(value, context);
      if (evaluated === undefined || evaluated === null) continue;
      url.searchParams.append(name, typeof evaluated === "string" ? evaluated : JSON.stringify(evaluated));
    }
    if (config.body !== undefined && method !== "GET" && method !== "HEAD") body = await evaluateValue(config.body, context);
  } catch (error) {
    return { kind: "failed", error: `gateway ${vertex.id}: ${errorMessage(error)}` };
  }

  // 2. The destination key: persisted value first, else computed once and persisted before sending.
  let key: string | undefined;
  if (keyHeaderName !== undefined) {
    if (deps.persistedKey !== null) {
      key = deps.persistedKey;
    } else {
      try {
        key = validateDestinationKey(await evaluateValue(keyExpression, context));
      } catch (error) {
        return { kind: "failed", error: `gateway ${vertex.id}: invalid Idempotency-Key: ${errorMessage(error)}` };
      }
      const stored = await deps.persistKey(key);
      if (stored === null) return { kind: "failed", error: "the step was taken over before its key was persisted; nothing was sent" };
      key = stored;
    }
    headers[keyHeaderName] = key;
  }

  // 3. Secrets and the allowlist.
  let resolved;
  try {
    // Secrets only where the definition's own literal header text names them (the rule the
    // definition validator enforces): never in the key (it is persisted and shown in the trace),
    // never in what an expression produced (data, e.g. the payload, could carry a template).
    const configured = config.headers ?? {};
    const none: ReadonlySet<string> = new Set();
    resolved = await resolveSecrets(headers, deps.secret, (name) => {
      const text = configured[name];
      return name === keyHeaderName || text === undefined || isExpression(text) ? none : secretNamesIn(text);
    });
  } catch (error) {
    // Retrying cannot help: a person must set the secret (or the master key) first.
    if (error instanceof MissingSecretError || error instanceof SecretUnreadableError || error instanceof MasterKeyError) {
      return { kind: "failed", error: error.message };
    }
    throw error;
  }
  const request: RequestSummary = {
    method,
    url: url.toString(),
    headers: resolved.redacted,
    ...(body === undefined ? {} : { body: summaryBody(body) }),
  };
  if (!isAllowed(url, deps.env.OUTBOUND_ALLOWLIST)) {
    return {
      kind: "failed",
      request,
      error: `${url.host} is not in OUTBOUND_ALLOWLIST; add "${url.hostname}:${url.port || (url.protocol === "https:" ? 443 : 80)}" to the var in wrangler.toml to allow it`,
    };
  }

  // 4. Build the request. Nothing here may throw: see the module comment.
  const built = buildRequest(url, method, resolved.send, body);
  if ("error" in built) return { kind: "failed", request, error: `gateway ${vertex.id}: ${built.error}; not sent, not retried` };

  // 5. Send.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, config.timeoutMs);
  let response: Response;
  let text: string;
  try {
    response = await deps.fetch(built.request, { signal: controller.signal });
    text = await readBoundedText(response, config.maxResponseBytes);
  } catch (error) {
    if (error instanceof ResponseTooLargeError) return { kind: "failed", request, error: error.message };
    const why = timedOut
      ? `timed out after ${config.timeoutMs} ms`
      : `network error: ${scrubSecrets(errorMessage(error), resolved.values)}`;
    return { kind: "retryable", request, error: `${method} ${url.host}${url.pathname}: ${why}` };
  } finally {
    clearTimeout(timer);
  }

  // 6. Classify. Anything recorded from the response is scrubbed of the secrets just sent.
  const contentType = response.headers.get("content-type");
  const output = scrubDeep(
    {
      status: response.status,
      headers: allowlistedHeaders(response.headers),
      body: parseBody(text, contentType),
      idempotencyKey: key ?? null,
    },
    resolved.values,
  ) as { status: number };
  const status = response.status;
  const what = `${method} ${url.host}${url.pathname} answered ${status}`;
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), deps.now());
  if (status >= 200 && status < 300) return { kind: "completed", output, request };
  // Before the 409 rules: "in progress" is neither "already processed" nor an answer to route on.
  if (isInProgress(status, retryAfterMs, (output as { body?: unknown }).body)) {
    const after = retryAfterMs === undefined ? "" : ` (Retry-After ${Math.ceil(retryAfterMs / 1000)} s)`;
    return {
      kind: "in_progress",
      output,
      request,
      error: `${what}${after}: the request with this key is still running there`,
      retryAfterMs,
    };
  }
  if (status === 409 && config.conflictAsProcessed) return { kind: "completed", output, request };
  if (isRetryableStatus(status)) return { kind: "retryable", output, request, error: what, retryAfterMs };
  if (config.clientErrorMode === "complete") return { kind: "completed", output, request };
  return {
    kind: "failed",
    output,
    request,
    error: `${what}; not retried (a ${status} will not change by itself). Set clientErrorMode: "complete" to route on it instead`,
  };
}
