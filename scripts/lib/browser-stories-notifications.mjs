/**
 * Notification deliveries on the inspector (issue 45 §4, docs/notifications.md), in a real browser
 * against the e2e's two Workers: the workspace's notifications are set to the demo's receiver
 * (`POST /notifications`, which verifies the signature) with the demo's secret stored as a workspace
 * secret; an order of workflows/order-with-refund.json whose address the demo's shipping refuses
 * ("undeliverable") fails for good. Proven as a user sees it: the Notifications page (`#/notifications`)
 * shows the setting — URL and events, never the secret (neither its value nor its name) — and the
 * failure's delivery: `execution.failed`, a link to the execution, its webhook-id
 * (`idemflow.execution.failed.<id>`), attempts, status delivered and the receiver's answer; the link
 * opens the execution; a second failed order's delivery, with the page read one delivery at a time
 * (`#/notifications?limit=1`), is reached by "Older deliveries" (newest first); the demo's receiver
 * counted the first webhook-id once. At the end the setting an
 * earlier story made is put back, or none is left. Called by ./browser-stories.mjs with its
 * browser helpers.
 */

/** The demo receiver's signing secret (demo/src/notifications.ts DEMO_NOTIFICATION_SECRET). */
const DEMO_NOTIFICATION_SECRET = `whsec_${Buffer.from("idemflow-demo-notifications-key!").toString("base64")}`;
const SECRET_NAME = "E2E_NOTIFY";

