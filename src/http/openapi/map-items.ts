/**
 * The OpenAPI shapes of a MAP's items (SPEC section 16, docs/steps.md "MAP"): the trace step's
 * `map` (./responses.ts `Step`), and `GET /v1/executions/{executionId}/steps/{vertexId}/items`,
 * the page of items after a cursor (src/http/routes/map-items.ts) — listed in the `executions` area
 * (./paths/executions.ts).
 */
import { z } from "zod";
import { AUTH, json, merge, op } from "./operation";

const MaybeTime = z.iso.datetime().nullable().describe("ISO-8601 UTC");
const Count = z.int().min(0);

const ItemAttempt = z
  .object({
    epoch: z.int(),
    attempt: z.int(),
    outcome: z.enum(["running", "completed", "failed", "retried", "in_progress", "lost", "cancelled", "slept"]),
    startedAt: MaybeTime,
    finishedAt: MaybeTime,
    durationMs: z.number().nullable(),
    idempotencyKey: z.string().nullable(),
    request: z.unknown(),
    response: z.unknown(),
    error: z.string().nullable(),
    retryDelay: z.unknown(),
  })
  .describe("an attempt of the item (as a step's attempts[])");

export const MapItem = z
  .object({
    index: Count.describe("the item's position in the persisted list, from 0"),
    state: z.enum(["PENDING", "DISPATCHED", "EXECUTING", "COMPLETED", "FAILED", "CANCELLED"]),
    attempt: Count,
    epoch: Count,
    idempotencyKey: z.string().nullable().describe("the key the item persisted and sends on every attempt"),
    item: z.unknown().describe("the list element"),
    output: z.unknown(),
    outputOmitted: z.object({ bytes: Count, limit: Count }).nullable(),
    collected: z.unknown().describe("what the item passes on to the MAP's output"),
    error: z.string().nullable(),
    createdAt: MaybeTime,
    finishedAt: MaybeTime,
    durationMs: z.number().nullable(),
    events: z.array(z.object({ type: z.string(), epoch: z.int().nullable(), at: MaybeTime, detail: z.string().nullable() })),
    attempts: z.array(ItemAttempt),
    permitWait: z
      .object({
        connector: z.string(),
        since: MaybeTime.describe("when the item first asked (kept across its wake-ups)"),
        until: MaybeTime.describe("when it asks again (while waiting)"),
        grantedAt: MaybeTime.describe("when it got the permit; null while it waits"),
        reason: z.string(),
        text: z.string().describe('"waiting for a permit of …" or "waited 4.2 s for …: …"'),
      })
      .nullable()
      .describe("an item through a limited connector that waited for a permit (as a step's permitWait); null if it never did"),
  })
  .describe("one item of a MAP");

const Counts = {
  total: Count,
  pending: Count.describe("persisted, not started: waiting for a slot of the MAP's concurrency (or stopped by a failed item)"),
  dispatched: Count,
  executing: Count,
  completed: Count,
  failed: Count,
  cancelled: Count,
};

export const MapTrace = z
  .object({
    ...Counts,
    items: z.array(MapItem).max(100).describe("the first page of items, in list order"),
    nextCursor: z.string().nullable().describe("the items route's cursor for the next page; null when every item is here"),
  })
  .describe('a MAP step\'s items (docs/steps.md "MAP"): counts by state and the first page');

export const MapItemsQuery = z.object({
  cursor: z.string().min(1).max(100).optional().describe("the `nextCursor` of the trace's `map`, or of the previous page"),
});

export const MapItemsPage = z.object({
  executionId: z.string(),
  vertexId: z.string(),
  ...Counts,
  items: z.array(MapItem).max(100),
  nextCursor: z.string().nullable(),
});

export const MAP_ITEM_OPERATIONS = [
  op("get", "/v1/executions/{executionId}/steps/{vertexId}/items", "listMapItems", {
    summary: "A MAP step's items, a page of 100 after a cursor: state, attempts, key, output or error",
    query: MapItemsQuery,
    answers: { 200: json("a page of the MAP's items, in list order", MapItemsPage) },
    problems: merge(AUTH, { 400: ["invalid-query", "invalid-cursor"], 404: ["not-found"] }),
  }),
];
