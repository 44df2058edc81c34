/**
 * `GET /v1/executions/{executionId}/steps/{vertexId}/items?cursor=` (docs/steps.md "MAP"): a MAP
 * step's items, 100 per page in list order, each with its state, attempts, key, output or error —
 * the pages after the trace's first (`map.nextCursor`). Scoped to the bearer's workspace: another
 * workspace's execution answers 404.
 */
import { Hono } from "hono";
import { MAP_ITEMS_PAGE, readItemsPage } from "../../ledger";
import { commonProblems } from "../../lib/common-problems";
import { itemsCursor, itemsCursorAfter, itemTrace, mapCounts } from "../../steps/map-trace";
import { attemptTrace } from "../../steps/trace";
import { isoTime } from "../../lib/iso-time";
import { executionProblems } from "../../steps/problems";
import { requireWorkspace, type AppEnv } from "../auth";
import { MapItemsQuery } from "../openapi/map-items";
import { parseQuery } from "../query-params";

export const mapItemRoutes = new Hono<AppEnv>();

mapItemRoutes.use("/:executionId/steps/:vertexId/items", requireWorkspace);

mapItemRoutes.get("/:executionId/steps/:vertexId/items", async (c) => {
  const q = parseQuery(MapItemsQuery, c.req.query());
  const after = q.cursor === undefined ? -1 : itemsCursorAfter(q.cursor);
  if (after === null) throw executionProblems.invalidCursor();
  const executionId = c.req.param("executionId");
  const vertexId = c.req.param("vertexId");
  const page = await readItemsPage(c.env.DB, c.get("workspace"), executionId, vertexId, after, MAP_ITEMS_PAGE);
  if (!page) throw commonProblems.notFound(`Execution ${executionId}`);
  const byKey = <R extends { vertexId: string }>(rows: readonly R[]) => {
    const out = new Map<string, R[]>();
    for (const r of rows) out.set(r.vertexId, [...(out.get(r.vertexId) ?? []), r]);
    return out;
  };
  const attempts = byKey(page.attempts);
  const events = byKey(page.events);
  return c.json({
    executionId,
    vertexId,
    ...mapCounts(page.counts),
    items: page.items.map((i) => {
      const key = `${vertexId}#${i.index}`;
      const itemEvents = (events.get(key) ?? []).map((e) => ({ type: e.type, epoch: e.epoch, at: isoTime(e.at), detail: e.detail }));
      return itemTrace(i, attempts.get(key) ?? [], itemEvents, attemptTrace);
    }),
    nextCursor: itemsCursor(page.nextAfter),
  });
});
