/**
 * The inspector (/ui) in a real browser: Debian's Chromium driven by playwright-core, against the
 * e2e's two Workers (real engine, real demo destinations, real local D1). Called by scripts/e2e.mjs
 * with its helpers; every story is one `test(...)` of the e2e run.
 *
 * What is proven here, as a user would see it: sign-in keeps the token out of every URL; a
 * duplicate trigger is counted in the strip and its record opens; the lost-response story shows
 * attempt 2 with the same key and the key check passes; cancel and retry from the page act once
 * under a double click; a wait for an event says what it waits for, and its Approve button (double
 * clicked) sends one event that resumes it once, and a decision whose answer was lost is resent with the
 * same key and event id; a payload holding markup renders as text; an archived trace renders
 * read-only (a banner, no action controls); another workspace's execution is
 * a 404 on the page as in the API; Tab reaches every action; no console error (a CSP violation is
 * one); the token never reaches the engine's log. An execution of 200 steps and 1,000 events is
 * rendered and its render time printed (measured, not asserted). One search box finds an order's
 * execution by its id and by its keys (as sent, and `$idempotencyKey`'s from its prefix and the
 * order id), with the keys sent and the duplicates stopped. Sign-in opens the overview, whose
 * chart holds the duplicates the run stopped (per workflow, per hour or day). `--screenshots` writes
 * docs/img/inspector-*.png for the README.
 */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { houseUiStories } from "./browser-stories-house-ui.mjs";
