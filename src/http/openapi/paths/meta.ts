/** The OpenAPI operations of the `meta` area: liveness and the document itself (no token). */
import { area, json, op } from "../operation";
import * as res from "../responses";

export const META_OPERATIONS = area("meta", [
  op("get", "/health", "health", {
    summary: "Liveness",
    public: true,
    answers: { 200: json("the Worker answers", res.Health) },
    problems: {},
  }),
  op("get", "/v1/openapi.json", "openApiDocument", {
    summary: "This document (public: it describes the API and holds no data)",
    public: true,
    answers: { 200: json("the OpenAPI 3.1 document", res.OpenApiDocument) },
    problems: {},
  }),
]);
