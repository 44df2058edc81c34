/**
 * The OpenAPI operation of flow control (SPEC section 17, docs/connectors.md "Limits"):
 * `GET /v1/connectors/{name}/state`, the live state of a connector's limits beside its versioned
 * definition (src/http/routes/connectors.ts; the answer is src/flow/state.ts).
 */
import { z } from "zod";
import { area, AUTH, json, merge, op } from "../operation";

const Time = z.iso.datetime().describe("ISO-8601 UTC");

export const ConnectorState = z.object({
  name: z.string(),
  limited: z.boolean().describe("false: the connector has no limits (every other member is then null or 0)"),
  concurrency: z.number().int().nullable().describe("the most calls in flight at once; null: no cap"),
  rate: z
    .object({ count: z.number().int(), per: z.enum(["s", "m", "h"]), burst: z.number().int() })
    .nullable()
    .describe("the token bucket: `count` tokens per second, minute or hour, at most `burst` held; null: no rate"),
  inFlight: z.number().int().describe("permits held now by live calls"),
  waiting: z.number().int().describe("steps parked for a permit"),
  tokens: z.number().nullable().describe("tokens in the bucket now (refilled to this instant); null without a rate"),
  pausedUntil: Time.nullable().describe("a 429/503 with Retry-After paused every send until then; null: not paused"),
  pauseReason: z.string().nullable(),
  heldBack: z.number().int().describe("sends held back so far (every refused ask, counted)"),
});

export const FLOW_OPERATIONS = area("connectors", [
  op("get", "/v1/connectors/{name}/state", "getConnectorState", {
    summary: "A connector's live flow-control state: in flight, tokens, paused until",
    answers: { 200: json("the state now (not versioned: read at this instant)", ConnectorState) },
    problems: merge(AUTH, { 404: ["not-found"] }),
  }),
]);
