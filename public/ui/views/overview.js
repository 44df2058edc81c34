/**
 * The overview, the page the inspector opens on: what idemflow stopped over time, per boundary
 * (duplicate triggers, redeliveries, fenced-out writes, destination replays, duplicate events), for
 * every workflow or one, per UTC hour or day over a chosen range, drawn as a chart; the executions
 * by status under it; every number again in a table; the latest executions at the bottom.
 *
 * One `GET /v1/stats/series` (the hourly rollup, with the hours not rolled up yet counted live) and
 * one `GET /v1/executions?limit=5`, re-read every 30 s while the tab is visible; the workflows for
 * the filter once. The filters live in the URL's hash (`#/overview?workflowId=&bucket=&range=`), so
 * a view can be linked; changing one re-opens the page with it.
 *
 * A boundary of its own, "sends held back" (docs/connectors.md "Limits"): per connector with limits,
 * the sends its limits held back (a step that found no permit waited instead of calling) — a count
 * kept with the connector's limits since they were set, not per hour (it is not in the hourly
 * rollup), read from `GET /v1/connectors/{name}/state` beside `GET /v1/connectors`.
 */
import { badge, clock, h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { drawBars } from "./chart.js";
import { pollWhileVisible } from "../lib/poll.js";
import { limitsWords, paused, readConnectorStates } from "../lib/connector-state.js";

const REFRESH_MS = 30_000;
const SIZE = { hour: 3_600_000, day: 86_400_000 };

/** The ranges offered per bucket size, in buckets; the first is the default. */
const RANGES = {
  hour: [
    ["24", "last 24 hours"],
    ["72", "last 3 days"],
    ["168", "last 7 days"],
    ["744", "last 31 days"],
  ],
  day: [
    ["7", "last 7 days"],
    ["30", "last 30 days"],
    ["90", "last 90 days"],
    ["365", "last 365 days"],
  ],
};

/** The boundaries where a duplicate is stopped, in the order the chart stacks them. */
const BOUNDARIES = [
  { key: "triggers", name: "Duplicate triggers", where: "the trigger's dedupe", cls: "series-triggers" },
  { key: "redeliveries", name: "Redeliveries stopped", where: "the step's claim", cls: "series-redeliveries" },
  { key: "fencedOut", name: "Fenced-out writes", where: "the epoch fence", cls: "series-fenced" },
  { key: "destinationReplays", name: "Destination replays", where: "the destination's key store", cls: "series-replays" },
  { key: "duplicateEvents", name: "Duplicate events", where: "the event dedupe (whole workspace)", cls: "series-events" },
];

const STATUSES = [
  { key: "COMPLETED", name: "Completed", cls: "status-completed" },
  { key: "FAILED", name: "Failed", cls: "status-failed" },
  { key: "CANCELLED", name: "Cancelled", cls: "status-cancelled" },
  { key: "RUNNING", name: "Running", cls: "status-running" },
  // A failure that undid its completed steps (docs/steps.md "Compensation"). The series counts these
  // apart in its live hours; a rolled-up hour counts them as failed (COMPENSATING as running).
  { key: "COMPENSATED", name: "Compensated", cls: "status-compensated" },
  { key: "COMPENSATION_FAILED", name: "Compensation failed", cls: "status-compensation-failed" },
  { key: "COMPENSATING", name: "Compensating", cls: "status-compensating" },
];

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad = (n) => String(n).padStart(2, "0");
const dayText = (d) => `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
/** A bucket's start in UTC words: "6 Dec 14:00" for an hour, "6 Dec" for a day. */
const bucketText = (iso, bucket) => {
  const d = new Date(iso);
  return bucket === "day" ? dayText(d) : `${dayText(d)} ${pad(d.getUTCHours())}:00`;
};
/** The x label: the hour alone, with the day where a day starts (or on the first bar). */
const axisText = (iso, bucket, first) => {
  const d = new Date(iso);
  if (bucket === "day") return dayText(d);
  return first || d.getUTCHours() === 0 ? `${dayText(d)} ${pad(d.getUTCHours())}h` : `${pad(d.getUTCHours())}:00`;
};

/** The boundaries' values of a bucket (or the total): the series' members, events as one more boundary. */
const boundaryValues = (b) => ({
  triggers: b.triggers,
  redeliveries: b.redeliveries,
  fencedOut: b.fencedOut,
  destinationReplays: b.destinationReplays,
  duplicateEvents: b.events?.duplicates ?? 0,
});

/** The filters from the hash, each checked against what the page offers. */
function filtersOf(params) {
  const bucket = params.get("bucket") === "day" ? "day" : "hour";
  const range = RANGES[bucket].some(([value]) => value === params.get("range")) ? params.get("range") : RANGES[bucket][0][0];
  return { workflowId: params.get("workflowId") ?? "", bucket, range };
}

/** The range of the other bucket size that covers at least the same time (the longest one otherwise). */
function equivalentRange(from, range, to) {
  const span = Number(range) * SIZE[from];
  return (RANGES[to].find(([value]) => Number(value) * SIZE[to] >= span) ?? RANGES[to].at(-1))[0];
}

export function showOverview(main, params) {
  const filters = filtersOf(params);
  const navigate = (next) => {
    const q = new URLSearchParams();
    if (next.workflowId) q.set("workflowId", next.workflowId);
    q.set("bucket", next.bucket);
    q.set("range", next.range);
    location.hash = `#/overview?${q.toString()}`;
  };

  const workflowSelect = h(
    "select",
    { id: "overview-workflow", name: "workflowId", onchange: () => navigate({ ...filters, workflowId: workflowSelect.value }) },
    h("option", { value: "", selected: filters.workflowId === "" }, "every workflow"),
    filters.workflowId ? h("option", { value: filters.workflowId, selected: true }, filters.workflowId) : null,
  );
  const bucketSelect = h(
    "select",
    {
      id: "overview-bucket",
      name: "bucket",
      onchange: () =>
        navigate({ ...filters, bucket: bucketSelect.value, range: equivalentRange(filters.bucket, filters.range, bucketSelect.value) }),
    },
    ["hour", "day"].map((b) => h("option", { value: b, selected: filters.bucket === b }, `per ${b}`)),
  );
  const rangeSelect = h(
    "select",
    { id: "overview-range", name: "range", onchange: () => navigate({ ...filters, range: rangeSelect.value }) },
    RANGES[filters.bucket].map(([value, text]) => h("option", { value, selected: filters.range === value }, text)),
  );

  const status = h("p", { class: "muted", id: "overview-status", "aria-live": "polite" }, "Loading…");
  const totals = h("div", { class: "counters overview-totals", id: "overview-totals" });
  const chart = h("figure", { class: "chart-wrap", id: "overview-chart" });
  const statusTotals = h("p", { class: "status-totals", id: "overview-statuses" });
  const heldBack = h("div", { class: "counters overview-totals", id: "overview-held-back" });
  const statusChart = h("figure", { class: "chart-wrap", id: "overview-status-chart" });
  const table = h("table", { class: "grid", id: "overview-table" });
  // The same id as the executions list's table: the page the inspector opens on shows its executions at #executions.
  const latest = h("tbody", {}, h("tr", {}, h("td", { colspan: 5 }, "Loading…")));
  const allHref = filters.workflowId ? `#/executions?workflowId=${encodeURIComponent(filters.workflowId)}` : "#/executions";

  const section = h(
    "section",
    { id: "overview", "data-bucket": filters.bucket, "data-workflow": filters.workflowId },
    h("h1", {}, "Overview: what idemflow stopped"),
    h(
      "form",
      { class: "filters", onsubmit: (e) => e.preventDefault() },
      field("Workflow", workflowSelect),
      field("Buckets", bucketSelect),
      field("Range", rangeSelect),
    ),
    status,
    totals,
    h("h2", { id: "overview-held-back-title" }, "Sends held back by connector limits"),
    h(
      "p",
      { class: "muted" },
      "Per connector with limits: the sends it held back (a step found no permit and waited, spending no attempt), " +
        "counted since its limits were set — every workflow, not per hour.",
    ),
    heldBack,
    h("h2", { id: "overview-chart-title" }, `Duplicates stopped per ${filters.bucket} (UTC)`),
    chart,
    h("h2", {}, `Executions by status, per ${filters.bucket} they were created in`),
    statusTotals,
    statusChart,
    h("details", { id: "overview-numbers" }, h("summary", {}, "Every number as a table"), h("div", { class: "scroll" }, table)),
    h("h2", {}, "Latest executions"),
    h(
      "table",
      { class: "grid", id: "executions" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Execution", "Workflow", "Status", "Created", "Duplicates stopped"].map((t) => h("th", {}, t)),
        ),
      ),
      latest,
    ),
    h("p", {}, h("a", { href: allHref, id: "overview-all-executions" }, "All executions →")),
  );
  replace(main, section);

  let left = false;
  void api("GET", "/v1/workflows?limit=500")
    .then((page) => {
      if (left) return;
      for (const { workflowId } of page.items) {
        if (workflowId !== filters.workflowId) workflowSelect.appendChild(h("option", { value: workflowId }, workflowId));
      }
    })
    .catch(() => undefined);

  const seriesQuery = () => {
    const size = SIZE[filters.bucket];
    const end = Math.ceil(Date.now() / size) * size;
    const q = new URLSearchParams({ bucket: filters.bucket, since: new Date(end - Number(filters.range) * size).toISOString() });
    if (filters.workflowId) q.set("workflowId", filters.workflowId);
    return q.toString();
  };
  const latestQuery = () => {
    const q = new URLSearchParams({ limit: "5" });
    if (filters.workflowId) q.set("workflowId", filters.workflowId);
    return q.toString();
  };
  const rangeText = RANGES[filters.bucket].find(([value]) => value === filters.range)[1];

  const draw = (series) => {
    const boundaries = BOUNDARIES.filter((b) => b.key !== "duplicateEvents" || series.total.events !== null);
    const total = boundaryValues(series.total);
    replace(
      totals,
      boundaries.map(({ key, name, where }) =>
        h(
          "div",
          { class: total[key] > 0 ? "counter stat hit" : "counter stat", id: `total-${key}`, "data-count": total[key] },
          h("span", { class: "count" }, String(total[key])),
          h("span", {}, name),
          h("span", { class: "where" }, `stopped at ${where}`),
        ),
      ),
    );
    const words = boundaries.map(({ key, name }) => `${total[key]} ${name.toLowerCase()}`).join(", ");
    const scope = filters.workflowId ? `workflow ${filters.workflowId}` : "every workflow";
    const bars = series.buckets.map((b, i) => ({
      start: b.start,
      label: axisText(b.start, filters.bucket, i === 0),
      title: `${bucketText(b.start, filters.bucket)} UTC${b.live ? " (live)" : ""}: ${boundaries
        .map(({ key, name }) => `${name.toLowerCase()} ${boundaryValues(b)[key]}`)
        .join(", ")}`,
      values: boundaryValues(b),
    }));
    replace(
      chart,
      drawBars({
        id: "chart-duplicates",
        label: `Duplicates stopped per ${filters.bucket}, ${rangeText}, ${scope}: ${words}. Every number is in the table below.`,
        series: boundaries,
        bars,
      }),
      legend(boundaries),
    );

    replace(
      statusTotals,
      STATUSES.map(({ key }) =>
        h(
          "span",
          { class: "status-total", id: `status-${key}`, "data-count": series.total.byStatus[key] },
          badge(key),
          ` ${series.total.byStatus[key]}`,
        ),
      ),
      ` of ${series.total.executions} executions`,
    );
    replace(
      statusChart,
      drawBars({
        id: "chart-statuses",
        label: `Executions by status per ${filters.bucket}, ${rangeText}, ${scope}: ${STATUSES.map(
          ({ key, name }) => `${series.total.byStatus[key]} ${name.toLowerCase()}`,
        ).join(", ")}.`,
        series: STATUSES,
        bars: series.buckets.map((b, i) => ({
          start: b.start,
          label: axisText(b.start, filters.bucket, i === 0),
          title: `${bucketText(b.start, filters.bucket)} UTC: ${b.executions} executions, ${STATUSES.map(
            ({ key, name }) => `${name.toLowerCase()} ${b.byStatus[key]}`,
          ).join(", ")}`,
          values: b.byStatus,
        })),
      }),
      legend(STATUSES),
    );
    drawTable(series, boundaries);
    replace(
      status,
      h("span", { id: "overview-provenance", "data-missing": series.missingBehind ? "true" : "false" }, provenance(series)),
      ` Updated ${clock()}; refreshes every ${REFRESH_MS / 1000} s.`,
    );
    section.dataset.loaded = "true";
  };

  const drawTable = (series, boundaries) => {
    const head = ["Bucket (UTC)", ...boundaries.map((b) => b.name), "Executions", ...STATUSES.map((st) => st.name)];
    replace(
      table,
      h("caption", {}, `Per ${filters.bucket}, ${rangeText}: the numbers of both charts`),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          head.map((t) => h("th", { scope: "col" }, t)),
        ),
      ),
      h(
        "tbody",
        {},
        series.buckets.map((b) => {
          const values = boundaryValues(b);
          return h(
            "tr",
            { "data-start": b.start },
            h("th", { scope: "row" }, `${bucketText(b.start, filters.bucket)}${b.live ? " (live)" : ""}`),
            boundaries.map(({ key }) => h("td", { class: values[key] > 0 ? "num strong" : "num" }, String(values[key]))),
            h("td", { class: "num" }, String(b.executions)),
            STATUSES.map(({ key }) => h("td", { class: "num" }, String(b.byStatus[key]))),
          );
        }),
      ),
    );
  };

  const drawLatest = (items) => {
    if (items.length === 0) return replace(latest, h("tr", {}, h("td", { colspan: 5 }, "No execution yet.")));
    replace(
      latest,
      items.map((e) => {
        const d = e.duplicatesStopped;
        const stopped = d ? d.triggers + d.redeliveries + d.fencedOut + d.destinationReplays : 0;
        return h(
          "tr",
          {},
          h("td", { class: "mono" }, h("a", { href: `#/executions/${encodeURIComponent(e.executionId)}` }, e.executionId)),
          h("td", {}, e.workflowId),
          h("td", {}, badge(e.status)),
          h("td", {}, time(e.createdAt)),
          h("td", { class: stopped > 0 ? "num strong" : "num" }, String(stopped)),
        );
      }),
    );
  };

  /**
   * Whether any execution in scope was created in the hours the rollup has not reached and the live
   * part does not count (from `rolledUpUntil`, or the range's start, to `liveSince`): only then is
   * something missing from the chart. A fresh install's rollup starts 7 days back with nothing there.
   */
  const missingBehind = async (series) => {
    const from = series.rolledUpUntil ?? series.since;
    if (!from || !series.liveSince || !(Date.parse(from) < Date.parse(series.liveSince))) return false;
    const q = new URLSearchParams({ since: from, until: series.liveSince, limit: "1" });
    if (filters.workflowId) q.set("workflowId", filters.workflowId);
    try {
      return (await api("GET", `/v1/executions?${q.toString()}`)).items.length > 0;
    } catch {
      return true; // unknown: say what may be missing
    }
  };

  /** The connectors with limits and their held-back sends, one counter each. */
  const drawHeldBack = async () => {
    const connectors = await api("GET", "/v1/connectors").catch(() => null);
    const limited = (connectors?.items ?? []).filter((c) => c.definition?.limits);
    const states = await readConnectorStates(limited.map((c) => c.name));
    if (left) return;
    if (connectors === null) return replace(heldBack, h("p", { class: "error" }, "Could not load the connectors."));
    if (limited.length === 0) return replace(heldBack, h("p", { class: "muted", id: "held-back-none" }, "No connector has limits."));
    replace(
      heldBack,
      limited.map(({ name }) => {
        const st = states.get(name);
        const count = st?.heldBack ?? 0;
        return h(
          "a",
          {
            class: count > 0 ? "counter stat hit" : "counter stat",
            id: `held-back-${name}`,
            href: "#/connectors",
            "data-count": count,
            "data-connector": name,
          },
          h("span", { class: "count" }, String(count)),
          h("span", {}, `${name}: sends held back`),
          h("span", { class: "where" }, st ? heldBackWhere(st) : "state not readable"),
        );
      }),
    );
  };

  const refresh = async () => {
    const [series, page] = await Promise.allSettled([
      api("GET", `/v1/stats/series?${seriesQuery()}`),
      api("GET", `/v1/executions?${latestQuery()}`),
      drawHeldBack(),
    ]);
    if (left) return;
    if (series.status === "fulfilled") series.value.missingBehind = await missingBehind(series.value);
    if (left) return;
    if (series.status === "fulfilled") draw(series.value);
    else replace(status, h("span", { class: "error" }, `Could not load the figures: ${series.reason?.message ?? series.reason}`));
    if (page.status === "fulfilled") drawLatest(page.value.items);
    else replace(latest, h("tr", {}, h("td", { colspan: 5, class: "error" }, `Could not load the executions: ${page.reason?.message}`)));
  };
  const polling = pollWhileVisible(refresh, REFRESH_MS);
  return {
    leave() {
      left = true;
      polling.stop();
    },
  };
}

