/**
 * A MAP step on the execution page, from its trace's `map` (docs/steps.md "MAP", "The trace"):
 * one vertex with its progress ("37 / 100 done, 2 failed") — on the graph node and beside the
 * step's name — and a table of its items: index, state, attempts, key, duration, error (or, for an
 * item waiting for a limited connector's permit, the trace's line saying why). Each row
 * opens that item's attempts (request and response, redacted), its list element, its collected value
 * and its output. An item's duration runs from its first attempt's start (not from when the list was
 * persisted: waiting for a slot is not its work) to its settle.
 *
 * A MAP has up to 1,000 items, so the page never holds them all: the trace carries the first page
 * (100), and "Next items" reads the following page from
 * `GET /v1/executions/{id}/steps/{vertexId}/items?cursor=` (the cursor the previous page gave).
 * Only the page on screen is drawn. The state (the page shown, the cursors behind it, the items
 * opened) lives in the page's view, one entry per MAP step, so a live re-render of the trace keeps
 * it; the first page is the trace's own, so it updates live with the execution.
 */
import { badge, duration, h, json, time } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { problemText } from "./actions.js";

/** Item states, in the order the progress line names them. */
const IN_FLIGHT = ["pending", "dispatched", "executing"];

/** A number from the trace's counts (a missing one is 0). */
const count = (map, name) => (typeof map?.[name] === "number" ? map[name] : 0);

/** "37 / 100 done, 2 failed, 5 running, 56 waiting" — the parts that are not zero after "done". */
export function mapProgress(map) {
  if (!map) return null;
  const parts = [`${count(map, "completed")} / ${count(map, "total")} done`];
  if (count(map, "failed") > 0) parts.push(`${count(map, "failed")} failed`);
  if (count(map, "cancelled") > 0) parts.push(`${count(map, "cancelled")} cancelled`);
  const running = count(map, "dispatched") + count(map, "executing");
  if (running > 0) parts.push(`${running} running`);
  if (count(map, "pending") > 0) parts.push(`${count(map, "pending")} waiting`);
  return parts.join(", ");
}

/** The graph node's note for a MAP step: its progress in short ("37/100 done"). */
export function mapNote(step) {
  if (!step?.map) return null;
  const failed = count(step.map, "failed");
  return `${count(step.map, "completed")}/${count(step.map, "total")} done${failed > 0 ? `, ${failed} failed` : ""}`;
}

/** The tag beside the step's name. */
export function mapTag(step) {
  if (!step.map) return null;
  return h("span", { class: "tag map-progress", id: `map-progress-${step.vertexId}` }, mapProgress(step.map));
}

/** An item's duration: its first attempt's start to its settle (or to its last attempt's end). */
function itemDuration(item) {
  const attempts = Array.isArray(item.attempts) ? item.attempts : [];
  const start = attempts.map((a) => Date.parse(a.startedAt)).filter(Number.isFinite);
  const first = start.length > 0 ? Math.min(...start) : Date.parse(item.createdAt);
  const end = Date.parse(item.finishedAt ?? attempts.at(-1)?.finishedAt ?? "");
  return Number.isFinite(first) && Number.isFinite(end) ? Math.max(0, end - first) : null;
}

/**
 * The state of one MAP's panel in the view (`states`, a Map by vertex id): the page shown
 * (`page`: null for the trace's first page), the cursors of the pages before it, the items opened.
 */
function stateOf(states, vertexId) {
  let state = states.get(vertexId);
  if (!state) {
    state = { page: null, cursor: null, behind: [], loading: false, error: null, opened: new Set() };
    states.set(vertexId, state);
  }
  return state;
}

/**
 * The MAP's panel. `states`: the view's per-MAP state (kept across re-renders); `rerender()` draws
 * the page again after a page was read.
 */
