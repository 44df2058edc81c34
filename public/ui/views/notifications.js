/**
 * The workspace's notifications (docs/notifications.md): its setting — where failures are POSTed
 * and which events — from `GET /v1/notifications`, and the deliveries on record from
 * `GET /v1/notifications/deliveries`, newest first: the event, the execution it tells of (a link),
 * the `webhook-id` (the same on every attempt: the receiver deduplicates on it), attempts, status
 * (pending, delivered, failed) and the last answer or error. The secret is never shown, not even
 * its name: the page says only that deliveries are signed. The first page is re-read every few
 * seconds while the tab is visible; "Older deliveries" pages on with `before` (the route's
 * `nextBefore`). `#/notifications?limit=N` reads N a page (default 50).
 */
import { badge, clock, h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { pollWhileVisible } from "../lib/poll.js";

const REFRESH_MS = 3000;
/** Deliveries a page reads: 50, or the hash's `limit` (1–100: the route's bounds). */
const PAGE = 50;
const pageSize = (params) => {
  const n = Number(params?.get("limit"));
  return Number.isInteger(n) && n >= 1 && n <= 100 ? n : PAGE;
};
/** The characters of the last answer shown in its cell (the whole answer on record, 500 at most, is its title). */
const ANSWER_CHARS = 48;
const COLUMNS = ["Event", "Execution", "webhook-id", "Attempts", "Status", "Last answer or error", "Created", "Next attempt"];

/** An execution id (64 hex) cut to its first 12 characters; the whole id is in the cell's title. */
const short = (id) => (id.length > 16 ? `${id.slice(0, 12)}…` : id);

/** The last answer in words: its HTTP status and the start of its body (cut), or why nothing came back. */
function lastAnswer(d) {
  if (d.lastStatus === null && d.lastAnswer === null) return d.attempts === 0 ? "not sent yet" : "no answer";
  const status = d.lastStatus === null ? "no answer" : `HTTP ${d.lastStatus}`;
  if (!d.lastAnswer) return status;
  const text = d.executionId ? d.lastAnswer.replaceAll(d.executionId, short(d.executionId)) : d.lastAnswer;
  return `${status}: ${text.length > ANSWER_CHARS ? `${text.slice(0, ANSWER_CHARS)}…` : text}`;
}

function settingFacts(setting) {
  return [
    ["URL", h("span", { class: "mono", id: "notify-url" }, setting.url)],
    ["Events", h("span", { class: "mono", id: "notify-events" }, setting.events.join(", "))],
    ["Stuck after", setting.stuckAfterSeconds === null ? "—" : `${setting.stuckAfterSeconds} s`],
    ["Signed", "Standard Webhooks, with a workspace secret (never shown here)"],
    ["Updated", time(setting.updatedAt)],
  ];
}

function deliveryRow(d) {
  return h(
    "tr",
    { "data-delivery": d.id, "data-status": d.status, "data-event": d.event },
    h("td", { class: "mono" }, d.event),
    h(
      "td",
      { class: "mono" },
      d.executionId
        ? h("a", { href: `#/executions/${encodeURIComponent(d.executionId)}`, title: d.executionId }, short(d.executionId))
        : "—",
    ),
    h(
      "td",
      { class: "mono", "data-field": "webhookId", "data-value": d.webhookId, title: d.webhookId },
      d.executionId ? d.webhookId.replace(d.executionId, short(d.executionId)) : d.webhookId,
    ),
    h("td", { class: "num", "data-field": "attempts" }, String(d.attempts)),
    h("td", { "data-field": "status" }, badge(d.status)),
    h("td", { "data-field": "lastAnswer", class: d.status === "failed" ? "error" : null, title: d.lastAnswer }, lastAnswer(d)),
    h("td", {}, time(d.createdAt)),
    h("td", {}, d.status === "pending" ? time(d.nextAttemptAt) : d.deliveredAt ? `delivered ${time(d.deliveredAt)}` : "—"),
  );
}

export function showNotifications(main, params) {
  const limit = pageSize(params);
  const setting = h("dl", { class: "facts", id: "notify-setting" }, h("dd", {}, "Loading…"));
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: COLUMNS.length }, "Loading…")));
  const status = h("p", { class: "muted", id: "deliveries-status", "aria-live": "polite" });
  const more = h("button", { type: "button", id: "deliveries-more", hidden: true, onclick: () => void loadOlder() }, "Older deliveries");
  replace(
    main,
    h(
      "section",
      { id: "notifications" },
      h("h1", {}, "Notifications"),
      h(
        "p",
        { class: "help" },
        "When an execution fails for good, its compensation fails, the retention guard refuses a key or a step waits too long, " +
          "idemflow POSTs a signed notification to this URL — at least once, with back-off, never holding the execution up. " +
          "Every attempt of one notification carries the same webhook-id, so the receiver counts it once.",
      ),
      h("h2", {}, "Setting"),
      setting,
      h("h2", {}, "Deliveries"),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "grid", id: "deliveries" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              COLUMNS.map((t) => h("th", {}, t)),
            ),
          ),
          body,
        ),
      ),
      more,
      status,
    ),
  );

  let left = false;
  /** Every delivery read so far by id: the first page re-read, older pages kept as loaded. */
  const seen = new Map();
  let olderCursor = null; // `nextBefore` of the oldest page loaded
  let olderLoaded = false;

  const draw = () => {
    const rows = [...seen.values()].sort((a, b) => b.id - a.id);
    if (rows.length === 0) {
      replace(body, h("tr", {}, h("td", { colspan: COLUMNS.length }, "No deliveries on record.")));
    } else replace(body, rows.map(deliveryRow));
    more.hidden = !olderCursor;
  };

  const refresh = async () => {
    try {
      const [conf, page] = await Promise.all([
        api("GET", "/v1/notifications").catch((e) => (e.status === 404 ? null : Promise.reject(e))),
        api("GET", `/v1/notifications/deliveries?limit=${limit}`),
      ]);
      if (left) return;
      if (conf === null) {
        replace(
          setting,
          h("dt", {}, "Not set"),
          h("dd", { id: "notify-none" }, "No notification setting: PUT /v1/notifications (docs/notifications.md)."),
        );
      } else replace(setting, ...settingFacts(conf).map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
      for (const d of page.items) seen.set(d.id, d);
      if (!olderLoaded) olderCursor = page.nextBefore;
      draw();
      replace(status, `Updated ${clock()}; the newest ${limit} re-read every ${REFRESH_MS / 1000} s.`);
    } catch (e) {
      if (!left) replace(body, h("tr", {}, h("td", { colspan: COLUMNS.length, class: "error" }, `Could not load: ${e.message}`)));
    }
  };

  const loadOlder = async () => {
    if (!olderCursor) return;
    more.disabled = true;
    try {
      const page = await api("GET", `/v1/notifications/deliveries?limit=${limit}&before=${encodeURIComponent(olderCursor)}`);
      if (left) return;
      for (const d of page.items) seen.set(d.id, d);
      olderLoaded = true;
      olderCursor = page.nextBefore;
      draw();
    } catch (e) {
      if (!left) replace(status, `Could not load older deliveries: ${e.message}`);
    } finally {
      more.disabled = false;
    }
  };

  const poll = pollWhileVisible(refresh, REFRESH_MS);
  return {
    leave() {
      left = true;
      poll.stop();
    },
  };
}