import { mapStories } from "./browser-stories-map.mjs";
import { compensationStories } from "./browser-stories-compensation.mjs";
import { flowStories } from "./browser-stories-flow.mjs";
import { notificationStories } from "./browser-stories-notifications.mjs";
import { orderWorkflow } from "./order-workflow.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export async function browserStories(ctx) {
  const { test, log, expect, expectEqual } = ctx;
  if (!existsSync(CHROMIUM)) {
    await test("the inspector in a real browser", async () => {
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does it)`);
    });
    return;
  }
  const { chromium } = await import("playwright-core");
  let browser;
  try {
    browser = await launch(chromium);
  } catch (error) {
    await test("the inspector in a real browser", async () => {
      throw new Error(`${CHROMIUM} did not start: ${error.message}`);
    });
    return;
  }
  const problems = [];
  /**
   * `expected`: the refusals a story provokes on purpose (a wrong token, another workspace: a status) or a network failure it
   * makes (a message's start) — the browser logs those as errors.
   */
  const watch = (page, tag, expected) => {
    const allowed =
      typeof expected === "number" ? `Failed to load resource: the server responded with a status of ${expected}` : (expected ?? null);
    page.on("console", (m) => {
      if (m.type() !== "error") return;
      if (allowed && m.text().startsWith(allowed)) return;
      problems.push(`${tag}: console error: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`${tag}: page error: ${e.message}`));
    page.on("request", (r) => {
      if (r.url().includes(ctx.token)) problems.push(`${tag}: the token is in a URL: ${r.url()}`);
    });
  };
  const newPage = async (tag, { token = ctx.token, width = 1360, height = 900, expected } = {}) => {
    const context = await browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    watch(page, tag, expected);
    if (token) {
      await page.goto(`${ctx.engineUrl}/ui/`);
      await page.fill("#token", token);
      await page.click("button[type=submit]");
      await page.waitForSelector("#executions");
    }
    return page;
  };
  const openExecution = async (page, executionId) => {
    await page.goto(`${ctx.engineUrl}/ui/#/executions/${executionId}`);
    await page.waitForSelector(`article.execution`);
  };
  /** Press Tab until the element `id` has the focus (the keyboard reaches it), then Enter. */
  const tabTo = async (page, id, presses = 80) => {
    for (let i = 0; i < presses; i++) {
      await page.keyboard.press("Tab");
      if ((await page.evaluate(() => document.activeElement?.id)) === id) return page.keyboard.press("Enter");
    }
    throw new Error(`Tab never reached #${id} in ${presses} presses`);
  };
  const logStart = ctx.engineLog().length;

  try {
    await test("inspector: sign in keeps the token in the tab only (not in the URL), a wrong token is told", async () => {
      const page = await newPage("signin", { token: null, expected: 401 });
      const shell = await page.goto(`${ctx.engineUrl}/ui`);
      expectEqual(shell.status(), 200, "GET /ui (after the redirect to /ui/)");
      const csp = shell.headers()["content-security-policy"] ?? "";
      expect(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `a strict CSP on the page (${csp})`);
      // Only /ui/… serves the page: the API, the hooks and unknown paths answer as the Worker does.
      for (const path of ["/", "/v1/nope", "/hooks/dev/nope", "/nope", "/ui/nope.js", "/_headers"]) {
        const res = await fetch(`${ctx.engineUrl}${path}`, { method: path.startsWith("/hooks") ? "POST" : "GET" });
        const type = res.headers.get("content-type") ?? "";
        expect(type.startsWith("application/problem+json"), `${path} answers ${res.status} ${type}, not the page`);
      }
      await page.fill("#token", "not-a-token");
      await page.click("button[type=submit]");
      await page.waitForSelector(".signin .error:has-text('401')");
      await page.fill("#token", ctx.token);
      await page.click("button[type=submit]");
      await page.waitForSelector("#executions tbody tr");
      expect(!page.url().includes(ctx.token), `the token is not in the URL (${page.url()})`);
      expectEqual(await page.evaluate(() => sessionStorage.getItem("idemflow.token")), ctx.token, "the token in session storage");
      await page.click("text=Workflows");
      await page.waitForSelector("#workflows td a:has-text('order-fulfilment')");
      const row = await page.textContent("#workflows tr:has-text('order-fulfilment')");
      expect(row.includes("fields: order.id"), `the entry point's identity kind is shown (${row})`);
      await page.context().close();
    });

    await test("inspector: a duplicate trigger is counted in the strip, and its record opens", async () => {
      const payload = { order: { id: `UI-D-${ctx.run}`, total: 12 } };
      const first = await ctx.trigger("order-fulfilment", payload);
      const second = await ctx.trigger("order-fulfilment", payload);
      expectEqual(second.json?.deduplicated, true, "the second trigger is a duplicate");
      await ctx.waitForExecution(first.json.executionId);
      const page = await newPage("duplicate");
      await openExecution(page, first.json.executionId);
      expectEqual(await page.getAttribute("#counter-triggers", "data-count"), "1", "the strip's duplicate-trigger counter");
      const header = await page.textContent(".exec-header");
      const at = (label) =>
        Date.parse((new RegExp(`${label}(\\d{4}-\\d\\d-\\d\\d) (\\d\\d:\\d\\d:\\d\\d\\.\\d{3})`).exec(header) ?? []).slice(1).join("T"));
      expectEqual(at("Dedupe window ends") - at("Created"), 24 * 3_600_000, `the window's end, 24 h after the claim (${header})`);
      await page.click("#counter-triggers");
      const panel = await page.textContent("#strip-panel");
      expect(/#1 .*order_fulfilment|#1 .*trigger/.test(panel) || panel.includes("#1"), `the panel lists the duplicate (${panel})`);
      // The list shows it too, with the "stopped a duplicate" filter.
      await page.goto(`${ctx.engineUrl}/ui/#/executions?hadDuplicates=true`);
      await page.waitForSelector(`#executions a:has-text('${first.json.executionId}')`);
      await page.context().close();
    });

    await test("inspector: the lost response shows attempt 2 with the same key, the key check passes, the replay counted", async () => {
      const orderId = `UI-L-${ctx.run}`;
      await ctx.arm("/payments/charges", 1);
      const started = await ctx.trigger("order-fulfilment", { order: { id: orderId, total: 31 } });
      const done = await ctx.waitForExecution(started.json.executionId, 60_000);
      expectEqual(done.status, "COMPLETED", "the execution");
      const page = await newPage("lost-response");
      await openExecution(page, started.json.executionId);
      const rows = await page.$$eval("#timeline tbody tr[data-vertex=charge]", (trs) =>
        trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim())),
      );
      expect(rows.length >= 2, `two attempts of the charge on the timeline (${JSON.stringify(rows)})`);
      expectEqual(rows[1][1], "2", "the second row is attempt 2");
      expectEqual(rows[0][4], `charge-${orderId}`, "attempt 1's key");
      expectEqual(rows[1][4], `charge-${orderId}`, "attempt 2's key");
      expectEqual(await page.getAttribute("#key-charge [data-check]", "data-check"), "pass", "the key panel's check");
      expectEqual(await page.getAttribute("#counter-destinationReplays", "data-count"), "1", "destination replays in the strip");
      if (ctx.screenshots) await shoot(page, "inspector-execution.png", { fullPage: true });
      await page.context().close();
    });

    await test("inspector: cancel from the page (double-clicked) sends one request, and the page shows it live", async () => {
      const orderId = `UI-C-${ctx.run}`;
      await ctx.arm("/payments/charges", 6);
      const started = await ctx.trigger("order-fulfilment", { order: { id: orderId, total: 8 } });
      const page = await newPage("cancel");
      await openExecution(page, started.json.executionId);
      const posts = [];
      page.on("request", (r) => {
        if (r.method() === "POST") posts.push({ url: r.url(), key: r.headers()["idempotency-key"] });
      });
      await page.waitForSelector("#action-cancel");
      await tabTo(page, "action-cancel");
      await page.waitForSelector("#cancel-dialog[open]");
      const explained = await page.textContent("#cancel-dialog");
      expect(explained.includes("Nothing that already happened is undone"), `the dialog says what it does to side effects (${explained})`);
      await page.dblclick("#cancel-confirm");
      await page.waitForSelector("article.execution[data-status=CANCELLED]", { timeout: 15_000 });
      await ctx.disarm();
      const cancels = posts.filter((p) => p.url.endsWith("/cancel"));
      expectEqual(cancels.length, 1, `POST /cancel requests from a double click (${JSON.stringify(cancels)})`);
      expect(/^ui-cancel-[0-9a-f-]{36}$/.test(cancels[0].key ?? ""), `a browser-generated Idempotency-Key (${cancels[0].key})`);
      const trace = (await ctx.api("GET", `/v1/executions/${started.json.executionId}`)).json;
      expectEqual(trace.status, "CANCELLED", "the execution, read from the API");
      await page.context().close();
    });

    await test("inspector: retry a failed step from the page (double-clicked): one retry, one charge", async () => {
      const workflowId = `ui-retry-${ctx.run}`;
      const secret = `UI_PAY_${ctx.run.toUpperCase()}`;
      expectEqual(
        (await ctx.api("PUT", `/v1/secrets/${secret}`, { body: { value: "Basic not-a-bearer-key" } })).status < 300,
        true,
        "PUT a wrong secret",
      );
      const put = await ctx.api("PUT", `/v1/workflows/${workflowId}`, {
        body: orderWorkflow({
          id: workflowId,
          gateway: {
            method: "POST",
            url: `${ctx.demoUrl}/payments/charges`,
            headers: { Authorization: `{{ secrets.${secret} }}` },
            idempotencyKey: { value: "= 'ui-retry-' & payload.order.id" },
            body: { order: "= payload.order.id", amount: "= payload.order.total" },
          },
        }),
      });
      expectEqual(put.status, 201, `PUT the workflow (${put.text.slice(0, 300)})`);
      const orderId = `UI-R-${ctx.run}`;
      const started = await ctx.trigger(workflowId, { order: { id: orderId, total: 5 } });
      const failed = await ctx.waitForExecution(started.json.executionId);
      expectEqual(failed.status, "FAILED", "the execution with the wrong key");
      expectEqual(
        (await ctx.api("PUT", `/v1/secrets/${secret}`, { body: { value: `Bearer ${ctx.paymentsKey}` } })).status < 300,
        true,
        "PUT the right one",
      );

      const page = await newPage("retry");
      await openExecution(page, started.json.executionId);
      const posts = [];
      page.on("request", (r) => {
        if (r.method() === "POST") posts.push(r.url());
      });
      await tabTo(page, "action-retry-charge");
      await page.waitForSelector("#retry-charge-dialog[open]");
      const explained = await page.textContent("#retry-charge-dialog");
      expect(explained.includes("ui-retry-UI-R-"), `the dialog names the key the retry re-sends (${explained})`);
      await page.dblclick("#retry-charge-confirm");
      await page.waitForSelector("article.execution[data-status=COMPLETED]", { timeout: 30_000 });
      expectEqual(posts.filter((u) => u.endsWith("/retry")).length, 1, "POST /retry requests from a double click");
      expectEqual((await ctx.demoGet(`/payments/charges?order=${orderId}`)).items.length, 1, "charges for the order");
      await page.context().close();
    });

    await test("inspector: a payload holding markup renders as text; nothing of it runs", async () => {
      const name = `<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> ${ctx.run}`;
      const started = await ctx.trigger("hello-transform", { name });
      await ctx.waitForExecution(started.json.executionId);
      const page = await newPage("xss");
      await openExecution(page, started.json.executionId);
      await page.click("#raw summary");
      const raw = await page.textContent("#raw pre");
      expect(raw.includes("<script>window.__xss = 1</script>"), "the payload's markup is shown as text");
      expectEqual(await page.evaluate(() => window.__xss ?? null), null, "window.__xss (set only if the markup ran)");
      expectEqual(await page.$$eval("main script, main img", (els) => els.length), 0, "script or img elements made from the payload");
      await page.context().close();
    });

    await test("inspector: a sleeping DELAY says when it wakes, and its attempt shows it parked", async () => {
      const started = await ctx.trigger("review-after-shipping", { order: { id: `review-${ctx.run}` } });
      // The DELAY claims and parks within moments of the trigger; it sleeps 20 s (workflows/review-after-shipping.json).
      let trace;
      for (let i = 0; i < 50; i++) {
        trace = (await ctx.api("GET", `/v1/executions/${started.json.executionId}`)).json;
        if (trace.steps?.find((s) => s.vertexId === "wait")?.parkedUntil) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const wait = trace.steps.find((s) => s.vertexId === "wait");
      expect(wait?.parkedUntil, "the trace names when the DELAY wakes (parkedUntil)");
      const page = await newPage("delay");
      await openExecution(page, started.json.executionId);
      expect((await page.textContent("#parked-wait"))?.startsWith("sleeping until"), "the step says it sleeps until its wake time");
      expect((await page.textContent("#timeline")).includes("parked until"), "the timeline shows the attempt parked");
      await page.context().close();
    });

    await test("inspector: a wait says what it waits for; Approve (double-clicked) sends one event and resumes it once", async () => {
      // workflows/refund-approval.json: WAIT_FOR_EVENT `refund.decided` matched on the refund id, decisions approve / reject.
      const refundId = `RF-${ctx.run}`;
      const started = await ctx.trigger("refund-approval", { refund: { id: refundId, amount: 25 } });
      const executionId = started.json.executionId;
      let trace;
      for (let i = 0; i < 100; i++) {
        trace = (await ctx.api("GET", `/v1/executions/${executionId}`)).json;
        if (trace.steps?.find((s) => s.vertexId === "decision")?.parkedUntil) break;
        await sleep(100);
      }
      const waiting = trace.steps.find((s) => s.vertexId === "decision");
      expect(waiting?.parkedUntil, `the wait parks (${JSON.stringify(waiting)})`);
      expectEqual(
        [waiting.wait?.event, waiting.wait?.match, waiting.wait?.decisions],
        ["refund.decided", refundId, ["approve", "reject"]],
        "the trace's wait",
      );

      const page = await newPage("decision");
      const posts = [];
      page.on("request", (r) => {
        if (r.method() === "POST") posts.push({ url: r.url(), key: r.headers()["idempotency-key"], body: r.postDataJSON() });
      });
      await openExecution(page, executionId);
      const tag = await page.textContent("#parked-decision");
      expect(
        tag.startsWith(`waiting for refund.decided with match ${refundId}, timeout at `),
        `the step says what it waits for and until when (${tag})`,
      );
      expectEqual(await page.textContent("#decide-decision-approve"), "Approve", "the approve button");
      expectEqual(await page.textContent("#decide-decision-reject"), "Reject", "the reject button");
      await page.dblclick("#decide-decision-approve");
      await page.waitForSelector("#decision-decision[data-outcome]", { timeout: 15_000 });
      const said = await page.textContent("#decision-decision");
      expect(said.includes("resumed this execution"), `the answer is shown (${said})`);
      await page.waitForSelector("article.execution[data-status=COMPLETED]", { timeout: 30_000 });
      await page.waitForSelector("#wait-events-decision tr[data-state=taken]");

      const sent = posts.filter((p) => new URL(p.url).pathname === "/v1/events");
      expectEqual(sent.length, 1, `POST /v1/events requests from a double click (${JSON.stringify(sent)})`);
      const [event] = sent;
      expect(/^ui-decide-approve-[0-9a-f-]{36}$/.test(event.key ?? ""), `a browser-generated Idempotency-Key (${event.key})`);
      expect(/^inspector-[0-9a-f-]{36}$/.test(event.body?.id ?? ""), `a browser-generated event id (${event.body?.id})`);
      expectEqual(
        event.body,
        { name: "refund.decided", match: refundId, id: event.body.id, data: { decision: "approve" } },
        "the event the button sent",
      );
      const took = await page.textContent("#took-decision");
      expect(took.includes(event.body.id) && took.includes('"decision": "approve"'), `the step shows the event it took (${took})`);

      const done = (await ctx.api("GET", `/v1/executions/${executionId}`)).json;
      const stateOf = (id) => done.steps.find((s) => s.vertexId === id)?.state;
      expectEqual([stateOf("decision"), stateOf("refund"), stateOf("decline")], ["COMPLETED", "COMPLETED", "SKIPPED"], "the route taken");
      expectEqual(
        done.steps.find((s) => s.vertexId === "decision").wait.events.map((e) => [e.eventId, e.state, e.duplicates]),
        [[event.body.id, "taken", 0]],
        "the trace's events of the wait",
      );
      // The same event again (a sender's retry, without the key): deduplicated, counted on the event, nothing resumed twice.
      const again = await ctx.api("POST", "/v1/events", { body: event.body });
      expectEqual([again.status, again.json?.deduplicated], [200, true], "the same event again");
      await page.click("#action-refresh");
      await page.waitForSelector(`#wait-events-decision tr[data-state=taken] td:nth-child(4):text-is("1")`);
      const after = (await ctx.api("GET", `/v1/executions/${executionId}`)).json.steps.find((s) => s.vertexId === "decision");
      expectEqual(
        after.attempts.map((a) => a.outcome),
        ["slept", "completed"],
        "the wait's attempts: the one that parked, the one resumed by the event (once)",
      );
      await page.context().close();
    });

    await test("inspector: a decision whose answer was lost is sent again with the same key and event id: one event", async () => {
      const refundId = `RF-LOST-${ctx.run}`;
      const started = await ctx.trigger("refund-approval", { refund: { id: refundId, amount: 9 } });
      const executionId = started.json.executionId;
      for (let i = 0; i < 100; i++) {
        const trace = (await ctx.api("GET", `/v1/executions/${executionId}`)).json;
        if (trace.steps?.find((s) => s.vertexId === "decision")?.parkedUntil) break;
        await sleep(100);
      }
      const page = await newPage("decision-lost-answer", { expected: "Failed to load resource: net::ERR_CONNECTION_RESET" });
      const sent = [];
      // The first POST reaches the engine (the event is delivered), then its answer is lost on the way back.
      let lose = true;
      await page.route("**/v1/events", async (route) => {
        const request = route.request();
        sent.push({ key: request.headers()["idempotency-key"], body: request.postDataJSON() });
        if (!lose) return route.continue();
        lose = false;
        await route.fetch();
        await route.abort("connectionreset");
      });
      await openExecution(page, executionId);
      await page.click("#decide-decision-reject");
      await page.waitForSelector("#decision-decision[data-outcome]", { timeout: 15_000 });
      await page.waitForSelector("article.execution[data-status=COMPLETED]", { timeout: 30_000 });
      expectEqual(sent.length, 2, "POST /v1/events: the one whose answer was lost, and the automatic resend");
      expectEqual(sent[1].key, sent[0].key, "the resend's Idempotency-Key");
      expectEqual(sent[1].body, sent[0].body, "the resend's event (its id included)");
      const done = (await ctx.api("GET", `/v1/executions/${executionId}`)).json;
      const decision = done.steps.find((s) => s.vertexId === "decision");
      expectEqual(
        decision.wait.events.map((e) => [e.eventId, e.state]),
        [[sent[0].body.id, "taken"]],
        "one event on the wait, taken by it",
      );
      expectEqual(
        decision.attempts.map((a) => a.outcome),
        ["slept", "completed"],
        "the wait resumed once",
      );
      expectEqual(done.steps.find((s) => s.vertexId === "decline")?.state, "COMPLETED", "the reject route");
      await page.context().close();
    });

    await test("inspector: an archived trace renders read-only: a banner with its removal date, no action control", async () => {
      // The history sweep runs on the real clock (days of retention), so the trace is answered here as the
      // archive answers it (src/http/routes/executions.ts): the same JSON with `archived: true`, the date in a header.
      const started = await ctx.trigger("hello-transform", { name: `archived-${ctx.run}` });
      await ctx.waitForExecution(started.json.executionId);
      const trace = (await ctx.api("GET", `/v1/executions/${started.json.executionId}`)).json;
      const page = await newPage("archived");
      await page.route(`**/v1/executions/${started.json.executionId}`, (route) =>
        route.fulfill({
          status: 200,
          contentType: "application/json",
          headers: { "execution-removed-at": "2026-12-03T10:00:00.000Z" },
          body: JSON.stringify({ ...trace, archived: true }),
        }),
      );
      await openExecution(page, started.json.executionId);
      const banner = await page.textContent("#archived-banner");
      expect(/^archived: removed from the database on 2026-12-0\d .*; read-only$/.test(banner), `the banner (${banner})`);
      expectEqual(await page.getAttribute("article.execution", "data-archived"), "true", "the article's data-archived");
      const controls = await page.$$eval("#action-start-over, #action-cancel, [id^=action-retry-]", (els) => els.length);
      expectEqual(controls, 0, "retry, start over or cancel controls on an archived trace");
      await page.context().close();
    });

    await test("inspector: another workspace's execution is a 404 on the page, as in the API", async () => {
      const started = await ctx.trigger("hello-transform", { name: `other-${ctx.run}` });
      await ctx.waitForExecution(started.json.executionId);
      const page = await newPage("other-workspace", { token: ctx.otherToken, expected: 404 });
      const answers = [];
      page.on("response", (r) => {
        if (new URL(r.url()).pathname.startsWith("/v1/executions/")) answers.push(r.status());
      });
      await page.goto(`${ctx.engineUrl}/ui/#/executions/${started.json.executionId}`);
      await page.waitForSelector("main .error:has-text('404')");
      expect(answers.length > 0 && answers.every((s) => s === 404), `every /v1/executions answer is 404 (${answers})`);
      await page.context().close();
    });

    await test("inspector: Tab reaches every action, counter and graph node of an execution", async () => {
      const started = await ctx.trigger("order-fulfilment", { order: { id: `UI-K-${ctx.run}`, total: 3 } });
      await ctx.waitForExecution(started.json.executionId);
      const page = await newPage("keyboard");
      await openExecution(page, started.json.executionId);
      const wanted = [
        "action-start-over",
        "action-refresh",
        ...["triggers", "redeliveries", "fencedOut", "destinationReplays"].map((c) => `counter-${c}`),
      ];
      const reached = new Set();
      const nodes = new Set();
      for (let i = 0; i < 80; i++) {
        await page.keyboard.press("Tab");
        const at = await page.evaluate(() => ({
          id: document.activeElement?.id,
          vertex: document.activeElement?.getAttribute("data-vertex"),
        }));
        if (at.id) reached.add(at.id);
        if (at.vertex) nodes.add(at.vertex);
      }
      const missing = wanted.filter((id) => !reached.has(id));
      expect(missing.length === 0, `Tab did not reach ${missing.join(", ")} (reached ${[...reached].join(", ")})`);
      expect(
        ["received", "charge", "ship"].every((v) => nodes.has(v)),
        `Tab reaches every graph node (${[...nodes]})`,
      );
      // Enter on a node brings its step into view and selects it.
      await page.focus("g.node[data-vertex=charge]");
      await page.keyboard.press("Enter");
      await page.waitForSelector("#step-charge.selected");
      // The start-over dialog opens from the keyboard, and Escape closes it without acting.
      await page.focus("#action-start-over");
      await page.keyboard.press("Enter");
      await page.waitForSelector("#start-over-dialog[open]");
      await page.keyboard.press("Escape");
      await page.waitForSelector("#start-over-dialog", { state: "detached" });
      await page.context().close();
    });

    await test("inspector: 200 steps and 1,000 events render (time printed, not asserted)", async () => {
      const { executionId, steps } = await ctx.bigExecution();
      const page = await newPage("big");
      const t0 = Date.now();
      await openExecution(page, executionId);
      const shown = Date.now() - t0;
      const renderMs = await page.$eval("main", (m) => Number(m.dataset.renderMs));
      const rows = await page.$$eval("#timeline tbody tr", (trs) => trs.length);
      const events = await page.textContent("#events-title");
      expect(rows >= steps, `a timeline row per attempt (${rows})`);
      const t1 = Date.now();
      await page.click("#counter-fencedOut");
      await page.waitForSelector("#strip-panel");
      const reactMs = Date.now() - t1;
      log(`      ${steps} steps, ${events}: shown ${shown} ms after navigation (render ${renderMs} ms); a counter opened in ${reactMs} ms`);
      if (ctx.screenshots) {
        await page.goto(`${ctx.engineUrl}/ui/#/executions`);
        await page.waitForSelector("#executions tbody tr:nth-child(5)");
        await shoot(page, "inspector-executions.png");
      }
      await page.context().close();
    });

    await test("inspector: the overview, opened by sign-in, charts the duplicates the run stopped, per workflow, hour or day", async () => {
      // Sign-in lands on the overview (its latest executions are the #executions newPage waits for).
      const page = await newPage("overview");
      expect(/#\/overview|\/ui\/$/.test(page.url()), `sign-in opens the overview (${page.url()})`);
      await page.waitForSelector("#overview[data-loaded] #chart-duplicates");
      // The 50 concurrent triggers stopped 49 duplicates this hour: the series counts the current hour live.
      const triggers = Number(await page.getAttribute("#total-triggers", "data-count"));
      expect(triggers >= 49, `duplicate triggers on the overview: ${triggers}`);
      const bars = await page.$$eval("#chart-duplicates g.bar", (gs) => gs.map((g) => Number(g.getAttribute("data-total"))));
      expectEqual(bars.length, 24, "hourly bars over the last 24 hours");
      expect(Math.max(...bars) >= 49, `a bar holds them (${bars.join(",")})`);
      const label = (await page.getAttribute("#chart-duplicates", "aria-label")) ?? "";
      expect(label.includes(`${triggers} duplicate triggers`), `the chart says its numbers in words (${label})`);
      expect((await page.$("#total-duplicateEvents")) !== null, "duplicate events are a boundary of the workspace's overview");
      expect(Number(await page.getAttribute("#status-COMPLETED", "data-count")) > 0, "executions by status: some completed");
      // The table view holds the chart's numbers.
      await page.click("#overview-numbers summary");
      const tableTriggers = await page.$$eval("#overview-table tbody tr", (rows) =>
        rows.reduce((n, tr) => n + Number(tr.querySelector("td")?.textContent ?? 0), 0),
      );
      expectEqual(tableTriggers, triggers, "the table's duplicate triggers, summed");
      const series = await ctx.api("GET", "/v1/stats/series");
      expect(
        series.status === 200 && series.json.total.triggers >= triggers,
        `GET /v1/stats/series agrees (${series.json?.total?.triggers})`,
      );

      // One workflow: order-fulfilment stopped them; its view has no events (they are the workspace's).
      await page.selectOption("#overview-workflow", "order-fulfilment");
      await page.waitForSelector("#overview[data-workflow='order-fulfilment'][data-loaded]");
      expect(Number(await page.getAttribute("#total-triggers", "data-count")) >= 49, "order-fulfilment's duplicate triggers");
      expect((await page.$("#total-duplicateEvents")) === null, "no events boundary for one workflow");
      // Per day: the bars are days, the filter kept.
      await page.selectOption("#overview-bucket", "day");
      await page.waitForSelector("#overview[data-bucket='day'][data-workflow='order-fulfilment'][data-loaded]");
      expectEqual(await page.$$eval("#chart-duplicates g.bar", (gs) => gs.length), 7, "daily bars over the last 7 days");
      expect(Number(await page.getAttribute("#total-triggers", "data-count")) >= 49, "the day holds them too");
      expect(page.url().includes("bucket=day") && page.url().includes("workflowId=order-fulfilment"), `filters in the URL (${page.url()})`);
      if (ctx.screenshots) {
        await page.goto(`${ctx.engineUrl}/ui/#/overview`);
        await page.waitForSelector("#overview[data-bucket='hour'][data-workflow=''][data-loaded] #chart-duplicates");
        await shoot(page, "inspector-overview.png", { fullPage: true });
      }
      await page.context().close();
    });

    await test("inspector: one search box finds an order by its id and its keys, the keys sent and the duplicates stopped", async () => {
      const workflowId = `ui-search-${ctx.run}`;
      const gateway = (path, key) => ({
        method: "POST",
        url: `${ctx.demoUrl}${path}`,
        headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
        idempotencyKey: { value: key },
        body: { order: "= payload.order.id", amount: "= payload.order.total" },
      });
      const put = await ctx.api("PUT", `/v1/workflows/${workflowId}`, {
        body: {
          id: workflowId,
          vertices: [
            { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
            { id: "charge", type: "GATEWAY", config: gateway("/payments/charges", "= 'charge-' & payload.order.id") },
            { id: "ship", type: "GATEWAY", config: gateway("/shipping/labels", "= $idempotencyKey('ship', payload.order.id)") },
          ],
          edges: [
            { from: "received", to: "charge" },
            { from: "charge", to: "ship" },
          ],
        },
      });
      expectEqual(put.status, 201, `PUT the workflow (${put.text.slice(0, 300)})`);
      const orderId = `UI-S-${ctx.run}`;
      const started = await ctx.trigger(workflowId, { order: { id: orderId, total: 4 } });
      expectEqual((await ctx.trigger(workflowId, { order: { id: orderId, total: 4 } })).json?.deduplicated, true, "the duplicate");
      const id = started.json.executionId;
      await ctx.waitForExecution(id);
      const page = await newPage("search");
      await page.goto(`${ctx.engineUrl}/ui/#/executions`);
      /** Searches `text` and waits for its own answer (never the previous search's rows), found `by`. */
      const search = async (text, by) => {
        await page.fill("#search", text);
        await page.click("#search-submit");
        await page.waitForFunction((t) => document.querySelector("#search-results h2")?.textContent.includes(t), text);
        if (by) await page.waitForSelector(`#search-executions tr[data-execution='${id}']:has-text('${by}')`);
      };
      // The order id: the execution, its duplicate stopped, both keys it sent.
      await search(orderId, "business id");
      expect(page.url().includes(`q=${orderId}`), `the search is in the URL (${page.url()})`);
      expectEqual(await page.getAttribute("#search-stopped", "data-triggers"), "1", "the duplicate trigger stopped for the order");
      const keys = await page.$$eval("#search-keys tbody tr", (trs) => trs.map((tr) => tr.getAttribute("data-key")));
      expect(keys.includes(`charge-${orderId}`) && keys.some((k) => k.startsWith("ship-")), `the keys sent (${keys.join(", ")})`);
      // A key as sent, and the hashed key from its prefix and the order id.
      await search(`charge-${orderId}`, "destination key");
      await search(`ship("${orderId}")`, "key");
      expect(!(await page.textContent("#search-results")).includes("business id"), "the helper's form is a key search only");
      // Nothing for another order.
      await search(`UI-NONE-${ctx.run}`);
      await page.waitForSelector("#search-none");
      await page.context().close();
    });

    // Times in one zone, the rollup's catching up, graph labels, the Trigger column, an erased execution (issue 42 §4).
    await houseUiStories(ctx, { browser, watch, newPage, openExecution });

    // A MAP: its progress on the graph and beside its name, its items paged, each opening its attempts (issue 43).
    await mapStories(ctx, { newPage, openExecution });

    // A compensation: the refund drawn beside the charge it undoes, the statuses in list, filter and chart (issue 45).
    await compensationStories(ctx, { newPage, openExecution });

    // Flow control: a waiting step's reason, the connector's live state, the sends held back (issue 44).
    await flowStories(ctx, { newPage, openExecution });

    // Notifications: the setting (never its secret) and a failed order's delivery to the demo receiver (issue 45).
    await notificationStories(ctx, { newPage, openExecution });

    await test("inspector: no console error on any page, and the token never reached the engine's log", async () => {
      expect(problems.length === 0, problems.join("\n"));
      // wrangler's own table of the Worker's vars (printed again when `wrangler dev` reloads after a
      // source change) shows API_TOKENS, the local token list: that is wrangler's, not the engine's.
      const logged = ctx
        .engineLog()
        .slice(logStart)
        .filter((line) => !line.includes("Environment Variable"))
        .join("\n");
      expect(!logged.includes(ctx.token), "the engine's log holds the token");
    });
  } finally {
    await browser.close();
  }
}

async function shoot(page, name, options = {}) {
  const dir = join(import.meta.dirname, "..", "..", "docs", "img");
  await mkdir(dir, { recursive: true });
  await sleep(200);
  await page.screenshot({ path: join(dir, name), ...options });
}

/** Debian's Chromium, headless. */
function launch(chromium) {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root Chromium needs --no-sandbox; the others keep it from reaching for Google's hosts on a closed network.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
