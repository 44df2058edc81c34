/**
 * The problems any route can answer: authentication, a missing resource or route, a body that is
 * not JSON or is too large, and the catch-all 500. They live in lib, not in the HTTP layer,
 * because ingress and the body readers (src/lib/request-body.ts) raise them too.
 */
import { ProblemError, type ProblemCatalog } from "./problem";

export type CommonProblemCode =
  "unauthorized" | "not-found" | "route-not-found" | "malformed-json" | "json-too-deep" | "payload-too-large" | "internal-error";

export const commonProblems = {
  unauthorized: () =>
    new ProblemError({
      status: 401,
      code: "unauthorized",
      title: "Missing or unknown bearer token",
      detail: "Send `Authorization: Bearer <token>`; locally `dev-token` maps to workspace `dev`.",
      headers: { "www-authenticate": 'Bearer realm="idemflow"' },
    }),
  /** `what` names the resource, e.g. `Workflow "orders"`: another workspace's resource is not found either. */
  notFound: (what: string) =>
    new ProblemError({ status: 404, code: "not-found", title: "Not found", detail: `${what} does not exist in this workspace.` }),
  /** `detail` says where the routes are listed; the demo destinations (demo/src) list their own. */
  routeNotFound: (detail = "See the README's API table for the routes idemflow serves.") =>
    new ProblemError({ status: 404, code: "route-not-found", title: "No such route", detail }),
  malformedJson: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "malformed-json",
      title: "The request body is not valid JSON",
      detail: `${reason}. Send a JSON document with \`content-type: application/json\`.`,
    }),
  /** `depth`: how deeply the body nests arrays and objects (src/lib/json-depth.ts). */
  jsonTooDeep: (depth: number, maxDepth: number) =>
    new ProblemError({
      status: 400,
      code: "json-too-deep",
      title: "The JSON body nests too deeply",
      detail: `The body nests arrays and objects ${depth} levels deep; at most ${maxDepth} are accepted. Send a flatter document.`,
      extensions: { depth, maxDepth },
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
} satisfies ProblemCatalog<CommonProblemCode>;
