/**
 * The executions list with the filters of `GET /v1/executions` (workflow, status, since, until,
 * had duplicates, retried), newest first, live: the first page is re-read every few seconds while
 * the tab is visible. Filters live in the URL's hash so a filtered list can be linked. Above them,
 * one search box for a business id or a destination key (`#/executions?q=…`: ./execution-search.js).
 */
import { badge, clock, h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { showSearch } from "./execution-search.js";
import { triggerWordsOf } from "../lib/trigger.js";
import { pollWhileVisible } from "../lib/poll.js";

const REFRESH_MS = 3000;
/** Every status the list filter offers (`GET /v1/executions?status=`), the compensation's three too (docs/steps.md "Compensation"). */
const STATUSES = ["", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"];

/** The sum of the four "duplicates stopped" counters. */
export const stoppedTotal = (d) => (d ? d.triggers + d.redeliveries + d.fencedOut + d.destinationReplays : 0);

/** A datetime-local value, read as UTC (every time of the inspector is: lib/dom.js) → ISO with zone, which the API requires. */
const isoOf = (utc) => {
  const d = utc ? new Date(`${utc}Z`) : null;
  return d && !Number.isNaN(d.getTime()) ? d.toISOString() : "";
};
/** ISO → a datetime-local value in UTC. */
const localOf = (iso) => {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString().slice(0, 16);
};

export function showExecutions(main, params) {
  const q = params.get("q") ?? "";
  const searchBox = h(
    "form",
    { class: "search", role: "search", onsubmit: (e) => find(e) },
    h(
      "label",
      {},
      h("span", {}, "Business id or destination key"),
      h("input", { id: "search", name: "q", type: "search", value: q, placeholder: 'A-1001, charge-A-1001 or charge("A-1001")' }),
    ),
    h("button", { type: "submit", id: "search-submit" }, "Search"),
  );
  function find(e) {
    e.preventDefault();
    const text = String(new FormData(searchBox).get("q") ?? "").trim();
    location.hash = text ? `#/executions?${new URLSearchParams({ q: text })}` : "#/executions";
  }
  if (q.trim()) {
    // A search is a lookup, not a live list: read once.
    const results = h("section", { id: "search-results", "aria-live": "polite" });
    replace(
      main,
      h("section", {}, h("h1", {}, "Executions"), searchBox, h("p", {}, h("a", { href: "#/executions" }, "All executions")), results),
    );
    void showSearch(results, q.trim());
    return { leave() {} };
  }
  const filters = {
    workflowId: params.get("workflowId") ?? "",
    status: params.get("status") ?? "",
    since: params.get("since") ?? "",
    until: params.get("until") ?? "",
    hadDuplicates: params.get("hadDuplicates") === "true",
    retried: params.get("retried") === "true",
  };
  const query = (cursor) => {
    const q = new URLSearchParams();
    for (const [name, value] of Object.entries(filters)) if (value) q.set(name, String(value));
    q.set("limit", "50");
    if (cursor) q.set("cursor", cursor);
    return q.toString();
  };

  const form = h(
    "form",
    { class: "filters", onsubmit: (e) => apply(e) },
    field("Workflow", h("input", { name: "workflowId", value: filters.workflowId, placeholder: "any" })),
    field(
      "Status",
      h(
        "select",
        { name: "status" },
        STATUSES.map((st) => option(st, st || "any", filters.status === st)),
      ),
    ),
    field("Since (UTC)", h("input", { name: "since", type: "datetime-local", value: localOf(filters.since) })),
    field("Until (UTC)", h("input", { name: "until", type: "datetime-local", value: localOf(filters.until) })),
    h(
      "label",
      { class: "check" },
      h("input", { name: "hadDuplicates", type: "checkbox", checked: filters.hadDuplicates }),
      "stopped a duplicate",
    ),
    h("label", { class: "check" }, h("input", { name: "retried", type: "checkbox", checked: filters.retried }), "retried"),
    h("button", { type: "submit" }, "Filter"),
  );
  function apply(e) {
    e.preventDefault();
    const data = new FormData(form);
    const q = new URLSearchParams();
    if (data.get("workflowId")) q.set("workflowId", String(data.get("workflowId")).trim());
    if (data.get("status")) q.set("status", String(data.get("status")));
    if (data.get("since")) q.set("since", isoOf(String(data.get("since"))));
    if (data.get("until")) q.set("until", isoOf(String(data.get("until"))));
    if (data.get("hadDuplicates")) q.set("hadDuplicates", "true");
    if (data.get("retried")) q.set("retried", "true");
    location.hash = `#/executions?${q.toString()}`;
  }

  const status = h("p", { class: "muted", id: "list-status", "aria-live": "polite" }, "Loading…");
  const body = h("tbody", {});
  const more = h("button", { type: "button", hidden: true, onclick: () => void loadMore() }, "Older executions");
  replace(
    main,
    h(
      "section",
      {},
      h("h1", {}, "Executions"),
      searchBox,
      form,
      status,
      h(
        "table",
        { class: "grid", id: "executions" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Execution", "Workflow", "Status", "Trigger", "Created", "Duplicates stopped", "Max attempt"].map((t) => h("th", {}, t)),
          ),
        ),
        body,
      ),
      more,
    ),
  );

  let left = false;
  let nextCursor = null;
  /** Rows beyond the first page, kept across refreshes of the first one. */
  let older = [];
  let first = [];
  /** Each row's trigger in words, by execution id. */
  let triggers = new Map();
  const draw = () => {
    const items = [...first, ...older.filter((o) => !first.some((f) => f.executionId === o.executionId))];
    if (items.length === 0) replace(body, h("tr", {}, h("td", { colspan: 7 }, "No execution matches.")));
    else
      replace(
        body,
        items.map((e) => row(e, triggers.get(e.executionId))),
      );
    more.hidden = !nextCursor;
  };
  const refresh = async () => {
    try {
      const page = await api("GET", `/v1/executions?${query()}`);
      // The Trigger column's words need each webhook's pinned definition (read once per version: ../lib/trigger.js).
      triggers = await triggerWordsOf(page.items);
      if (left) return;
      first = page.items;
      if (older.length === 0) nextCursor = page.nextCursor;
      replace(status, `Updated ${clock()} · refreshes every ${REFRESH_MS / 1000} s`);
      draw();
    } catch (e) {
      if (!left) replace(status, h("span", { class: "error" }, `Could not load the executions: ${e.message}`));
    }
  };
  const loadMore = async () => {
    if (!nextCursor) return;
    const page = await api("GET", `/v1/executions?${query(nextCursor)}`);
    for (const [id, words] of await triggerWordsOf(page.items)) triggers.set(id, words);
    older = [...older, ...page.items];
    nextCursor = page.nextCursor;
    draw();
  };
  const polling = pollWhileVisible(refresh, REFRESH_MS);
  return {
    leave() {
      left = true;
      polling.stop();
    },
  };
}

function row(e, trigger) {
  const stopped = stoppedTotal(e.duplicatesStopped);
  return h(
    "tr",
    {},
    h("td", { class: "mono" }, h("a", { href: `#/executions/${encodeURIComponent(e.executionId)}` }, e.executionId)),
    h("td", {}, e.workflowId),
    h("td", {}, badge(e.status)),
    h("td", { class: "trigger", title: trigger?.title ?? null }, trigger?.text ?? e.trigger),
    h("td", {}, time(e.createdAt)),
    h("td", { class: stopped > 0 ? "num strong" : "num" }, String(stopped)),
    h("td", { class: "num" }, String(e.maxAttempt)),
  );
}

function field(label, input) {
  return h("label", {}, h("span", {}, label), input);
}

function option(value, text, selected) {
  return h("option", { value, selected }, text);
}
