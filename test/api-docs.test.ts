/**
 * docs/api.md's routes table lists exactly the operations of the OpenAPI document the engine serves
 * (src/http/openapi/): a route added without a row, or a row for a route that is gone, fails here.
 */
import { describe, expect, it } from "vitest";
import apiDoc from "../docs/api.md?raw";
import { openApiDocument } from "../src/http/openapi/document";

const METHODS = ["get", "put", "post", "delete", "patch"] as const;

/** `METHOD /path` of every operation of the document. */
function documentOperations(): string[] {
  const paths = (openApiDocument() as { paths: Record<string, Record<string, unknown>> }).paths;
  return Object.entries(paths).flatMap(([path, item]) =>
    METHODS.filter((method) => Object.hasOwn(item, method)).map((method) => `${method.toUpperCase()} ${path}`),
  );
}

/** `METHOD /path` of every row of the "Routes" table: its first cell, in backticks. */
function tableRoutes(doc: string): string[] {
  const section = /^## Routes\s*$([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(doc)?.[1] ?? "";
  return [...section.matchAll(/^\|\s*`(GET|PUT|POST|DELETE|PATCH) (\/\S*)`\s*\|/gm)].map((m) => `${m[1]} ${m[2]}`);
}

describe("docs/api.md", () => {
  it("lists every operation of the OpenAPI document, once, and nothing else", () => {
    const documented = tableRoutes(apiDoc);
    const served = documentOperations();
    expect(served.length).toBeGreaterThan(25);
    const repeated = documented.filter((route, i) => documented.indexOf(route) !== i);
    expect(repeated, "rows listed twice in docs/api.md").toEqual([]);
    expect(
      served.filter((route) => !documented.includes(route)),
      "operations of the OpenAPI document with no row in docs/api.md's Routes table: add one each",
    ).toEqual([]);
    expect(
      documented.filter((route) => !served.includes(route)),
      "rows of docs/api.md's Routes table that the OpenAPI document does not serve: remove or correct them",
    ).toEqual([]);
  });
});
