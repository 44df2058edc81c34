/**
 * The problems of the `/v1` surface itself, before any route runs: a deployment without tokens
 * (src/http/auth.ts), a method a known path does not serve and a query parameter a route does not
 * know (src/http/route-check.ts). Each names what was wrong and how to fix it.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type HttpProblemCode = "tokens-not-configured" | "method-not-allowed" | "query-parameter-unknown";

export const httpProblems = {
  /** `API_TOKENS` is unset or holds no `token:workspace` pair: no `/v1` route is served. */
  tokensNotConfigured: () =>
    new ProblemError({
      status: 503,
      code: "tokens-not-configured",
      title: "The deployment has no API tokens",
      detail:
        "API_TOKENS is not set (or holds no `token:workspace` pair), so no /v1 route is served. Operator: " +
        '`wrangler secret put API_TOKENS` (README "Deploy"); locally `npm start` writes it to .dev.vars.',
      headers: { "retry-after": "60" },
    }),
  /** `allowed`: the methods the path serves (upper case), also sent as the `Allow` header. */
  methodNotAllowed: (method: string, path: string, allowed: readonly string[]) =>
    new ProblemError({
      status: 405,
      code: "method-not-allowed",
      title: "Method not allowed on this path",
      detail: `${path} does not serve ${method}; it serves ${allowed.join(", ")}.`,
      headers: { allow: allowed.join(", ") },
      extensions: { allowed: [...allowed] },
    }),
  /** `unknown`: the names the route does not read; `known`: the names it does (possibly none). */
  queryParameterUnknown: (unknown: readonly string[], known: readonly string[]) =>
    new ProblemError({
      status: 400,
      code: "query-parameter-unknown",
      title: "Unknown query parameter",
      detail:
        `This route does not read ${unknown.map((name) => JSON.stringify(name)).join(", ")}: ` +
        (known.length === 0 ? "it takes no query parameter." : `it reads only ${known.map((name) => `\`${name}\``).join(", ")}.`) +
        " Check the spelling (GET /v1/openapi.json lists each route's parameters).",
      extensions: { unknown: [...unknown], known: [...known] },
    }),
} satisfies ProblemCatalog<HttpProblemCode>;
