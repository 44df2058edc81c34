/**
 * GET /v1/openapi.json (src/http/openapi): served publicly as OpenAPI 3.1, it documents every route
 * the Hono app registers (a new route without documentation fails here), and its problem schema's
 * `code` enum holds every code of the engine's problem catalogs. The document's validity as OpenAPI
 * 3.1, and every real answer against it, are checked by the e2e (in Node, where the validators run).
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import problemsDoc from "../../docs/problems.md?raw";
import { app } from "../../src/app";
import { PROBLEM_CODES } from "../../src/http/openapi/responses";

interface Document {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown>; security?: unknown[] }>>;
  components: { schemas: Record<string, { properties?: Record<string, { enum?: string[] }>; required?: string[] }> };
}

async function fetchDocument(): Promise<{ response: Response; document: Document }> {
  const response = await SELF.fetch("http://idemflow.test/v1/openapi.json");
  return { response, document: (await response.clone().json()) as Document };
}

/** The engine's codes as docs/problems.md lists them, catalog by catalog (the demo destinations are another Worker). */
function documentedCodes(): string[] {
  const engine = problemsDoc.split(/^## Demo destinations/m)[0]!;
  return [...engine.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map((m) => m[1]!);
}

describe("GET /v1/openapi.json", () => {
  it("answers 200 JSON, OpenAPI 3.1.0, without a bearer token", async () => {
    const { response, document } = await fetchDocument();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(document.openapi).toBe("3.1.0");
    expect(document.paths["/v1/openapi.json"]?.get?.security).toEqual([]);
    expect(document.paths["/v1/executions"]?.get?.security).toBeUndefined(); // the document's default: the bearer token
  });

  it("documents every route the app registers, method by method", async () => {
    const { document } = await fetchDocument();
    const registered = app.routes
      .filter((route) => route.method !== "ALL") // middleware (`use`), not a route
      .map((route) => ({ method: route.method.toLowerCase(), path: route.path.replace(/:(\w+)/g, "{$1}").replace(/(.)\/$/, "$1") }));
    expect(registered.length).toBeGreaterThan(15);
    const missing = registered.filter(({ method, path }) => document.paths[path]?.[method] === undefined);
    expect(missing).toEqual([]);
  });

  it("documents the execution list's filters and the stats route", async () => {
    const { document } = await fetchDocument();
    const list = document.paths["/v1/executions"]!.get as unknown as {
      parameters: Array<{ name: string; schema: Record<string, unknown> }>;
    };
    const param = (name: string) => list.parameters.find((p) => p.name === name)?.schema;
    expect(list.parameters.map((p) => p.name).sort()).toEqual(
      [
        "cursor",
        "hadDuplicates",
        "limit",
        "retried",
        "since",
        "status",
        "until",
        "workflowId",
        "identity",
        "destinationKey",
        "keyPrefix",
        "keyValues",
      ].sort(),
    );
    expect(param("status")?.enum).toEqual([
      "RUNNING",
      "COMPLETED",
      "FAILED",
      "CANCELLED",
      "COMPENSATING",
      "COMPENSATED",
      "COMPENSATION_FAILED",
    ]);
    expect([param("limit")?.minimum, param("limit")?.maximum]).toEqual([1, 100]);
    expect(param("since")?.format).toBe("date-time");
    expect(param("hadDuplicates")?.enum).toEqual(["true", "false"]);
    expect(document.paths["/v1/stats"]?.get).toBeDefined();
    expect(document.components.schemas.Trace?.required).toContain("duplicatesStopped");
  });

  it("lists every problem code of the catalogs in the problem schema's enum, and no other", async () => {
    const { document } = await fetchDocument();
    const codes = documentedCodes();
    expect(codes.length).toBeGreaterThan(40);
    const enumerated = document.components.schemas.Problem?.properties?.code?.enum ?? [];
    expect([...enumerated].sort()).toEqual([...codes].sort());
    expect([...PROBLEM_CODES].sort()).toEqual([...codes].sort());
  });

  it("answers every error as application/problem+json, as documented", async () => {
    const unauthorized = await SELF.fetch("http://idemflow.test/v1/executions");
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("content-type")).toBe("application/problem+json");
    const { document } = await fetchDocument();
    const documented = document.paths["/v1/executions"]!.get!.responses["401"] as { content: Record<string, unknown> };
    expect(Object.keys(documented.content)).toEqual(["application/problem+json"]);
  });
});
