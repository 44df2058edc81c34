/**
 * The `/v1` surface's one check of a request's shape against the operations the OpenAPI document
 * states (./openapi/operations.ts `OPERATIONS`), before authentication and before any route runs:
 *
 * - a path the document knows, asked with a method it does not serve, answers 405
 *   `method-not-allowed` with `Allow` (HEAD goes with GET, as Hono serves it);
 * - a query parameter the operation does not state answers 400 `query-parameter-unknown`, listing
 *   the ones it does: a misspelt filter (`?staus=FAILED`) never silently returns the unfiltered list.
 *
 * The same table the document is generated from, so what a route accepts and what the document
 * says cannot differ. The public `/hooks` and `/events` routes are not under `/v1`: providers append
 * their own parameters there. A path no operation matches falls through to 404 `route-not-found`.
 */
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "./auth";
import { OPERATIONS } from "./openapi/operations";
import { httpProblems } from "./problems";

interface Served {
  /** The parameters the operation reads, as the document lists them. */
  known: readonly string[];
  /** Also accepted here: the operation refuses them itself with a more precise problem. */
  refused: readonly string[];
}

interface Template {
  segments: readonly string[];
  /** Per segment: a `{param}` (any non-empty segment matches), computed once. */
  params: readonly boolean[];
  /** Literal segments: the more, the better a match (`/v1/stats/series` before a `{param}`). */
  literals: number;
  methods: Map<string, Served>;
}

const isParam = (segment: string): boolean => /^\{\w+\}$/.test(segment);

function buildTemplates(): Template[] {
  const byPath = new Map<string, Template>();
  for (const op of OPERATIONS) {
    if (!op.path.startsWith("/v1/")) continue;
    let template = byPath.get(op.path);
    if (!template) {
      const segments = op.path.split("/").slice(1);
      const params = segments.map(isParam);
      template = { segments, params, literals: params.filter((p) => !p).length, methods: new Map() };
      byPath.set(op.path, template);
    }
    template.methods.set(op.method.toUpperCase(), {
      known: Object.keys(op.query?.shape ?? {}),
      refused: op.refusedQuery ?? [],
    });
  }
  return [...byPath.values()].sort((a, b) => b.literals - a.literals);
}

let templates: Template[] | undefined;

function matches(template: Template, segments: readonly string[]): boolean {
  if (template.segments.length !== segments.length) return false;
  for (let i = 0; i < segments.length; i++) {
    if (template.params[i] ? segments[i]!.length === 0 : template.segments[i] !== segments[i]) return false;
  }
  return true;
}

/** The methods a template serves, as `Allow` lists them. */
function allowed(template: Template): string[] {
  const methods = [...template.methods.keys()];
  if (methods.includes("GET")) methods.push("HEAD");
  return methods;
}

export const checkRoute = createMiddleware<AppEnv>(async function checkRoute(c, next) {
  templates ??= buildTemplates();
  const segments = c.req.path.split("/").slice(1);
  const candidates = templates.filter((t) => matches(t, segments));
  if (candidates.length === 0) return next();
  const method = c.req.method === "HEAD" ? "GET" : c.req.method;
  const template = candidates.find((t) => t.methods.has(method));
  if (!template) {
    const methods = [...new Set(candidates.flatMap(allowed))];
    throw httpProblems.methodNotAllowed(c.req.method, c.req.path, methods);
  }
  const served = template.methods.get(method)!;
  // Most requests carry no query: no URL to parse then.
  const names = c.req.url.includes("?") ? [...new Set(new URL(c.req.url).searchParams.keys())] : [];
  const unknown = names.filter((name) => !served.known.includes(name) && !served.refused.includes(name));
  if (unknown.length > 0) throw httpProblems.queryParameterUnknown(unknown, served.known);
  await next();
});
