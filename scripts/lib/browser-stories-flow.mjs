/**
 * Flow control on the inspector (issue 44, docs/connectors.md "Limits"), in a real browser against
 * the e2e's two Workers: workflows/limited-charges.json through connectors/demo-limited.json (5 in
 * flight, 20 a second) to the demo's /limited route. Proven as a user sees it:
 * - eight orders at once while the demo holds each call 15 s: three wait. A waiting step's page says
 *   why ("waiting for a permit of demo-limited since …: every permit is in flight"), the graph node
 *   says it waits, and the connector's state beside it reads 5 of 5 in flight and who waits; once
 *   granted and done, the line says how long it waited. The connectors page lists the connector's
 *   limits and its sends held back; the overview's "sends held back" counts them.
 * - one injected 429 with Retry-After pauses every send to the connector: the next order's step
 *   waits "paused by a 429 at …", and the connector's state says until when.
 * Called by ./browser-stories.mjs with its browser helpers.
 */

const CONNECTOR = "demo-limited";

/** Polls `check` until it answers something (not null), or throws after `capMs`. */
async function until(check, capMs, what) {
  const deadline = Date.now() + capMs;
  for (;;) {
    const found = await check();
    if (found !== null && found !== undefined) return found;
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${capMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export async function flowStories(ctx, { newPage, openExecution }) {
  const { test, expect, expectEqual } = ctx;
  const configure = async (body) => {
    const res = await fetch(`${ctx.demoUrl}/limited/config`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expectEqual(res.status, 200, "POST /limited/config at the demo");
  };
  const chargeOf = async (executionId) => {
    const trace = await ctx.api("GET", `/v1/executions/${executionId}`);
    return { trace: trace.json, charge: trace.json?.steps?.find((s) => s.vertexId === "charge") ?? null };
  };
  const start = async (tag) => {
    const started = await ctx.trigger("limited-charges", { order: { id: `UI-LIM-${ctx.run}-${tag}`, total: 5 } });
    expectEqual(started.status, 202, `the trigger (${started.text?.slice(0, 300)})`);
    return started.json.executionId;
  };
  const waitAllDone = (ids) =>
    until(
      async () => {
        for (const id of ids) if ((await chargeOf(id)).trace?.status !== "COMPLETED") return null;
        return true;
      },
      120_000,
      "every limited charge completed",
    );

  await test("inspector: a step waiting for a connector's permit says why, beside the connector's state now", async () => {
    await configure({ delayMs: 15_000, inject429: 0, retryAfterSeconds: 1 });
    const ids = [];
    try {
      for (let i = 0; i < 8; i++) ids.push(await start(`c${i}`));
      // A step the limits hold back: its permit wait has no grant yet.
      const waiting = await until(
        async () => {
          for (const id of ids) {
            const { charge } = await chargeOf(id);
            if (charge?.permitWait && charge.permitWait.grantedAt === null && charge.state !== "COMPLETED") return id;
          }
          return null;
        },
        30_000,
        "a charge waiting for a permit of demo-limited",
      );
      const page = await newPage("flow");
      const errors = [];
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
      page.on("pageerror", (e) => errors.push(e.message));
      await openExecution(page, waiting);
      await page.waitForSelector("#permit-wait-charge[data-waiting=true]");
      const line = (await page.textContent("#permit-line-charge")).trim();
      expect(
        line.includes(`waiting for a permit of ${CONNECTOR}`) && line.includes("every permit is in flight"),
        `the waiting reason (${line})`,
      );
      expectEqual((await page.textContent("#permit-tag-charge"))?.trim(), `waiting for a permit of ${CONNECTOR}`, "the step's tag");
      const node = await page.getAttribute("g.node[data-vertex=charge]", "aria-label");
      expect(node.includes(`waiting for ${CONNECTOR}`), `the graph node says it waits (${node})`);
      // The connector's state beside it, read live: every permit in flight, someone waiting.
      await page.waitForSelector("#connector-state-charge");
      expectEqual((await page.textContent("#connector-state-charge-in-flight")).trim(), "5 of 5", "permits in flight of the connector's 5");
      const waitingCount = Number((await page.textContent("#connector-state-charge-waiting")).trim());
      expect(waitingCount >= 1, `steps waiting for a permit (${waitingCount})`);
      expect(
        Number((await page.textContent("#connector-state-charge-held-back")).trim()) >= 1,
        "the connector's sends held back, on the waiting step's page",
      );
      const limits = (await page.textContent("#connector-state-charge-limits")).trim();
      expectEqual(limits, "5 in flight, 20/s (burst 20)", "the connector's limits in words");
      if (ctx.screenshots) {
        await page.locator("#permit-wait-charge").scrollIntoViewIfNeeded();
        await page.screenshot({ path: new URL("../../docs/img/inspector-permit-wait.png", import.meta.url).pathname });
      }

      // The connectors page: its limits and the sends they held back.
      await page.goto(`${ctx.engineUrl}/ui/#/connectors`);
      await page.waitForSelector(`#connectors tr[data-connector=${CONNECTOR}]`);
      const row = await page.textContent(`#connectors tr[data-connector=${CONNECTOR}]`);
      expect(row.includes("5 in flight, 20/s (burst 20)"), `the connectors page lists its limits (${row})`);
      const held = Number((await page.textContent(`#connectors tr[data-connector=${CONNECTOR}] td[data-field=heldBack]`)).trim());
      expect(held >= 1, `the connectors page counts the sends held back (${held})`);
      // The overview's boundary "sends held back", per connector.
      await page.goto(`${ctx.engineUrl}/ui/#/overview`);
      await page.waitForSelector(`#held-back-${CONNECTOR}`);
      const counted = Number(await page.getAttribute(`#held-back-${CONNECTOR}`, "data-count"));
      expect(counted >= 1, `the overview's "sends held back" for ${CONNECTOR} (${counted})`);

      // Once granted and done: how long it waited, and why.
      await configure({ delayMs: 20 });
      await waitAllDone(ids);
      await openExecution(page, waiting);
      await page.waitForSelector("#permit-wait-charge[data-waiting=false]");
      const after = (await page.textContent("#permit-line-charge")).trim();
      expect(after.startsWith("waited ") && after.includes(`for ${CONNECTOR}`), `the line once granted (${after})`);
      expectEqual(await page.$("#connector-state-charge"), null, "no live state once the step no longer waits");
      expectEqual(errors, [], "console and page errors on the pages of this story");
      await page.context().close();
    } finally {
      await configure({ delayMs: 20, inject429: 0, retryAfterSeconds: 1 });
    }
  });

  await test("inspector: a 429 with Retry-After pauses the connector: a waiting step says so, its state until when", async () => {
    await configure({ delayMs: 20, inject429: 1, retryAfterSeconds: 12 });
    const ids = [];
    try {
      ids.push(await start("p0"));
      // The first charge meets the 429: the connector is paused for 12 s.
      await until(
        async () => {
          const { charge } = await chargeOf(ids[0]);
          return charge?.attempts?.some((a) => a.response?.status === 429) ? true : null;
        },
        20_000,
        "the first charge answered 429",
      );
      ids.push(await start("p1"));
      const reason = await until(
        async () => {
          const { charge } = await chargeOf(ids[1]);
          return charge?.permitWait?.grantedAt === null && charge.permitWait.reason.includes("paused by a 429")
            ? charge.permitWait.reason
            : null;
        },
        20_000,
        "the second charge waiting on the pause",
      );
      const page = await newPage("flow-pause");
      await openExecution(page, ids[1]);
      await page.waitForSelector("#permit-wait-charge[data-waiting=true]");
      const line = (await page.textContent("#permit-line-charge")).trim();
      expect(
        line.includes(`waiting for a permit of ${CONNECTOR}`) && line.includes("paused by a 429"),
        `the waiting reason (${line}; ${reason})`,
      );
      await page.waitForSelector("#connector-state-charge");
      const pausedUntil = (await page.textContent("#connector-state-charge-paused")).trim();
      expect(
        /UTC/.test(pausedUntil) && pausedUntil.includes("paused by a 429"),
        `the connector's state says until when, and why (${pausedUntil})`,
      );
      await page.context().close();
    } finally {
      await configure({ delayMs: 20, inject429: 0, retryAfterSeconds: 1 });
    }
    await waitAllDone(ids);
  });
}
