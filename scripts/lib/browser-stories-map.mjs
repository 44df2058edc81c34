/**
 * A MAP on the inspector's execution page (issue 43 §3), in a real browser against the e2e's two
 * Workers: a refund per order line through the demo-refunds connector, 105 lines (one the demo
 * refuses), so the items table has a second page. Proven as a user sees it: the MAP is one vertex
 * whose graph node and heading carry its progress ("104 / 105 done, 1 failed"); its table shows the
 * first 100 items (state, attempts, key, duration, error) and pages to the rest through
 * `GET /v1/executions/{id}/steps/{vertexId}/items`; a failed item opens its attempt with its key and
 * error; every item sent its own key `refund-<order>-<sku>`, and the demo's record holds one call
 * per key (no double). A second story runs a MAP of 1,000 TRANSFORM items and proves the page draws
 * one page of 100 rows and pages on (its render time printed, not asserted; ~45 s of engine time
 * locally, where miniflare's queue keeps one batch of 10 in flight). Called by ./browser-stories.mjs
 * with its browser helpers.
 */

const LINES = 105;
const REFUSED = 7;

/** refund-lines (workflows/refund-lines.json) with room for more than a page of items. */
function refundLines(workflowId) {
  return {
    id: workflowId,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 10,
          maxItems: 200,
          onItemFailure: "continue",
          collect: "= { 'sku': line.sku, 'refund': body.id }",
          step: {
            type: "GATEWAY",
            config: {
              connector: "demo-refunds",
              operation: "refund",
              method: "POST",
              path: "/lines",
              keyFields: { order: "= payload.order.id", sku: "= line.sku" },
              body: "= { 'order': payload.order.id, 'sku': line.sku, 'amount': line.amount }",
            },
          },
        },
      },
    ],
    edges: [{ from: "received", to: "refund" }],
  };
}

