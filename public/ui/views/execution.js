/**
 * One execution: where each duplicate was stopped, drawn from `GET /v1/executions/{id}` (the
 * trace) and the pinned definition (`GET /v1/workflows/{id}?version=`).
 *
 *   header     status, version, trigger and identity kind, dedupe-window end, start-over links
 *   strip      the four "duplicates stopped" counters; each opens the records behind it
 *   graph      the definition, coloured by step state (./graph.js)
 *   timeline   one row per attempt: epoch, lease, key, outcome, duration, error, retry delay
 *   keys       per Gateway step: the key expression, the value, and whether every attempt sent it
 *   steps      per step its attempts and output; a wait for an event, what it waits for, the events
 *              that arrived for it, and its decisions as buttons (./wait.js); a wait for a connector's
 *              permit and why; once the execution compensates, the step's undo step beside it (its
 *              state, key, attempts, output or error) or why it is not compensated
 *   events     fenced-out writes, expired leases, dropped redeliveries, operator actions
 *   raw        the trace as JSON
 *
 * Compensation (docs/steps.md "Compensation"): the header says what was undone; the graph draws
 * each undo step under the step it undoes; the timeline lists the undo's attempts as "<step> ↩ undo".
 *
 * Live: while the execution runs (RUNNING, or COMPENSATING: its undo steps run), its event stream
 * (`GET /v1/executions/{id}/events`) tells when something changed and the trace is read again
 * (coalesced); without the stream it polls.
 *
 * Archived: an execution the history sweep removed answers its archived trace (`archived: true`,
 * the removal time in the `Execution-Removed-At` header). It is shown read-only — a banner says
 * so, and no retry, start over or cancel control is offered (the API answers them 410).
 * A re-render keeps what the reader opened (details, the strip's panel) and the focused control.
 */
import { badge, duration, h, json, replace, time } from "../lib/dom.js";
import { api, apiResponse, followExecution } from "../lib/api.js";
import { drawGraph } from "./graph.js";
import { cancelExecution, problemText, resolveCompensation, retryCompensation, retryStep, startOver } from "./actions.js";
import { sendDecision, waitPanel, waitTag } from "./wait.js";
import { triggerWords } from "../lib/trigger.js";
import { removedPage } from "./removed.js";
import { mapNote, mapPanel, mapTag } from "./map.js";
import { connectorStatePanel, readConnectorStates } from "../lib/connector-state.js";

const POLL_MS = 1500;
/** While a step waits for a connector's permit, the page re-reads this often (a permit wait writes no change to follow). */
const PERMIT_POLL_MS = 2000;

/** A step waiting for a connector's permit now (docs/connectors.md "Limits"): its wait has no grant yet. */
const waitingForPermit = (step) => Boolean(step?.permitWait) && step.permitWait.grantedAt === null && step.state !== "COMPLETED";

/** The statuses in which an execution still changes (an undo step runs while COMPENSATING). */
const LIVE = new Set(["RUNNING", "COMPENSATING"]);
/** A step's undo step, or null (none, or the step is not compensated). */
const undoStepOf = (step) => (step?.undo && step.undo.state !== "NOT_COMPENSATED" ? step.undo : null);
const COALESCE_MS = 150;

const COUNTERS = [
  { name: "triggers", label: "Duplicate triggers", where: "stopped by the trigger's dedupe window" },
  { name: "redeliveries", label: "Redeliveries", where: "stopped at the claim: the step was settled or held" },
  { name: "fencedOut", label: "Fenced-out writes", where: "stopped by the epoch fence: a worker that had lost its step" },
  { name: "destinationReplays", label: "Destination replays", where: "stopped by the destination's own key store" },
];

/** The attempt's answer was replayed by the destination's key store (`Idempotent-Replayed: true`). */
export function replayed(attempt) {
  const headers = attempt?.response?.headers ?? {};
  return Object.entries(headers).some(([name, value]) => name.toLowerCase() === "idempotent-replayed" && String(value) === "true");
}