export function mapPanel(step, { executionId, states, rerender }) {
  const map = step.map;
  if (!map) return null;
  const state = stateOf(states, step.vertexId);
  const firstPage = { items: Array.isArray(map.items) ? map.items : [], nextCursor: map.nextCursor ?? null };
  const page = state.page ?? firstPage;
  const id = step.vertexId;

  const read = async (cursor, behind) => {
    state.loading = true;
    state.error = null;
    rerender();
    try {
      const path =
        `/v1/executions/${encodeURIComponent(executionId)}/steps/${encodeURIComponent(id)}/items` +
        (cursor ? `?cursor=${encodeURIComponent(cursor)}` : "");
      const body = await api("GET", path);
      state.page = cursor === null ? null : { items: Array.isArray(body.items) ? body.items : [], nextCursor: body.nextCursor ?? null };
      state.cursor = cursor;
      state.behind = behind;
    } catch (e) {
      state.error = problemText(e);
    } finally {
      state.loading = false;
      rerender();
    }
  };
  const next = () => void read(page.nextCursor, [...state.behind, state.cursor]);
  const previous = () => {
    const behind = state.behind.slice(0, -1);
    const cursor = state.behind.at(-1) ?? null;
    // Back to the first page: the trace's own, which the live trace keeps current.
    if (cursor === null) {
      state.page = null;
      state.cursor = null;
      state.behind = [];
      rerender();
      return;
    }
    void read(cursor, behind);
  };
  const toggle = (index) => {
    if (state.opened.has(index)) state.opened.delete(index);
    else state.opened.add(index);
    rerender();
  };

  const first = page.items[0]?.index;
  const last = page.items.at(-1)?.index;
  const total = count(map, "total");
  const range = page.items.length > 0 ? `items ${first + 1}–${last + 1} of ${total}` : `no item yet of ${total}`;
  return h(
    "div",
    { class: "map-panel", id: `map-${id}`, "data-vertex": id, "data-total": total },
    h("p", { class: "map-summary", id: `map-summary-${id}` }, mapProgress(map)),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid map-items", id: `map-items-${id}`, "aria-label": `${id}: ${range}` },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Item", "State", "Attempts", "Key", "Duration", "Error"].map((t) => h("th", {}, t)),
          ),
        ),
        h(
          "tbody",
          {},
          page.items.map((item) => itemRows(id, item, state.opened.has(item.index), () => toggle(item.index))),
        ),
      ),
    ),
    h(
      "div",
      { class: "buttons map-pages" },
      h("span", { class: "muted", id: `map-range-${id}` }, range),
      state.behind.length > 0 || state.page !== null
        ? h("button", { type: "button", id: `map-previous-${id}`, disabled: state.loading, onclick: previous }, "Previous items")
        : null,
      page.nextCursor ? h("button", { type: "button", id: `map-next-${id}`, disabled: state.loading, onclick: next }, "Next items") : null,
      state.loading ? h("span", { class: "muted" }, "Loading…") : null,
    ),
    state.error ? h("p", { class: "error", role: "alert" }, state.error) : null,
  );
}

/** An item's row, and its attempts' row under it when opened. */
function itemRows(vertexId, item, open, onToggle) {
  const attempts = Array.isArray(item.attempts) ? item.attempts : [];
  const rowId = `map-item-${vertexId}-${item.index}`;
  const row = h(
    "tr",
    { class: `item item-${String(item.state).toLowerCase()}`, id: rowId, "data-index": item.index, "data-state": item.state },
    h(
      "td",
      { class: "num" },
      h(
        "button",
        {
          type: "button",
          class: "link",
          id: `${rowId}-open`,
          "aria-expanded": String(open),
          "aria-controls": `${rowId}-attempts`,
          onclick: onToggle,
        },
        `#${item.index}`,
      ),
    ),
    h("td", {}, badge(item.state)),
    h("td", { class: "num" }, String(item.attempt ?? attempts.length)),
    h("td", { class: "mono key" }, item.idempotencyKey ?? "—"),
    h("td", { class: "num" }, duration(itemDuration(item))),
    h(
      "td",
      { class: "err" },
      item.error ?? "",
      // An item through a limited connector waiting for a permit (docs/connectors.md "Limits"): the trace's line.
      item.permitWait && item.permitWait.grantedAt === null && !item.error
        ? h("span", { class: "muted", id: `${rowId}-permit-wait` }, item.permitWait.text)
        : null,
    ),
  );
  if (!open) return row;
  return [
    row,
    h(
      "tr",
      { class: "item-attempts", id: `${rowId}-attempts` },
      h(
        "td",
        { colspan: 6 },
        attempts.length === 0
          ? h("p", { class: "muted" }, IN_FLIGHT.includes(String(item.state).toLowerCase()) ? "No attempt yet." : "No attempt on record.")
          : attempts.map((a) =>
              h(
                "details",
                { id: `${rowId}-attempt-${a.epoch}`, open: attempts.length === 1 },
                h(
                  "summary",
                  {},
                  `Attempt ${a.attempt} · epoch ${a.epoch} · ${a.outcome} · key ${a.idempotencyKey ?? "—"} · ${time(a.startedAt)}` +
                    (a.error ? ` · ${a.error}` : ""),
                ),
                h("h4", {}, "Request"),
                h("pre", {}, json(a.request)),
                h("h4", {}, "Response"),
                h("pre", {}, json(a.response)),
              ),
            ),
        item.item !== undefined ? h("p", {}, "Item: ", h("code", { class: "mono" }, JSON.stringify(item.item))) : null,
        Array.isArray(item.events) && item.events.length > 0
          ? h(
              "ul",
              { class: "item-events" },
              item.events.map((e) => h("li", {}, `${time(e.at)} · ${e.type} · epoch ${e.epoch ?? "—"}${e.detail ? ` · ${e.detail}` : ""}`)),
            )
          : null,
        item.collected !== undefined && item.collected !== null
          ? h("p", {}, "Collected: ", h("code", { class: "mono" }, JSON.stringify(item.collected)))
          : null,
        item.output !== undefined && item.output !== null
          ? h("details", { id: `${rowId}-output` }, h("summary", {}, "Output"), h("pre", {}, json(item.output)))
          : null,
        item.outputOmitted
          ? h(
              "p",
              { class: "muted" },
              `Output: ${item.outputOmitted.bytes} bytes, over the trace's ${item.outputOmitted.limit}-byte bound.`,
            )
          : null,
      ),
    ),
  ];
}
