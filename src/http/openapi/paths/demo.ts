/** The OpenAPI operations of the `demo` area: endpoints of the engine Worker itself (src/http/routes/demo.ts). */
import { area, AUTH, idempotencyKey, json, KEYED_ACTION, merge, op } from "../operation";
import * as req from "../requests";
import * as res from "../responses";

const ANY_JSON_BODY = { schema: req.TriggerPayload, required: true, description: "any JSON" };

export const DEMO_OPERATIONS = area("demo", [
  op("post", "/demo/orders", "demoOrder", {
    summary: "Demo: an endpoint behind the Idempotency-Key middleware",
    headers: [idempotencyKey(true)],
    body: ANY_JSON_BODY,
    answers: { 201: json("the order", res.DemoOrder, ["location", "idempotent-replayed"]) },
    problems: merge(KEYED_ACTION, { 400: ["malformed-json"] }),
  }),
  op("post", "/demo/orders-unguarded", "demoOrderUnguarded", {
    summary: "Demo: the same handler without the middleware (for the benchmark)",
    body: ANY_JSON_BODY,
    answers: { 201: json("the order", res.DemoOrder, ["location"]) },
    problems: merge(AUTH, { 400: ["malformed-json"] }),
  }),
]);
