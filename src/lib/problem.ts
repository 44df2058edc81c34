/**
 * RFC 9457 problem details: the one shape every error of idemflow takes on the wire.
 *
 * Code anywhere below the HTTP layer throws a `ProblemError`; `problemResponse` (and the Hono
 * `onError` handler in src/app.ts) turns it into `application/problem+json`. Each case has a
 * stable `code`, and `type` is derived from it, so clients can branch on either.
 *
 * This module is the machinery only. The cases themselves live in one catalog per subsystem
 * (docs/problems.md lists them by catalog); a catalog is the only place that constructs a
 * `ProblemError`, so every code a client can see is written down once, next to its title and detail.
 */

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

export interface ProblemInit<Code extends string = string> {
  status: number;
  /** Stable, kebab-case identifier of the case, e.g. `idempotency-key-missing`. */
  code: Code;
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

/** `Code` is inferred from the literal a catalog writes, so a catalog's union can be checked against it. */
export class ProblemError<Code extends string = string> extends Error {
  readonly status: number;
  readonly code: Code;
  readonly title: string;
  readonly detail: string | undefined;
  readonly extensions: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(init: ProblemInit<Code>) {
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

/**
 * A subsystem's catalog: named constructors, each answering one of the subsystem's codes.
 * Catalogs end in `satisfies ProblemCatalog<TheirCode>`, so a code outside the union does not compile.
 */
export type ProblemCatalog<Code extends string> = Record<string, (...args: never[]) => ProblemError<Code>>;

/** The codes a catalog's constructors can answer (a test holds each catalog's union equal to it). */
export type CatalogCode<Catalog extends ProblemCatalog<string>> = ReturnType<Catalog[keyof Catalog]>["code"];

/** The JSON body of a problem: `type`, `code`, `title`, `status`, `detail` when there is one, then the extensions. */
export function problemBody(init: ProblemInit | ProblemError): Record<string, unknown> {
  return {
    type: problemType(init.code),
    code: init.code,
    title: init.title,
    status: init.status,
    ...(init.detail === undefined ? {} : { detail: init.detail }),
    ...(init.extensions ?? {}),
  };
}

export function problemResponse(init: ProblemInit | ProblemError): Response {
  return new Response(JSON.stringify(problemBody(init)), {
    status: init.status,
    headers: { "content-type": PROBLEM_CONTENT_TYPE, ...(init.headers ?? {}) },
  });
}
