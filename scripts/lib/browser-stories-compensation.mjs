/**
 * A compensation on the inspector (issue 45 §3, docs/steps.md "Compensation"), in a real browser
 * against the e2e's two Workers: an order of workflows/order-with-refund.json whose address the
 * demo's shipping refuses (422 for "undeliverable"), so shipping fails for good and the charge is
 * refunded. Proven as a user sees it: the execution's badge says COMPENSATED and its header what was
 * undone; the graph draws the refund (the charge's undo step) as a box right under the charge node,
 * joined to it; the charge's step holds its undo — state, its own key `refund-<order>-charge`, its
 * attempt opening request and response — and the ship step says it is not compensated and why; the
 * timeline lists the undo's attempt; the demo holds one refund for that key. The list's status
 * filter offers the three compensation statuses and finds the execution; the overview's status
 * chart counts it. A second story fails two refunds for good (the demo answers 502 after committing
 * each, five times): both executions COMPENSATION_FAILED; from the page, one undo is retried — the
 * same key, the demo replays its refund: one refund, COMPENSATED — and the other compensation is
 * marked resolved with a note, shown in its header. Called by ./browser-stories.mjs with its
 * browser helpers.
 */

const FINAL = ["COMPLETED", "FAILED", "CANCELLED", "COMPENSATED", "COMPENSATION_FAILED"];