/** Polls the deliveries until `executionId`'s `event` is delivered (or failed: then the story says why). */
async function waitForDelivery(ctx, executionId, event, capMs = 60_000) {
  const deadline = Date.now() + capMs;
  let last;
  while (Date.now() < deadline) {
    const res = await ctx.api("GET", "/v1/notifications/deliveries?limit=100");
    last = (res.json?.items ?? []).find((d) => d.executionId === executionId && d.event === event);
    if (last && last.status !== "pending") return last;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error(`no settled ${event} delivery for ${executionId} within ${capMs / 1000}s; last: ${JSON.stringify(last ?? null)}`);
}

export async function notificationStories(ctx, { newPage }) {
  const { test, expect, expectEqual } = ctx;

  await test("inspector: notifications — the setting (never its secret) and a failed order's delivery to the demo receiver", async () => {
    const secret = await ctx.api("PUT", `/v1/secrets/${SECRET_NAME}`, { body: { value: DEMO_NOTIFICATION_SECRET } });
    expect(secret.status === 200 || secret.status === 201, `PUT the workspace secret (${secret.status} ${secret.text?.slice(0, 300)})`);
    // An earlier story's setting (the walkthrough's) is put back at the end; none: deleted.
    const before = await ctx.api("GET", "/v1/notifications");
    const previous = before.status === 200 ? before.json : null;
    const url = `${ctx.demoUrl}/notifications`;
    const set = await ctx.api("PUT", "/v1/notifications", {
      body: { url, secret: SECRET_NAME, events: ["execution.failed", "execution.compensation_failed"] },
    });
    expectEqual(set.status, 200, `PUT /v1/notifications (${set.text?.slice(0, 300)})`);
    try {
      const orderId = `UI-NOTIFY-${ctx.run}`;
      const started = await ctx.trigger("order-with-refund", { order: { id: orderId, total: 9, address: "undeliverable" } });
      expectEqual(started.status, 202, `the trigger (${started.text?.slice(0, 300)})`);
      const executionId = started.json.executionId;
      const delivery = await waitForDelivery(ctx, executionId, "execution.failed");
      expectEqual(delivery.status, "delivered", `the delivery (${JSON.stringify(delivery)})`);
      const webhookId = `idemflow.execution.failed.${executionId}`;
      expectEqual(delivery.webhookId, webhookId, "the delivery's webhook-id");
      // A second failed order: two deliveries, for the page's paging below.
      const again = await ctx.trigger("order-with-refund", { order: { id: `${orderId}-2`, total: 9, address: "undeliverable" } });
      expectEqual(again.status, 202, `the second trigger (${again.text?.slice(0, 300)})`);
      const newer = await waitForDelivery(ctx, again.json.executionId, "execution.failed");
      expect(newer.id > delivery.id, `the second delivery is newer (${newer.id} > ${delivery.id})`);

      const page = await newPage("notifications");
      // This story's own check (the run's last story checks every page, when it runs): no console or page error here.
      const errors = [];
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
      page.on("pageerror", (e) => errors.push(e.message));
      await page.click("nav >> text=Notifications");
      await page.waitForSelector("#notify-url");
      expectEqual((await page.textContent("#notify-url"))?.trim(), url, "the setting's URL on the page");
      const events = (await page.textContent("#notify-events"))?.trim();
      expectEqual(events, "execution.failed, execution.compensation_failed", "the setting's events on the page");
      const whole = await page.textContent("#notifications");
      expect(!whole.includes(SECRET_NAME) && !whole.includes("whsec_"), "the page shows neither the secret nor its name");

      const row = `#deliveries tr[data-delivery="${delivery.id}"]`;
      await page.waitForSelector(`${row}[data-status=delivered]`);
      expectEqual(await page.getAttribute(row, "data-event"), "execution.failed", "the row's event");
      expectEqual(await page.getAttribute(`${row} [data-field=webhookId]`, "data-value"), webhookId, "the row's webhook-id (whole)");
      const shown = (await page.textContent(`${row} [data-field=webhookId]`))?.trim();
      expectEqual(shown, `idemflow.execution.failed.${executionId.slice(0, 12)}…`, "the row's webhook-id as shown (the id cut)");
      expectEqual((await page.textContent(`${row} [data-field=status]`))?.trim(), "delivered", "the row's status badge");
      expectEqual((await page.textContent(`${row} [data-field=attempts]`))?.trim(), String(delivery.attempts), "the row's attempts");
      const answer = (await page.textContent(`${row} [data-field=lastAnswer]`))?.trim();
      expect(answer?.startsWith("HTTP 200"), `the row's last answer (${answer})`);
      if (ctx.screenshots) {
        await page.screenshot({ path: new URL("../../docs/img/inspector-notifications.png", import.meta.url).pathname });
      }
      // Paging: one delivery a page, newest first; "Older deliveries" reads on with `before` until the first order's.
      await page.goto(`${ctx.engineUrl}/ui/#/notifications?limit=1`);
      await page.waitForSelector(`#deliveries-status:has-text('the newest 1 re-read')`);
      expectEqual(await page.$$eval("#deliveries tbody tr", (rows) => rows.length), 1, "one delivery on the first page of one");
      await page.waitForSelector(`#deliveries tr[data-delivery="${newer.id}"]`);
      for (let i = 0; i < 20 && !(await page.$(row)); i++) {
        await page.click("#deliveries-more");
        await page.waitForSelector(`#deliveries tbody tr:nth-child(${i + 2})`);
      }
      const order = await page.$$eval("#deliveries tbody tr", (rows) => rows.map((r) => Number(r.getAttribute("data-delivery"))));
      expect(order.includes(delivery.id) && order.includes(newer.id), `both deliveries after paging (${order.join(", ")})`);
      expectEqual(
        order,
        [...order].sort((a, b) => b - a),
        "newest first",
      );
      // The execution's link opens its page.
      await page.click(`${row} a[title="${executionId}"]`);
      await page.waitForSelector(`article.execution`);
      expect(page.url().endsWith(`#/executions/${executionId}`), `the link opens the execution (${page.url()})`);
      expectEqual(errors, [], "console and page errors on the pages of this story");
      await page.context().close();

      // The receiver verified the signature and holds the webhook-id once.
      const received = await ctx.demoGet("/notifications");
      const mine = (received.items ?? []).filter((r) => r.webhookId === webhookId);
      expectEqual(mine.length, 1, `the demo receiver holds ${webhookId} (${JSON.stringify(received).slice(0, 400)})`);
      expectEqual(mine[0].type, "execution.failed", "the received notification's type");
    } finally {
      if (previous) {
        const { url: u, secret: name, events: e, stuckAfterSeconds } = previous;
        await ctx.api("PUT", "/v1/notifications", {
          body: { url: u, secret: name, events: e, ...(stuckAfterSeconds === null ? {} : { stuckAfterSeconds }) },
        });
      } else await ctx.api("DELETE", "/v1/notifications");
    }
  });
}