/** A limited connector's limits and state now, under its held-back count. */
function heldBackWhere(st) {
  const pause = paused(st) ? ` · paused until ${time(st.pausedUntil)}` : "";
  return `limits ${limitsWords(st)} · ${st.inFlight} in flight, ${st.waiting} waiting${pause}`;
}

/**
 * Where the figures come from, in a sentence: the rollup up to a time, live after — and, only when
 * executions were created in the hours between (`series.missingBehind`), that the rollup is catching up.
 */
function provenance(series) {
  const live = bucketText(series.liveSince, "hour");
  if (series.missingBehind) {
    if (!series.rolledUpUntil) {
      return `The hourly rollup has not run yet: hours from ${live} UTC are counted live, earlier ones appear once it has run.`;
    }
    return (
      `The hourly rollup is catching up: it has reached ${bucketText(series.rolledUpUntil, "hour")} UTC (6 hours a minute), ` +
      `hours from ${live} UTC are counted live, and the ones between appear as it reaches them.`
    );
  }
  if (!series.rolledUpUntil || Date.parse(series.rolledUpUntil) < Date.parse(series.liveSince)) {
    return `Hours from ${live} UTC are counted live; earlier hours come from the hourly rollup.`;
  }
  const rolled = bucketText(series.rolledUpUntil, "hour");
  return `Hours before ${rolled} UTC come from the hourly rollup (kept 400 days); later ones are counted live.`;
}

function legend(series) {
  return h(
    "figcaption",
    { class: "legend" },
    series.map(({ name, cls }) => h("span", { class: "legend-item" }, h("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), name)),
  );
}

function field(label, input) {
  return h("label", {}, h("span", {}, label), input);
}