/** Polls the trace until the execution's status is final (COMPENSATING is live). */
async function waitForFinal(ctx, executionId, capMs = 60_000) {
  const deadline = Date.now() + capMs;
  let last;
  while (Date.now() < deadline) {
    last = await ctx.api("GET", `/v1/executions/${executionId}`);
    if (last.status === 200 && FINAL.includes(last.json?.status)) return last.json;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error(
    `execution ${executionId} did not finish within ${capMs / 1000}s; last answer ${last?.status}: ${last?.text?.slice(0, 600)}`,
  );
}

export async function compensationStories(ctx, { newPage, openExecution }) {
  const { test, expect, expectEqual } = ctx;

  await test("inspector: an order compensated — its refund drawn beside the charge, with its own key, attempt and state", async () => {
    const orderId = `UI-REFUND-${ctx.run}`;
    const started = await ctx.trigger("order-with-refund", { order: { id: orderId, total: 30, address: "undeliverable" } });
    expectEqual(started.status, 202, `the trigger (${started.text?.slice(0, 300)})`);
    const executionId = started.json.executionId;
    const trace = await waitForFinal(ctx, executionId);
    expectEqual(trace.status, "COMPENSATED", `the execution (steps: ${JSON.stringify(trace.steps).slice(0, 800)})`);
    const refundKey = `refund-${orderId}-charge`;
    const charge = trace.steps.find((s) => s.vertexId === "charge");
    expectEqual(charge?.undo?.state, "COMPLETED", "the trace's charge step carries its undo");
    expectEqual(charge.undo.idempotencyKey, refundKey, "the undo's own key");

    const page = await newPage("compensation");
    // This story's own check (the run's last story checks every page, when it runs): no console or page error here.
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    await openExecution(page, executionId);
    await page.waitForSelector("article.execution[data-status=COMPENSATED]");
    expectEqual((await page.textContent(".exec-header h1 .badge"))?.trim(), "COMPENSATED", "the header's status badge");
    const fact = (await page.textContent("#fact-compensation"))?.trim();
    expectEqual(fact, "undoes charge · 1 completed", "the header says what was undone");

    // The graph: the refund is a box right under the charge node (beside the step it undoes), joined to it.
    const undoBox = await page.$("g.undo[data-undoes=charge]");
    expect(undoBox, "the graph draws the charge's undo step");
    expectEqual(await undoBox.getAttribute("data-state"), "COMPLETED", "the undo box's state");
    const node = await (await page.$("g.node[data-vertex=charge] rect")).boundingBox();
    const box = await (await page.$("g.undo[data-undoes=charge] rect")).boundingBox();
    expect(
      box.x >= node.x &&
        box.x + box.width <= node.x + node.width + 1 &&
        box.y > node.y + node.height &&
        box.y - (node.y + node.height) < 20,
      `the undo box sits right under the charge node (node ${JSON.stringify(node)}, undo ${JSON.stringify(box)})`,
    );
    expectEqual(await page.$("g.undo[data-undoes=ship]"), null, "no undo box for ship (it failed: nothing to undo)");
    const undoLabel = (await page.textContent("g.undo[data-undoes=charge] text"))?.trim();
    expect(undoLabel?.startsWith("↩ undo 1"), `the undo box's words (${undoLabel})`);

    // The charge's step holds its undo: state, key, the attempt opening its request and response.
    const panel = await page.textContent("#undo-charge");
    expect(panel.includes("Undo of charge") && panel.includes("COMPLETED"), `the undo panel (${panel})`);
    expectEqual((await page.textContent("#undo-key-charge"))?.trim(), refundKey, "the undo's key on the page");
    const attemptId = `#undo-attempt-charge-${charge.undo.attempts[0].epoch}`;
    await page.click(`${attemptId} summary`);
    const opened = await page.textContent(attemptId);
    expect(
      opened.includes(refundKey) && opened.includes("Response"),
      `the undo's attempt opens its request and response (${opened.slice(0, 300)})`,
    );
    // The steps the compensation leaves as they are say so, and why.
    const ship = await page.textContent("#undo-ship");
    expect(ship.includes("not compensated") && ship.includes("did not complete"), `ship is not compensated, and why (${ship})`);
    // The timeline lists the undo's attempt under the step it undoes.
    const row = await page.textContent("#timeline tr[data-undo=true][data-vertex=charge]");
    expect(row.includes("charge ↩ undo") && row.includes(refundKey), `the timeline's undo row (${row})`);

    if (ctx.screenshots) {
      await page.locator("#graph-title").scrollIntoViewIfNeeded();
      await page.screenshot({ path: new URL("../../docs/img/inspector-compensation.png", import.meta.url).pathname });
    }

    // The destination: one refund for the key.
    const refunds = await ctx.demoGet(`/refunds/lines?order=${encodeURIComponent(orderId)}`);
    const mine = (refunds.items ?? []).filter((r) => r.idempotencyKey === refundKey);
    expectEqual(mine.length, 1, `one refund at the demo for ${refundKey} (${JSON.stringify(refunds).slice(0, 400)})`);

    // The list: its status filter offers the compensation statuses and finds the execution.
    await page.goto(`${ctx.engineUrl}/ui/#/executions?status=COMPENSATED`);
    await page.waitForSelector(`#executions a:has-text('${executionId}')`);
    const options = await page.$$eval("select[name=status] option", (os) => os.map((o) => o.value));
    for (const status of ["COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"]) {
      expect(options.includes(status), `the status filter offers ${status} (${options.join(", ")})`);
    }
    const listed = await page.textContent(`#executions tr:has(a:has-text('${executionId}'))`);
    expect(listed.includes("COMPENSATED"), `the row's status badge (${listed})`);

    // The overview's status chart counts it, in its own colour.
    await page.goto(`${ctx.engineUrl}/ui/#/overview`);
    await page.waitForSelector("#status-COMPENSATED");
    const count = Number(await page.getAttribute("#status-COMPENSATED", "data-count"));
    expect(count >= 1, `the overview counts the compensated execution (${count})`);
    const legend = await page.textContent("#overview");
    expect(legend.includes("Compensated"), "the status chart's legend names Compensated");
    expectEqual(errors, [], "console and page errors on the pages of this story");
    await page.context().close();
  });

  await test("inspector: a failed compensation — its undo retried from the page (same key, one refund), one marked resolved", async () => {
    // Five 502s after commit per refund (its retry policy: 5 attempts): both undo steps fail for good.
    const armed = await fetch(`${ctx.demoUrl}/faults`, {
      method: "POST",
      body: JSON.stringify({ path: "/refunds/lines", mode: "after-commit", count: 10 }),
    });
    expectEqual(armed.status, 201, "POST /faults at the demo");
    const orders = [`UI-UNDO-R-${ctx.run}`, `UI-UNDO-M-${ctx.run}`];
    let ids;
    try {
      ids = [];
      for (const id of orders) {
        const started = await ctx.trigger("order-with-refund", { order: { id, total: 12, address: "undeliverable" } });
        expectEqual(started.status, 202, `the trigger (${started.text?.slice(0, 300)})`);
        ids.push(started.json.executionId);
      }
      for (const id of ids) {
        const trace = await waitForFinal(ctx, id, 120_000);
        expectEqual(
          trace.status,
          "COMPENSATION_FAILED",
          `the execution (charge undo: ${JSON.stringify(trace.steps[1]?.undo).slice(0, 600)})`,
        );
      }
    } finally {
      await ctx.disarm();
    }
    const page = await newPage("compensation-failed");
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));

    // Retry the failed undo from the page: the same key, the demo replays its refund.
    await openExecution(page, ids[0]);
    await page.waitForSelector("article.execution[data-status=COMPENSATION_FAILED]");
    expectEqual(await page.getAttribute("g.undo[data-undoes=charge]", "data-state"), "FAILED", "the graph's undo box is FAILED");
    const key = (await page.textContent("#undo-key-charge")).trim();
    expectEqual(key, `refund-${orders[0]}-charge`, "the failed undo's key");
    await page.click("#action-retry-undo-charge");
    await page.waitForSelector("#retry-compensation-dialog");
    expect((await page.textContent("#retry-compensation-dialog")).includes(key), "the dialog names the same key");
    await page.click("#retry-compensation-confirm");
    await page.waitForSelector("article.execution[data-status=COMPENSATED]", { timeout: 60_000 });
    expectEqual(await page.getAttribute("#undo-charge", "data-state"), "COMPLETED", "the undo completed on the operator's retry");
    expectEqual((await page.textContent("#undo-key-charge")).trim(), key, "the same key after the retry");
    const refunds = await ctx.demoGet(`/refunds/lines?order=${encodeURIComponent(orders[0])}`);
    const mine = (refunds.items ?? []).filter((r) => r.idempotencyKey === key);
    expectEqual(mine.length, 1, `one refund at the demo for ${key} after six sends of it (${JSON.stringify(refunds).slice(0, 300)})`);

    // Mark the other one resolved, with a note: COMPENSATED, the note in its header.
    await openExecution(page, ids[1]);
    await page.waitForSelector("article.execution[data-status=COMPENSATION_FAILED]");
    await page.click("#action-resolve-compensation");
    await page.waitForSelector("#resolve-compensation-dialog");
    await page.click("#resolve-compensation-confirm");
    expect((await page.textContent("#resolve-compensation-dialog")).includes("required"), "a note is required");
    await page.fill("#resolve-compensation-note", "refunded by hand at the bank");
    await page.click("#resolve-compensation-confirm");
    await page.waitForSelector("article.execution[data-status=COMPENSATED]", { timeout: 30_000 });
    const resolution = (await page.textContent("#fact-resolution")).trim();
    expect(
      resolution.includes("marked resolved by") && resolution.includes("refunded by hand at the bank") && resolution.includes("charge"),
      `the header shows the resolution (${resolution})`,
    );
    expectEqual(errors, [], "console and page errors on the pages of this story");
    await page.context().close();
  });
}