export async function mapStories(ctx, { newPage, openExecution }) {
  const { test, expect, expectEqual } = ctx;

  await test("inspector: a MAP is one vertex with its progress and a paged table of its items, each opening its attempts", async () => {
    const workflowId = `refund-lines-ui-${ctx.run}`;
    const saved = await ctx.api("PUT", `/v1/workflows/${workflowId}`, { body: refundLines(workflowId) });
    expectEqual(saved.status, 201, `PUT the MAP workflow (${saved.text?.slice(0, 400)})`);
    const orderId = `UI-MAP-${ctx.run}`;
    // Line 7's negative amount is refused by the demo (422): that item fails, the others complete.
    const lines = Array.from({ length: LINES }, (_, i) => ({ sku: `SKU-${i}`, amount: i === REFUSED ? -1 : 1 + (i % 5) }));
    const started = await ctx.trigger(workflowId, { order: { id: orderId, lines } });
    expectEqual(started.status, 202, `the trigger (${started.text?.slice(0, 300)})`);
    const executionId = started.json.executionId;
    const done = await ctx.waitForExecution(executionId, 150_000);
    expectEqual(done.status, "COMPLETED", "the execution (onItemFailure: continue)");
    const map = done.steps.find((s) => s.vertexId === "refund")?.map;
    expect(map, "the trace's MAP step carries `map`");
    expectEqual(map.items.length, 100, "the trace carries the first page of items only");

    const page = await newPage("map");
    await openExecution(page, executionId);
    const progress = `${LINES - 1} / ${LINES} done, 1 failed`;
    expectEqual((await page.textContent("#map-progress-refund"))?.trim(), progress, "the MAP's progress beside its name");
    const node = await page.getAttribute("g.node[data-vertex=refund]", "aria-label");
    expect(node.includes(`${LINES - 1}/${LINES} done, 1 failed`), `the graph's MAP node carries its progress (${node})`);

    // Only the page shown is drawn: the render time is printed (measured, not asserted), as for the 200-step execution.
    ctx.log(`      a MAP of ${LINES} items: the execution page rendered in ${await page.getAttribute("#main", "data-render-ms")} ms`);

    // The first page: 100 rows, each with its own key built from the order and the line's SKU.
    expectEqual(await page.$$eval("#map-items-refund tbody tr.item", (trs) => trs.length), 100, "rows on the first page");
    expectEqual((await page.textContent("#map-range-refund"))?.trim(), `items 1–100 of ${LINES}`, "the range shown");
    const keys = await page.$$eval("#map-items-refund tbody tr.item td.key", (tds) => tds.map((td) => td.textContent));
    expectEqual(new Set(keys).size, 100, "100 distinct keys on the first page");
    expectEqual(keys[3], `refund-${orderId}-SKU-3`, "an item's key: refund-<order>-<sku>");
    expectEqual(await page.getAttribute(`#map-item-refund-${REFUSED}`, "data-state"), "FAILED", "the refused line's state");

    // The failed item opens its attempt: the key it sent and the demo's refusal.
    await page.click(`#map-item-refund-${REFUSED}-open`);
    await page.waitForSelector(`#map-item-refund-${REFUSED}-attempts details`);
    const attempt = await page.textContent(`#map-item-refund-${REFUSED}-attempts`);
    expect(attempt.includes(`refund-${orderId}-SKU-${REFUSED}`), `the failed item's attempt shows its key (${attempt.slice(0, 300)})`);
    expect(/422/.test(attempt), `the failed item's attempt shows the refusal (${attempt.slice(0, 300)})`);

    // The next page through the items route, and back.
    await page.click("#map-next-refund");
    await page.waitForSelector(`#map-item-refund-${LINES - 1}`);
    expectEqual((await page.textContent("#map-range-refund"))?.trim(), `items 101–${LINES} of ${LINES}`, "the second page's range");
    expect((await page.$("#map-next-refund")) === null, "no next page after the last");
    await page.click("#map-previous-refund");
    await page.waitForSelector("#map-item-refund-0");
    expectEqual((await page.textContent("#map-range-refund"))?.trim(), `items 1–100 of ${LINES}`, "back on the first page");
    await page.context().close();

    // The destination's record: one call per key, every line but the refused one refunded once.
    const calls = (await ctx.demoGet(`/refunds/calls?order=${encodeURIComponent(orderId)}`)).items;
    expectEqual(calls.length, LINES - 1, "calls recorded by the demo (the refused line is not)");
    expectEqual(new Set(calls.map((c) => c.idempotencyKey)).size, LINES - 1, "one call per key");
    expect(
      calls.every((c) => c.outcome === "created"),
      `every call made its refund (${calls.filter((c) => c.outcome !== "created").length} not)`,
    );
  });

  await test("inspector: a MAP of 1,000 items draws one page of them (render time printed, not asserted)", async () => {
    const workflowId = `map-thousand-ui-${ctx.run}`;
    const definition = {
      id: workflowId,
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "each",
          type: "MAP",
          config: {
            items: "= payload.skus",
            as: "sku",
            concurrency: 50,
            maxItems: 1000,
            step: { type: "TRANSFORM", config: { output: { sku: "= sku", at: "= index" } } },
          },
        },
      ],
      edges: [{ from: "received", to: "each" }],
    };
    expectEqual((await ctx.api("PUT", `/v1/workflows/${workflowId}`, { body: definition })).status, 201, "PUT the 1,000-item MAP");
    const skus = Array.from({ length: 1000 }, (_, i) => `S-${i}`);
    const started = await ctx.trigger(workflowId, { skus });
    const done = await ctx.waitForExecution(started.json.executionId, 170_000);
    expectEqual(done.status, "COMPLETED", "the 1,000-item MAP");
    const page = await newPage("map-thousand");
    const opened = Date.now();
    await openExecution(page, done.executionId);
    await page.waitForSelector("#map-items-each tbody tr.item");
    const shownMs = Date.now() - opened;
    expectEqual((await page.textContent("#map-progress-each"))?.trim(), "1000 / 1000 done", "the progress");
    expectEqual(await page.$$eval("#map-items-each tbody tr.item", (trs) => trs.length), 100, "one page of rows drawn");
    ctx.log(`      1,000 items: shown ${shownMs} ms after navigation (render ${await page.getAttribute("#main", "data-render-ms")} ms)`);
    await page.click("#map-next-each");
    await page.waitForSelector("#map-item-each-199");
    await page.context().close();
  });
}
