/**
 * Events over the authenticated API (SPEC section 14, docs/waits.md), in the bearer's workspace:
 *   POST /v1/events   `{ name, match, id?, data? }` → 202 a new event (resumed waits, or buffered),
 *                     200 `deduplicated: true` for a duplicate (same `id`, or same content within
 *                     EVENT_DEDUPE_WINDOW) with the first delivery's outcome. An `Idempotency-Key`
 *                     header, when sent, replays the first answer verbatim (the inspector's
 *                     Approve / Reject send one).
 *   GET  /v1/waits    `?event=&match=` → the executions waiting, oldest first, with their timeouts.
 */
import { Hono } from "hono";
import { ingestEvent, MAX_EVENT_DATA_BYTES } from "../../events/ingest";
import { correlationOf } from "../../lib/correlation";
import { eventProblems } from "../../events/problems";
import { ingressProblems } from "../../ingress/problems";
import { listOpenWaits } from "../../ledger";
import { findUnsafeNumberLiteral } from "../../lib/json-numbers";
import { isJsonObject } from "../../lib/own-member";
import { parseJsonBytesWithText, readRawBody } from "../../lib/request-body";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { WaitListQuery } from "../openapi/requests";
import { parseQuery } from "../query-params";
import { queryReadings } from "../../lib/query-readings";
import type { StepQueue } from "../../steps/runtime";
import { nowOf } from "../../lib/clock";

/** The data's bound and room for the other members. */
export const MAX_EVENT_BODY_BYTES = MAX_EVENT_DATA_BYTES + 8192;

export const eventRoutes = new Hono<AppEnv>();
export const waitRoutes = new Hono<AppEnv>();
eventRoutes.use("*", requireWorkspace);
waitRoutes.use("*", requireWorkspace);

const optionalIdempotencyKey = idempotency({
  required: false,
  principal: principalFromContext("workspace"),
  maxBodyBytes: MAX_EVENT_BODY_BYTES,
});

eventRoutes.post("/", optionalIdempotencyKey, async (c) => {
  const raw = await readRawBody(c.req.raw, MAX_EVENT_BODY_BYTES);
  const { text, json } = parseJsonBytesWithText(raw);
  const unsafe = findUnsafeNumberLiteral(text);
  if (unsafe) throw ingressProblems.numberOutOfRange(unsafe, "body");
  if (!isJsonObject(json)) throw eventProblems.invalid("", "the body is a JSON object `{ name, match, id?, data? }`");
  const { answer } = await ingestEvent(
    { name: json.name, match: json.match, id: json.id, data: json.data },
    {
      db: c.env.DB,
      queue: c.env.QUEUE as unknown as StepQueue,
      vars: c.env as unknown as Record<string, unknown>,
      workspace: c.get("workspace"),
      source: null,
      now: nowOf(c.env),
    },
  );
  return c.json(answer, answer.deduplicated ? 200 : 202);
});

waitRoutes.get("/", async (c) => {
  const q = parseQuery(WaitListQuery, c.req.query());
  // `?match=1001` finds a wait on the string "1001" and one on the number 1001; `"1001"` only the string.
  let matchHashes: string[] | null = null;
  if (q.match !== undefined) {
    const correlations = await Promise.all(queryReadings(q.match).map((value) => correlationOf(value)));
    const usable = correlations.flatMap((c) => ("problem" in c ? [] : [c.hash]));
    const refused = correlations.find((c) => "problem" in c);
    if (usable.length === 0) throw eventProblems.invalid("?match", refused && "problem" in refused ? refused.problem : "no value");
    matchHashes = usable;
  }
  const waits = await listOpenWaits(c.env.DB, { workspace: c.get("workspace"), name: q.event, matchHashes, limit: q.limit });
  const iso = (ms: number) => new Date(ms).toISOString();
  return c.json({
    event: q.event,
    waits: waits.map((w) => ({
      executionId: w.executionId,
      vertexId: w.vertexId,
      workflowId: w.workflowId,
      name: w.name,
      match: w.matchValue,
      consume: w.consume,
      registeredAt: iso(w.registeredAt),
      timeoutAt: iso(w.timeoutAt),
    })),
  });
});