/** The key a Gateway vertex declares: `idempotencyKey.value`, else an `Idempotency-Key` header expression. */
export function keyExpressionOf(vertex) {
  const config = vertex?.config ?? {};
  if (config.idempotencyKey?.value) return config.idempotencyKey.value;
  const header = Object.entries(config.headers ?? {}).find(([name]) => name.toLowerCase() === "idempotency-key");
  return header ? header[1] : null;
}

export function showExecution(main, executionId) {
  const view = {
    trace: null,
    definition: null,
    error: null,
    removedAt: null,
    /** The 404 `execution-not-retained` problem of a removed execution with no readable trace. */
    removed: null,
    executionId,
    openPanel: null,
    selected: null,
    left: false,
    /** Per wait step: its decision in flight or the last one's answer (kept across re-renders: the buttons stay disabled). */
    decisions: new Map(),
    /** Per MAP step: the page of items shown and the items opened (./map.js; kept across re-renders). */
    maps: new Map(),
    /** The live state of each connector a step waits on (`GET /v1/connectors/{name}/state`). */
    connectorStates: new Map(),
  };
  replace(main, h("p", { class: "muted" }, "Loading…"));

  let follow = null;
  let pollTimer = null;
  let permitTimer = null;
  let pending = null;
  let reading = false;
  let again = false;

  const read = async () => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      const { body: trace, headers } = await apiResponse("GET", `/v1/executions/${encodeURIComponent(executionId)}`);
      if (view.left) return;
      view.removedAt = trace.archived === true ? headers.get("execution-removed-at") : null;
      if (!view.definition) {
        const wf = await api("GET", `/v1/workflows/${encodeURIComponent(trace.workflowId)}?version=${trace.version}`).catch(() => null);
        view.definition = wf?.definition ?? { vertices: [], edges: [] };
      }
      view.trace = trace;
      view.error = null;
      // A step waiting for a permit: its connector's state now (in flight, tokens, paused until).
      const waitedOn = trace.steps.filter(waitingForPermit).map((st) => st.permitWait.connector);
      view.connectorStates = waitedOn.length > 0 && !trace.archived ? await readConnectorStates(waitedOn) : new Map();
      if (view.left) return;
    } catch (e) {
      // Removed by retention (or erased) with no archived copy: the problem says when, why and what remains (./removed.js).
      if (e.problem?.code === "execution-not-retained") view.removed = e.problem;
      else view.error = e.status === 404 ? `Execution ${executionId} does not exist in this workspace (404).` : problemText(e);
    } finally {
      reading = false;
    }
    if (view.left) return;
    render(main, view, actions);
    live();
    if (again) {
      again = false;
      void read();
    }
  };
  /** Many events arrive together (a settle writes several rows): one read for all of them. */
  const changed = () => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      void read();
    }, COALESCE_MS);
  };
  const live = () => {
    const running = LIVE.has(view.trace?.status);
    if (!running) return stopLive();
    clearTimeout(permitTimer);
    permitTimer = view.trace.steps.some(waitingForPermit) ? setTimeout(() => void read(), PERMIT_POLL_MS) : null;
    if (follow || pollTimer) return;
    follow = followExecution(executionId, {
      onEvent: changed,
      onFinished: changed,
      onFallback: () => {
        follow = null;
        pollTimer = setInterval(() => void read(), POLL_MS);
      },
    });
  };
  const stopLive = () => {
    clearTimeout(permitTimer);
    permitTimer = null;
    follow?.stop();
    follow = null;
    clearInterval(pollTimer);
    pollTimer = null;
  };
  const actions = {
    refresh: () => void read(),
    rerender: () => {
      if (!view.left) render(main, view, actions);
    },
    cancel: () => cancelExecution(view.trace, () => void read()),
    startOver: () =>
      startOver(view.trace, (started) => {
        if (started?.executionId) location.hash = `#/executions/${encodeURIComponent(started.executionId)}`;
      }),
    // The retry's batch puts the execution back to RUNNING: the read that follows starts following it.
    retry: (step) => retryStep(view.trace, step, () => void read()),
    // A failed compensation: its failed undo again (same key), or marked resolved with a note.
    retryUndo: (undo) => retryCompensation(view.trace, undo, () => void read()),
    resolve: () => resolveCompensation(view.trace, () => void read()),
    decide: (step, decision) =>
      void sendDecision(view.decisions, step, decision, {
        rerender: () => {
          if (!view.left) render(main, view, actions);
        },
        refresh: () => void read(),
      }),
    toggle: (panel) => {
      view.openPanel = view.openPanel === panel ? null : panel;
      render(main, view, actions);
    },
    select: (vertexId) => {
      view.selected = vertexId;
      render(main, view, actions);
      document.getElementById(`step-${vertexId}`)?.scrollIntoView({ block: "start" });
    },
  };
  void read();
  return {
    leave() {
      view.left = true;
      stopLive();
      clearTimeout(pending);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Rendering: one pass over the trace; what the reader opened is carried over.

function render(main, view, actions) {
  const focused = document.activeElement?.id || null;
  const open = new Set([...main.querySelectorAll("details[open][id]")].map((d) => d.id));
  const started = performance.now();
  if (!view.trace && view.removed) {
    replace(main, removedPage(view.executionId, view.removed));
    return;
  }
  if (!view.trace) {
    replace(main, h("p", { class: "error", role: "alert" }, view.error ?? "Not found."));
    return;
  }
  const { trace, definition } = view;
  replace(
    main,
    h(
      "article",
      { class: "execution", "data-status": trace.status, "data-archived": trace.archived === true ? "true" : null },
      header(trace, view.error, actions, view.removedAt, definition),
      strip(trace, view.openPanel, actions, definition),
      h("section", { "aria-labelledby": "graph-title" }, h("h2", { id: "graph-title" }, "Graph"), graphOf(trace, definition, actions)),
      timeline(trace),
      keyPanels(trace, definition),
      stepsSection(trace, view, actions, trace.archived === true),
      eventsSection(trace),
      h(
        "details",
        { id: "raw" },
        h("summary", {}, "Raw JSON (GET /v1/executions/", trace.executionId, ")"),
        h("pre", { class: "raw" }, json(trace)),
      ),
    ),
  );
  for (const id of open) document.getElementById(id)?.setAttribute("open", "");
  if (focused) document.getElementById(focused)?.focus({ preventScroll: true });
  main.dataset.renderMs = String(Math.round(performance.now() - started));
}

/** The read-only banner of an archived trace. */
function archivedBanner(removedAt) {
  return h(
    "p",
    { class: "archived-banner", id: "archived-banner", role: "status" },
    `archived: removed from the database on ${removedAt ? time(removedAt) : "an unknown date"}; read-only`,
  );
}

function header(trace, error, actions, removedAt, definition) {
  const archived = trace.archived === true;
  let windowEnd = "— (no identity is held: swept after its window, or taken by a newer execution)";
  if (trace.identity === "forced") windowEnd = "— (a forced start has no identity)";
  else if (trace.dedupeWindowEnd) {
    const ended = new Date(trace.dedupeWindowEnd).getTime() <= Date.now();
    windowEnd = `${time(trace.dedupeWindowEnd)}${ended ? " (ended: a re-sent trigger starts a new execution)" : ""}`;
  }
  const link = (id) => (id ? h("a", { href: `#/executions/${encodeURIComponent(id)}`, class: "mono" }, id) : null);
  const facts = [
    ["Workflow", h("a", { href: `#/executions?workflowId=${encodeURIComponent(trace.workflowId)}` }, trace.workflowId)],
    ["Version", h("span", { class: "mono", title: trace.version }, trace.version.slice(0, 12))],
    ["Trigger", triggerFact(trace, definition)],
    ["Identity", trace.identity],
    ["Created", time(trace.createdAt)],
    ["Finished", time(trace.finishedAt)],
    ["Dedupe window ends", windowEnd],
    ["Started over from", link(trace.startedOverFrom)],
    ["Previous execution", link(trace.previousExecutionId)],
    ["Superseded by", link(trace.supersededBy)],
    ["Compensation", compensationFact(trace)],
  ].filter(([, value]) => value !== null);
  const buttons = [];
  // An archived execution is read-only: its rows are gone, the actions would answer 410.
  if (trace.status === "RUNNING" && !archived) {
    buttons.push(h("button", { type: "button", id: "action-cancel", onclick: actions.cancel }, "Cancel…"));
  }
  if (!LIVE.has(trace.status) && !trace.supersededBy && !archived) {
    buttons.push(h("button", { type: "button", id: "action-start-over", onclick: actions.startOver }, "Start over…"));
  }
  if (trace.status === "COMPENSATION_FAILED" && !archived) {
    buttons.push(h("button", { type: "button", id: "action-resolve-compensation", onclick: actions.resolve }, "Mark resolved…"));
  }
  buttons.push(h("button", { type: "button", id: "action-refresh", onclick: actions.refresh }, "Refresh"));
  return h(
    "header",
    { class: "exec-header" },
    h("h1", {}, "Execution ", h("span", { class: "mono" }, trace.executionId), " ", badge(trace.status)),
    archived ? archivedBanner(removedAt) : null,
    h(
      "dl",
      { class: "facts" },
      facts.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
    ),
    h("div", { class: "buttons" }, buttons),
    error ? h("p", { class: "error", role: "alert" }, error) : null,
  );
}

/** An operator's "mark resolved", in words. */
function resolutionWords(r) {
  const failed = r.failedUndoOf ? ` (the undo of ${r.failedUndoOf} had failed)` : "";
  return ` · marked resolved by ${r.resolvedBy} on ${time(r.resolvedAt)}${failed}: ${r.note}`;
}

/** What the compensation undid, in words ("undid charge · 1 completed"); null when it never compensated. */
function compensationFact(trace) {
  const c = trace.compensation;
  if (!c) return null;
  const parts = [
    [c.completed, "completed"],
    [c.running, "running"],
    [c.pending, "waiting"],
    [c.failed, "failed"],
    [c.cancelled, "cancelled"],
  ]
    .filter(([n]) => n > 0)
    .map(([n, word]) => `${n} ${word}`);
  const order = c.order.length === 0 ? "nothing to undo" : `undoes ${c.order.join(" → ")}`;
  const r = c.resolution;
  return h(
    "span",
    { class: "compensation-summary", id: "fact-compensation" },
    `${order}${parts.length ? ` · ${parts.join(", ")}` : ""}`,
    r ? h("span", { class: "resolution", id: "fact-resolution" }, resolutionWords(r)) : null,
  );
}

/** The trigger in words (the pinned definition tells an API trigger from a signed hook: ../lib/trigger.js). */
function triggerFact(trace, definition) {
  const words = triggerWords(trace, definition?.vertices?.length ? definition : null);
  return h("span", { id: "fact-trigger", title: words.title }, words.text);
}

/** The records behind each counter. */
function stopsOf(trace, definition) {
  const events = (type) => trace.steps.flatMap((s) => s.events.filter((e) => e.type === type).map((e) => ({ vertexId: s.vertexId, ...e })));
  return {
    triggers: trace.duplicateTriggers.map(
      (d) => `#${d.seq} ${time(d.at)} · ${triggerWords(d, definition?.vertices?.length ? definition : null).text} · identity ${d.identity}`,
    ),
    redeliveries: events("redelivery_dropped").map((e) => `${time(e.at)} · ${e.vertexId} epoch ${e.epoch ?? "—"} · ${e.detail ?? ""}`),
    fencedOut: events("fenced_out").map((e) => `${time(e.at)} · ${e.vertexId} epoch ${e.epoch ?? "—"} · ${e.detail ?? ""}`),
    destinationReplays: trace.steps.flatMap((s) =>
      s.attempts
        .filter(replayed)
        .map((a) => `${time(a.finishedAt)} · ${s.vertexId} attempt ${a.attempt} (epoch ${a.epoch}) · key ${a.idempotencyKey}`),
    ),
  };
}

function strip(trace, openPanel, actions, definition) {
  const d = trace.duplicatesStopped;
  const stops = stopsOf(trace, definition);
  const panel = COUNTERS.find((c) => c.name === openPanel);
  const listed = panel ? stops[panel.name] : [];
  const unlisted = panel ? d[panel.name] - listed.length : 0;
  return h(
    "section",
    { class: "strip", "aria-labelledby": "strip-title" },
    h("h2", { id: "strip-title" }, "Where duplicates were stopped"),
    h(
      "div",
      { class: "counters" },
      COUNTERS.map((c) =>
        h(
          "button",
          {
            type: "button",
            id: `counter-${c.name}`,
            class: d[c.name] > 0 ? "counter hit" : "counter",
            "aria-expanded": String(openPanel === c.name),
            "aria-controls": "strip-panel",
            "data-count": d[c.name],
            onclick: () => actions.toggle(c.name),
          },
          h("span", { class: "count" }, String(d[c.name])),
          h("span", { class: "what" }, c.label),
          h("span", { class: "where" }, c.where),
        ),
      ),
    ),
    panel
      ? h(
          "div",
          { id: "strip-panel", class: "panel", role: "region", "aria-label": panel.label },
          h("h3", {}, `${panel.label}: ${d[panel.name]}`),
          listed.length > 0
            ? h(
                "ol",
                {},
                listed.map((line) => h("li", {}, line)),
              )
            : h("p", { class: "muted" }, "None on record."),
          unlisted > 0 ? h("p", { class: "muted" }, `${unlisted} more counted but not kept one by one.`) : null,
        )
      : null,
  );
}

function graphOf(trace, definition, actions) {
  const states = new Map(trace.steps.map((s) => [s.vertexId, s.state]));
  const entry = definition?.vertices?.find((v) => v.type === "ENTRY_POINT");
  return h(
    "div",
    { class: "graph-wrap" },
    drawGraph(
      definition,
      (id) => states.get(id) ?? (id === entry?.id ? "COMPLETED" : null),
      actions.select,
      (id) => {
        const step = trace.steps.find((s) => s.vertexId === id);
        return mapNote(step) ?? (waitingForPermit(step) ? `waiting for ${step.permitWait.connector}` : null);
      },
      (id) => undoStepOf(trace.steps.find((s) => s.vertexId === id)),
    ),
  );
}

/** Every attempt of every step — and of every undo step, named "<step> ↩ undo" — oldest first. */
function attemptsOf(trace) {
  const undoRow = (s) => ({ vertexId: `${s.vertexId} ↩ undo`, undoes: s.vertexId, leaseUntil: null, parkedUntil: null });
  return trace.steps
    .flatMap((s) => [...s.attempts.map((a) => ({ step: s, a })), ...(undoStepOf(s)?.attempts ?? []).map((a) => ({ step: undoRow(s), a }))])
    .sort((x, y) => (x.a.startedAt ?? "").localeCompare(y.a.startedAt ?? "") || x.a.epoch - y.a.epoch);
}

function timeline(trace) {
  const rows = attemptsOf(trace);
  return h(
    "section",
    { "aria-labelledby": "timeline-title" },
    h("h2", { id: "timeline-title" }, `Timeline: ${rows.length} attempt${rows.length === 1 ? "" : "s"}`),
    rows.length === 0
      ? h("p", { class: "muted" }, "No attempt yet.")
      : h(
          "div",
          { class: "scroll" },
          h(
            "table",
            { class: "grid", id: "timeline" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["Step", "Attempt", "Epoch", "Lease", "Key", "Outcome", "Started", "Duration", "Error", "Retry delay"].map((t) =>
                  h("th", {}, t),
                ),
              ),
            ),
            h(
              "tbody",
              {},
              rows.map(({ step, a }) => {
                const open = a.outcome === "running";
                return h(
                  "tr",
                  {
                    class: `outcome-${a.outcome}${step.undoes ? " undo-attempt" : ""}`,
                    "data-vertex": step.undoes ?? step.vertexId,
                    "data-undo": step.undoes ? "true" : null,
                    "data-epoch": a.epoch,
                  },
                  h("td", {}, step.vertexId),
                  h("td", { class: "num" }, String(a.attempt)),
                  h("td", { class: "num" }, String(a.epoch)),
                  h(
                    "td",
                    {},
                    a.outcome === "slept" && step.parkedUntil
                      ? `parked until ${time(step.parkedUntil)}`
                      : open && step.leaseUntil
                        ? `until ${time(step.leaseUntil)}`
                        : "—",
                  ),
                  h("td", { class: "mono key" }, a.idempotencyKey ?? "—"),
                  h("td", {}, badge(a.outcome), replayed(a) ? h("span", { class: "tag" }, "replayed") : null),
                  h("td", {}, time(a.startedAt)),
                  h("td", { class: "num" }, duration(a.durationMs)),
                  h("td", { class: "err" }, a.error ?? ""),
                  h("td", {}, a.retryDelay ? `${duration(a.retryDelay.ms)} (${a.retryDelay.reason})` : "—"),
                );
              }),
            ),
          ),
        ),
  );
}

function keyPanels(trace, definition) {
  const gateways = (definition?.vertices ?? []).filter((v) => v.type === "GATEWAY");
  if (gateways.length === 0) return null;
  return h(
    "section",
    { "aria-labelledby": "keys-title" },
    h("h2", { id: "keys-title" }, "Destination keys"),
    h(
      "div",
      { class: "keys" },
      gateways.map((v) => {
        const step = trace.steps.find((s) => s.vertexId === v.id);
        const sent = (step?.attempts ?? []).filter((a) => a.idempotencyKey !== null);
        const distinct = [...new Set(sent.map((a) => a.idempotencyKey))];
        const value = step?.destinationKey?.value ?? step?.idempotencyKey ?? null;
        let check;
        if (sent.length === 0) check = h("p", { class: "check-none" }, "No attempt has sent a key yet.");
        else if (distinct.length === 1) {
          check = h(
            "p",
            { class: "check-pass", "data-check": "pass" },
            `✓ every attempt sent the same key (${sent.length} attempt${sent.length === 1 ? "" : "s"})`,
          );
        } else {
          check = h(
            "p",
            { class: "check-fail", "data-check": "fail", role: "alert" },
            `✗ attempts sent ${distinct.length} different keys: ${distinct.join(", ")}`,
          );
        }
        const dk = step?.destinationKey;
        return h(
          "div",
          { class: "key-panel", id: `key-${v.id}`, "data-vertex": v.id },
          h("h3", {}, v.id),
          h("dl", { class: "facts" }, [
            h("dt", {}, "Expression"),
            h("dd", { class: "mono" }, keyExpressionOf(v) ?? "— (no destination key declared)"),
            h("dt", {}, "Value"),
            h("dd", { class: "mono key" }, value ?? "— (not computed yet)"),
            dk
              ? [h("dt", {}, "Sent as"), h("dd", { class: "mono" }, dk.header ? `header ${dk.header}` : `body field ${dk.bodyField}`)]
              : null,
            dk?.retentionMs
              ? [h("dt", {}, "Destination remembers it"), h("dd", {}, `${duration(dk.retentionMs)}, until ${time(dk.retentionDeadline)}`)]
              : null,
          ]),
          check,
        );
      }),
    ),
  );
}

function stepsSection(trace, view, actions, readOnly) {
  const selected = view.selected;
  return h(
    "section",
    { "aria-labelledby": "steps-title" },
    h("h2", { id: "steps-title" }, "Steps"),
    trace.steps.map((s) =>
      h(
        "div",
        { class: selected === s.vertexId ? "step selected" : "step", id: `step-${s.vertexId}`, tabindex: -1 },
        h(
          "h3",
          {},
          s.vertexId,
          " ",
          badge(s.state),
          s.wait
            ? waitTag(s)
            : s.map
              ? mapTag(s)
              : waitingForPermit(s)
                ? h("span", { class: "tag", id: `permit-tag-${s.vertexId}` }, `waiting for a permit of ${s.permitWait.connector}`)
                : s.parkedUntil
                  ? h("span", { class: "tag", id: `parked-${s.vertexId}` }, `sleeping until ${time(s.parkedUntil)}`)
                  : null,
          h("span", { class: "muted" }, ` attempt ${s.attempt} · epoch ${s.epoch}`),
          s.state === "FAILED" && !readOnly
            ? h("button", { type: "button", id: `action-retry-${s.vertexId}`, onclick: () => actions.retry(s) }, "Retry step…")
            : null,
        ),
        s.error ? h("p", { class: "err" }, s.error) : null,
        s.undo ? undoPanel(s, trace.status === "COMPENSATION_FAILED" && !readOnly ? actions.retryUndo : null) : null,
        s.permitWait ? permitWaitPanel(s, view.connectorStates.get(s.permitWait.connector)) : null,
        s.map ? mapPanel(s, { executionId: trace.executionId, states: view.maps, rerender: actions.rerender }) : null,
        s.wait
          ? waitPanel(s, {
              executionId: trace.executionId,
              sending: view.decisions.get(s.vertexId) ?? null,
              onDecide: actions.decide,
              readOnly,
            })
          : null,
        s.attempts.map((a) =>
          h(
            "details",
            { id: `attempt-${s.vertexId}-${a.epoch}` },
            h("summary", {}, `Attempt ${a.attempt} · epoch ${a.epoch} · ${a.outcome} — request and response (redacted)`),
            h("h4", {}, "Request"),
            h("pre", {}, json(a.request)),
            h("h4", {}, "Response"),
            h("pre", {}, json(a.response)),
          ),
        ),
        s.output !== null && s.output !== undefined
          ? h("details", { id: `output-${s.vertexId}` }, h("summary", {}, "Output"), h("pre", {}, json(s.output)))
          : null,
        // Over the trace's bound the output is not read back (docs/steps.md "The trace"): its size only.
        s.outputOmitted
          ? h(
              "p",
              { class: "muted", id: `output-omitted-${s.vertexId}` },
              `Output: ${s.outputOmitted.bytes} bytes, over the trace's ${s.outputOmitted.limit}-byte bound — not shown.`,
            )
          : null,
      ),
    ),
  );
}

/** The trace's permit-wait line in the inspector's words (its times in UTC as everywhere here); the trace's own in the title. */
function permitWaitWords(w, waiting) {
  if (!waiting && w.grantedAt && w.since) {
    const seconds = ((Date.parse(w.grantedAt) - Date.parse(w.since)) / 1000).toFixed(1);
    return `waited ${seconds} s for ${w.connector}: ${w.reason}`;
  }
  if (!waiting) return w.text;
  const asks = w.until
    ? Date.parse(w.until) > Date.now()
      ? `; asks again at ${time(w.until)}`
      : `; asking again since ${time(w.until)}`
    : "";
  return `waiting for a permit of ${w.connector} since ${time(w.since)}: ${w.reason}${asks}`;
}

/**
 * A step's wait for a connector's permit (docs/connectors.md "Limits"): the trace's line — "waiting
 * for a permit of demo-limited since …: every permit in flight; asks again at …", or once granted
 * "waited 4.2 s for demo-limited: paused by a 429 at …" — and, while it waits, the connector's state
 * now: in flight of its concurrency, waiting, tokens, paused until, sends held back.
 */
function permitWaitPanel(step, state) {
  const waiting = waitingForPermit(step);
  return h(
    "div",
    { class: waiting ? "permit-wait waiting" : "permit-wait", id: `permit-wait-${step.vertexId}`, "data-waiting": String(waiting) },
    h("p", { id: `permit-line-${step.vertexId}`, title: step.permitWait.text }, permitWaitWords(step.permitWait, waiting)),
    h("p", { class: "muted" }, "Waiting for a permit is not an attempt: no retry is spent and nothing is held while it waits."),
    waiting && state ? connectorStatePanel(step.permitWait.connector, state, `connector-state-${step.vertexId}`) : null,
  );
}

/**
 * A step's undo beside it (docs/steps.md "Compensation"): the undo step's state, place, key, error,
 * attempts (request and response, redacted) and output; or, for a step the compensation leaves as
 * it is, "not compensated" and why.
 */
function undoPanel(step, retryUndo) {
  const u = step.undo;
  if (u.state === "NOT_COMPENSATED") {
    return h("p", { class: "undo-panel not-compensated muted", id: `undo-${step.vertexId}`, "data-state": u.state }, u.reason);
  }
  return h(
    "div",
    { class: "undo-panel", id: `undo-${step.vertexId}`, "data-state": u.state },
    h(
      "h4",
      {},
      `↩ Undo of ${step.vertexId} `,
      badge(u.state),
      h("span", { class: "muted" }, ` ${u.place + 1}. in the compensation's order · attempt ${u.attempt} · epoch ${u.epoch}`),
      u.state === "FAILED" && retryUndo
        ? h("button", { type: "button", id: `action-retry-undo-${step.vertexId}`, onclick: () => retryUndo(u) }, "Retry the undo…")
        : null,
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Undo key"),
      h("dd", { class: "mono key", id: `undo-key-${step.vertexId}` }, u.idempotencyKey ?? "— (not sent yet)"),
      u.finishedAt ? [h("dt", {}, "Finished"), h("dd", {}, time(u.finishedAt))] : null,
    ),
    u.error ? h("p", { class: "err" }, u.error) : null,
    u.attempts.map((a) =>
      h(
        "details",
        { id: `undo-attempt-${step.vertexId}-${a.epoch}` },
        h("summary", {}, `Undo attempt ${a.attempt} · epoch ${a.epoch} · ${a.outcome} — request and response (redacted)`),
        h("h4", {}, "Request"),
        h("pre", {}, json(a.request)),
        h("h4", {}, "Response"),
        h("pre", {}, json(a.response)),
      ),
    ),
    u.output !== null && u.output !== undefined
      ? h("details", { id: `undo-output-${step.vertexId}` }, h("summary", {}, "Undo output"), h("pre", {}, json(u.output)))
      : null,
  );
}

function eventsSection(trace) {
  const events = trace.steps
    .flatMap((s) => [
      ...s.events.map((e) => ({ vertexId: s.vertexId, ...e })),
      ...(undoStepOf(s)?.events ?? []).map((e) => ({ vertexId: `${s.vertexId} ↩ undo`, ...e })),
    ])
    .sort((a, b) => (a.at ?? "").localeCompare(b.at ?? ""));
  return h(
    "section",
    { "aria-labelledby": "events-title" },
    h("h2", { id: "events-title" }, `Events: ${events.length}`),
    events.length === 0
      ? h("p", { class: "muted" }, "No fenced-out write, expired lease, dropped redelivery or operator action.")
      : h(
          "details",
          { id: "events", open: events.length <= 50 },
          h("summary", {}, `${events.length} event${events.length === 1 ? "" : "s"}`),
          h(
            "table",
            { class: "grid" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["At", "Step", "Event", "Epoch", "Detail"].map((t) => h("th", {}, t)),
              ),
            ),
            h(
              "tbody",
              {},
              events.map((e) =>
                h(
                  "tr",
                  { class: `event-${e.type}` },
                  h("td", {}, time(e.at)),
                  h("td", {}, e.vertexId),
                  h("td", {}, e.type),
                  h("td", { class: "num" }, e.epoch ?? "—"),
                  h("td", { class: "err" }, e.detail ?? ""),
                ),
              ),
            ),
          ),
        ),
  );
}
