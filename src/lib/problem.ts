/**
 * RFC 9457 problem details: the one shape every error of idemflow takes on the wire.
 *
 * Code anywhere below the HTTP layer throws a `ProblemError`; `problemResponse` (and the Hono
 * `onError` handler in src/app.ts) turns it into `application/problem+json`. Each case has a
 * stable `code`, and `type` is derived from it, so clients can branch on either.
 */

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

export interface ProblemInit {
  status: number;
  /** Stable, kebab-case identifier of the case, e.g. `idempotency-key-missing`. */
  code: string;
  title: string;
  /** What was wrong and how to fix it, for a human. */
  detail?: string;
  /** Extra members (RFC 9457 extensions), e.g. `errors` for validation failures. */
  extensions?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export function problemType(code: string): string {
  return `urn:idemflow:problem:${code}`;
}

export class ProblemError extends Error {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string | undefined;
  readonly extensions: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(init: ProblemInit) {
    super(init.detail ?? init.title);
    this.name = "ProblemError";
    this.status = init.status;
    this.code = init.code;
    this.title = init.title;
    this.detail = init.detail;
    this.extensions = init.extensions ?? {};
    this.headers = init.headers ?? {};
  }

  toResponse(): Response {
    return problemResponse(this);
  }
}

export function problemResponse(init: ProblemInit | ProblemError): Response {
  const body: Record<string, unknown> = {
    type: problemType(init.code),
    code: init.code,
    title: init.title,
    status: init.status,
    ...(init.detail === undefined ? {} : { detail: init.detail }),
    ...(init.extensions ?? {}),
  };
  return new Response(JSON.stringify(body), {
    status: init.status,
    headers: { "content-type": PROBLEM_CONTENT_TYPE, ...(init.headers ?? {}) },
  });
}

/** Common problems used across routes. */
export const problems = {
  unauthorized: () =>
    new ProblemError({
      status: 401,
      code: "unauthorized",
      title: "Missing or unknown bearer token",
      detail: "Send `Authorization: Bearer <token>`; locally `dev-token` maps to workspace `dev`.",
      headers: { "www-authenticate": 'Bearer realm="idemflow"' },
    }),
  notFound: (what: string) =>
    new ProblemError({ status: 404, code: "not-found", title: "Not found", detail: `${what} does not exist in this workspace.` }),
  malformedJson: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "malformed-json",
      title: "The request body is not valid JSON",
      detail: `${reason}. Send a JSON document with \`content-type: application/json\`.`,
    }),
  payloadTooLarge: (limitBytes: number) =>
    new ProblemError({
      status: 413,
      code: "payload-too-large",
      title: "The request body is too large",
      detail: `The body exceeds the limit of ${limitBytes} bytes. Send a smaller body.`,
    }),
  internal: () =>
    new ProblemError({
      status: 500,
      code: "internal-error",
      title: "Internal error",
      detail: "An unexpected error occurred; it has been logged. Retry the request.",
    }),
};
