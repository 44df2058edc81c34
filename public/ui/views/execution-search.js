/**
 * The executions list's search box (SPEC section 15, docs/ingress.md "Search by business id"): one
 * box for "what the business knows" — an order id, a client id, a destination key, or a key made by
 * `$idempotencyKey` written as `charge("A-1001")` — and one answer: the executions found (kept or
 * removed by the history sweep), the keys they sent, and the duplicates stopped for it.
 *
 * The box's text is searched both ways at once (`identity=` and `destinationKey=`), since the page
 * cannot tell an order id from a key; `prefix(values)` is the helper's form (`keyPrefix=` and
 * `keyValues=`). Everything is read from `GET /v1/executions` and rendered as text.
 */
import { badge, h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";

/** The API searches a box's text means, each with what it is called on the page. */
export function searchesOf(text) {
  const q = text.trim();
  const helper = /^([A-Za-z0-9._:-]{1,64})\((.*)\)$/s.exec(q);
  if (helper) {
    try {
      const values = JSON.parse(`[${helper[2]}]`);
      if (values.length > 0) return [{ by: "key", query: { keyPrefix: helper[1], keyValues: JSON.stringify(values) } }];
    } catch {
      // not the helper's form: an id or a key like any other
    }
  }
  const searches = [{ by: "business id", query: { identity: q } }];
  if (q.length <= 255) searches.push({ by: "destination key", query: { destinationKey: q } });
  return searches;
}

const BOUNDARIES = [
  ["triggers", "duplicate triggers"],
  ["redeliveries", "redeliveries"],
  ["fencedOut", "fenced-out writes"],
  ["destinationReplays", "destination replays"],
];

/** Runs the searches of `text` and renders what they found into `container`. */
export async function showSearch(container, text) {
  replace(container, h("p", { class: "muted" }, `Searching for ${text}…`));
  let pages;
  try {
    pages = await Promise.all(
      searchesOf(text).map(async (search) => ({
        by: search.by,
        page: await api("GET", `/v1/executions?${new URLSearchParams({ ...search.query, limit: "100" })}`),
      })),
    );
  } catch (e) {
    replace(container, h("p", { class: "error" }, `The search failed: ${e.message}`));
    return;
  }
  const found = new Map();
  const keys = new Map();
  for (const { by, page } of pages) {
    for (const item of page.items) merge(found, item.executionId, { item, by });
    for (const removed of page.removed ?? []) merge(found, removed.executionId, { removed, by });
    for (const key of page.keys ?? []) keys.set(`${key.key}\n${key.destination}`, key);
  }
  const more = pages.some(({ page }) => page.nextCursor);
  const rows = [...found.values()].sort((a, b) => String(createdOf(b)).localeCompare(String(createdOf(a))));
  replace(
    container,
    h("h2", {}, `Found for “${text}”`),
    rows.length === 0 && keys.size === 0
      ? h(
          "p",
          { id: "search-none" },
          "No execution or key matches. A content identity (no idempotencyFields, no client id) is not indexed.",
        )
      : [
          stoppedLine(rows),
          executionsTable(rows),
          more ? h("p", { class: "muted" }, "More than 100 matches: the newest 100 are shown.") : null,
          keysTable([...keys.values()]),
        ],
  );
}

function merge(found, id, { item, removed, by }) {
  const entry = found.get(id) ?? { id, item: null, removed: null, by: new Set() };
  entry.item ??= item ?? null;
  entry.removed ??= removed ?? null;
  entry.by.add(by);
  found.set(id, entry);
}

const createdOf = (entry) => (entry.item ?? entry.removed)?.createdAt ?? "";

/** The duplicates stopped for the business id: the four boundaries, summed over the executions kept. */
function stoppedLine(rows) {
  const sums = Object.fromEntries(BOUNDARIES.map(([name]) => [name, 0]));
  for (const { item } of rows) for (const [name] of BOUNDARIES) sums[name] += item?.duplicatesStopped?.[name] ?? 0;
  const data = Object.fromEntries(BOUNDARIES.map(([name]) => [`data-${name.toLowerCase()}`, String(sums[name])]));
  return h(
    "p",
    { id: "search-stopped", class: "search-stopped", ...data },
    h("span", {}, "Duplicates stopped: "),
    BOUNDARIES.map(([name, label], i) => [
      i > 0 ? " · " : "",
      h("strong", { class: sums[name] > 0 ? "strong" : "" }, String(sums[name])),
      ` ${label}`,
    ]),
  );
}

function executionsTable(rows) {
  return h(
    "table",
    { class: "grid", id: "search-executions" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Execution", "Workflow", "Status", "Found by", "Created", "Duplicates stopped"].map((t) => h("th", {}, t)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((entry) => {
        const e = entry.item ?? entry.removed;
        const stopped = entry.item ? BOUNDARIES.reduce((n, [name]) => n + (entry.item.duplicatesStopped?.[name] ?? 0), 0) : null;
        return h(
          "tr",
          { "data-execution": entry.id, "data-removed": entry.removed ? "true" : "false" },
          h("td", { class: "mono" }, h("a", { href: `#/executions/${encodeURIComponent(entry.id)}` }, entry.id)),
          h("td", {}, e.workflowId),
          h(
            "td",
            {},
            badge(e.status),
            entry.removed
              ? h(
                  "span",
                  { class: "tag" },
                  `removed (${entry.removed.reason}) ${time(entry.removed.removedAt)}${entry.removed.archived ? ", archived" : ""}`,
                )
              : null,
          ),
          h("td", {}, [...entry.by].join(", ")),
          h("td", {}, time(e.createdAt)),
          h("td", { class: stopped ? "num strong" : "num" }, stopped === null ? "—" : String(stopped)),
        );
      }),
    ),
  );
}

function keysTable(keys) {
  if (keys.length === 0) return h("p", { class: "muted", id: "search-keys-none" }, "No destination key on record for these executions.");
  return [
    h("h3", {}, "Keys sent"),
    h(
      "table",
      { class: "grid", id: "search-keys" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Key", "Destination", "First sent", "By"].map((t) => h("th", {}, t)),
        ),
      ),
      h(
        "tbody",
        {},
        keys.map((k) =>
          h(
            "tr",
            { "data-key": k.key },
            h("td", { class: "mono" }, k.key),
            h("td", {}, k.destination),
            h("td", {}, time(k.firstSentAt)),
            h(
              "td",
              { class: "mono" },
              h("a", { href: `#/executions/${encodeURIComponent(k.executionId)}` }, k.executionId.slice(0, 12)),
              ` · ${k.vertexId}`,
            ),
          ),
        ),
      ),
    ),
  ];
}
