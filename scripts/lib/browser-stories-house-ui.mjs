/**
 * The inspector's newcomer findings (issue 42 §4), each proven in the browser: one time zone for
 * every page, labelled (a browser whose own zone is not UTC shows UTC); the overview says the hourly
 * rollup is catching up only when an execution is missing from the chart; graph node labels fit
 * their box and edges carry their `when`; the Trigger column names an API trigger; the page of an
 * erased execution says what went, when, by what and what remains. Called by ./browser-stories.mjs
 * with its browser and helpers; every story is one `test(...)`.
 */
import { setTimeout as sleep } from "node:timers/promises";

/** An ISO time as the inspector shows it (public/ui/lib/dom.js `time`). */
const shown = (iso) => `${iso.slice(0, 10)} ${iso.slice(11, 23)} UTC`;

/** Every clock time in `text` (not inside an ISO string) followed by " UTC"? The ones that are not. */
function unlabelledTimes(text) {
  return [...text.matchAll(/(?<![T\d:.])(\d{1,2}:\d{2}:\d{2}(?:\.\d{3})?)(?![\d:Z])(.{0,4})/g)]
    .filter((m) => m[2] !== " UTC")
    .map((m) => `${m[1]}${m[2]}`);
}

export async function houseUiStories(ctx, { browser, watch, newPage, openExecution }) {
  const { test } = ctx;
  /** Each story's checks: every one is run, and the story fails with all that failed (a planted bug shows each it breaks). */
  let failed = [];
  const expect = (ok, message) => {
    if (!ok) failed.push(message);
  };
  const expectEqual = (actual, wanted, what) =>
    expect(JSON.stringify(actual) === JSON.stringify(wanted), `${what}: ${JSON.stringify(actual)}, wanted ${JSON.stringify(wanted)}`);
  const story = (name, body) =>
    test(name, async () => {
      failed = [];
      await body();
      if (failed.length > 0) throw new Error(`${failed.length} check(s) failed:\n        ${failed.join("\n        ")}`);
    });

  /** A signed-in page in a browser whose zone is Los Angeles (never UTC): the inspector must not follow it. */
  const pageInZone = async (tag) => {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, timezoneId: "America/Los_Angeles" });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    watch(page, tag);
    await page.goto(`${ctx.engineUrl}/ui/`);
    await page.fill("#token", ctx.token);
    await page.click("button[type=submit]");
    await page.waitForSelector("#executions");
    return page;
  };

  await story(
    "inspector (first hour): one time zone — every time on every page is UTC and says so, in a browser set to Los Angeles",
    async () => {
      const started = await ctx.trigger("order-fulfilment", { order: { id: `UI-TZ-${ctx.run}`, total: 7 } });
      const done = await ctx.waitForExecution(started.json.executionId);
      const trace = (await ctx.api("GET", `/v1/executions/${started.json.executionId}`)).json;
      const page = await pageInZone("time-zone");
      expectEqual(await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone), "America/Los_Angeles", "the browser's zone");
      expectEqual((await page.textContent("#time-zone"))?.trim(), "Times in UTC", "the header names the zone");

      await page.waitForSelector("#overview[data-loaded]");
      const overview = await page.textContent("#overview-status");
      expect(/Updated \d\d:\d\d:\d\d UTC;/.test(overview), `the overview's "Updated" time is UTC and says so (${overview})`);

      await openExecution(page, done.executionId);
      const header = await page.textContent(".exec-header");
      expect(header.includes(`Created${shown(trace.createdAt)}`), `the execution's Created is the API's time in UTC (${header})`);
      expect(header.includes(`Finished${shown(trace.finishedAt)}`), `its Finished too (${header})`);
      const onExecution = unlabelledTimes(await page.textContent("main"));
      expect(onExecution.length === 0, `times on the execution page without their zone: ${onExecution.join(", ")}`);

      await page.goto(`${ctx.engineUrl}/ui/#/executions`);
      await page.waitForSelector(`#executions a:has-text('${done.executionId}')`);
      await page.waitForSelector("#list-status:has-text('Updated')");
      const row = await page.textContent(`#executions tr:has(a:has-text('${done.executionId}'))`);
      expect(row.includes(shown(trace.createdAt)), `the list's Created is UTC (${row})`);
      const onList = unlabelledTimes(await page.textContent("main"));
      expect(onList.length === 0, `times on the list without their zone: ${onList.join(", ")}`);
      expect((await page.textContent("main")).includes("Since (UTC)"), "the list's date filters say their zone");

      await page.click("text=Workflows");
      await page.waitForSelector("#workflows tr:has-text('order-fulfilment')");
      const workflows = await page.textContent("#workflows tr:has-text('order-fulfilment')");
      expect(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC/.test(workflows), `the workflows' Updated is UTC (${workflows})`);
      expect(!/\b(AM|PM)\b/.test(await page.textContent("main")), "no browser-local AM/PM time on the workflows page");
      await page.context().close();
    },
  );

  await story(
    "inspector (first hour): the overview says the hourly rollup is catching up only when an execution is missing from the chart",
    async () => {
      // The answer as the rollup gives it on a fresh install a few ticks in: it started 7 days back and is
      // still far behind — with no execution in the hours between, so nothing is missing.
      const behind = (real) => {
        const hour = 3_600_000;
        const rolled = new Date(Math.floor(Date.now() / hour) * hour - 7 * 24 * hour + 6 * hour).toISOString();
        return { ...real, rolledUpUntil: rolled };
      };
      const open = async (tag, gapHasExecutions) => {
        const page = await newPage(tag);
        await page.route(/\/v1\/stats\/series\?/, async (route) => {
          const res = await route.fetch();
          await route.fulfill({ response: res, json: behind(await res.json()) });
        });
        if (gapHasExecutions) {
          // The gap's query (since the rollup's mark, until the live part): one execution there.
          await page.route(/\/v1\/executions\?.*until=/, (route) =>
            route.fulfill({
              status: 200,
              contentType: "application/json",
              body: JSON.stringify({ items: [{ executionId: "x" }], nextCursor: null }),
            }),
          );
        }
        await page.goto(`${ctx.engineUrl}/ui/#/overview?bucket=hour&range=24&workflowId=order-fulfilment`);
        await page.waitForSelector("#overview[data-workflow='order-fulfilment'][data-loaded] #overview-provenance");
        const text = await page.textContent("#overview-provenance");
        const missing = await page.getAttribute("#overview-provenance", "data-missing");
        await page.context().close();
        return { text, missing };
      };
      const fresh = await open("rollup-fresh", false);
      expectEqual(fresh.missing, "false", `nothing missing on a fresh install (${fresh.text})`);
      expect(!fresh.text.includes("catching up"), `no "catching up" when there is nothing to catch up (${fresh.text})`);
      expect(/Hours from .* UTC are counted live/.test(fresh.text), `it says what is counted live (${fresh.text})`);
      const behindWithData = await open("rollup-behind", true);
      expectEqual(behindWithData.missing, "true", "an execution in the hours between");
      expect(
        behindWithData.text.includes("The hourly rollup is catching up: it has reached"),
        `"catching up" when an execution is missing from the chart (${behindWithData.text})`,
      );
    },
  );

  await story(
    "inspector (first hour): graph labels fit their boxes, edges show their when, and the Trigger column names the API trigger",
    async () => {
      const refundId = `RF-FIT-${ctx.run}`;
      const started = await ctx.trigger("refund-approval", { refund: { id: refundId, amount: 5 } });
      const executionId = started.json.executionId;
      for (let i = 0; i < 100; i++) {
        const trace = (await ctx.api("GET", `/v1/executions/${executionId}`)).json;
        if (trace.steps?.find((s) => s.vertexId === "decision")?.parkedUntil) break;
        await sleep(100);
      }
      const page = await newPage("graph-fit");
      await openExecution(page, executionId);
      await page.waitForSelector("g.node[data-vertex=decision]");
      const nodes = await page.$$eval("g.node", (gs) =>
        gs.map((g) => {
          const width = Number(g.querySelector("rect").getAttribute("width"));
          const texts = [...g.querySelectorAll("text")].map((t) => ({
            text: t.textContent,
            right: Number(t.getAttribute("x")) + t.getComputedTextLength(),
          }));
          return { vertex: g.getAttribute("data-vertex"), width, texts, title: g.querySelector("title")?.textContent };
        }),
      );
      const overflowing = nodes.flatMap((n) => n.texts.filter((t) => t.right > n.width - 4).map((t) => `${n.vertex}: "${t.text}"`));
      expect(overflowing.length === 0, `node labels overflow their box: ${overflowing.join("; ")}`);
      const decision = nodes.find((n) => n.vertex === "decision");
      expect(
        decision.texts.some((t) => t.text.startsWith("wait_for_event · ")),
        `the wait's node names its type and state (${JSON.stringify(decision.texts)})`,
      );
      // Every conditional edge carries its `when`: fitted within the gap, whole in its title.
      const edges = await page.$$eval("g.edge-group", (gs) =>
        gs.map((g) => {
          const line = g.querySelector("line");
          const label = g.querySelector("text");
          return {
            from: g.getAttribute("data-from"),
            to: g.getAttribute("data-to"),
            text: label.textContent,
            title: g.querySelector("title").textContent,
            width: label.getComputedTextLength(),
            gap: Number(line.getAttribute("x2")) - Number(line.getAttribute("x1")),
          };
        }),
      );
      const conditions = {
        refund: "steps.decision.data.decision = 'approve'",
        decline: "steps.decision.data.decision = 'reject'",
        escalate: "steps.decision = null",
      };
      expectEqual(
        edges.map((e) => `${e.from}→${e.to}`).sort(),
        ["decision→decline", "decision→escalate", "decision→refund"],
        "the labelled edges",
      );
      for (const e of edges) {
        const condition = conditions[e.to];
        expect(e.title.endsWith(`when ${condition}`), `the edge's title holds its whole condition (${e.title})`);
        expect(condition.startsWith(e.text.replace(/…$/, "")), `the label is the condition, or its start cut with … (${e.text})`);
        expect(e.width <= e.gap, `the label fits between the columns (${e.width} > ${e.gap})`);
      }
      // The trigger was POST /v1/workflows/{id}/trigger: an API trigger, not "webhook".
      expectEqual(await page.textContent("#fact-trigger"), "API trigger", "the execution's Trigger");
      await page.goto(`${ctx.engineUrl}/ui/#/executions?workflowId=refund-approval`);
      await page.waitForSelector(`#executions tr:has(a:has-text('${executionId}')) td.trigger`);
      expectEqual(
        await page.textContent(`#executions tr:has(a:has-text('${executionId}')) td.trigger`),
        "API trigger",
        "the list's Trigger column",
      );
      await page.context().close();
      // Leave nothing waiting: reject it.
      const decided = await ctx.api("POST", "/v1/events", {
        body: { name: "refund.decided", match: refundId, id: `fit-${ctx.run}`, data: { decision: "reject" } },
      });
      expect(decided.status < 300, `the decision event (${decided.status})`);
    },
  );

  await story("inspector (first hour): an erased execution's page says what was erased, when, by what, and what remains", async () => {
    const started = await ctx.trigger("hello-transform", { name: `erased-${ctx.run}` });
    const done = await ctx.waitForExecution(started.json.executionId);
    const trace = (await ctx.api("GET", `/v1/executions/${done.executionId}`)).json;
    const erased = await ctx.api("DELETE", `/v1/executions/${done.executionId}`, { headers: { "idempotency-key": `ui-erase-${ctx.run}` } });
    expectEqual(erased.status, 200, `DELETE (${erased.text.slice(0, 200)})`);
    const problem = (await ctx.api("GET", `/v1/executions/${done.executionId}`)).json;
    expectEqual([problem.code, problem.tombstone?.workflowId], ["execution-not-retained", "hello-transform"], "the API's answer");

    const page = await newPage("erased", { expected: 404 });
    await page.goto(`${ctx.engineUrl}/ui/#/executions/${done.executionId}`);
    await page.waitForSelector("#removed-execution[data-reason=erased]");
    const how = await page.textContent("#removed-how");
    expect(
      how.includes(`Erased on request on ${shown(problem.removedAt)}`) && how.includes(`DELETE /v1/executions/${done.executionId}`),
      `what erased it, and when (${how})`,
    );
    const what = await page.textContent("#removed-what");
    expect(what.includes("trigger payload") && what.includes("archived trace"), `what was erased (${what})`);
    const tombstone = await page.textContent("#removed-tombstone");
    for (const fact of ["hello-transform", "COMPLETED", shown(trace.createdAt), shown(trace.finishedAt), "erased on request"]) {
      expect(tombstone.includes(fact), `the tombstone's facts hold ${fact} (${tombstone})`);
    }
    expect((await page.textContent("#removed-docs")).includes("docs/history-archive.md"), "the docs to read");
    await page.context().close();
  });
}
