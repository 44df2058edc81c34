/**
 * A WAIT_FOR_EVENT step on the execution page, from its trace's `wait` (docs/steps.md "The trace
 * of a wait"): what it waits for ("waiting for `payment.confirmed` with match `A-1001`, timeout at
 * …"), the events that arrived on its name and correlation value and what became of each (taken,
 * taken by another wait, buffered, expired; duplicates), the event it took (its output), and — for
 * a wait whose definition declares `decisions` — a person in the loop: one button per decision.
 *
 * A decision is the event itself: `POST /v1/events` `{ name, match, id, data: { decision } }` with
 * an `Idempotency-Key`. The key and the event id are made in the browser once per click; the
 * buttons are disabled while it is in flight (the state lives in the page's view, so a re-render
 * meanwhile keeps them disabled), and an automatic resend after a network error carries the same
 * key and id — so a double click, or a resend, is one event and one resume. The answer (resumed,
 * buffered or deduplicated) or the problem's detail stays under the buttons.
 */
import { h, json, time } from "../lib/dom.js";
import { api, newActionKey } from "../lib/api.js";
import { problemText } from "./actions.js";

/** How each event state reads. A Map: a state the page does not know reads as itself. */
const EVENT_STATES = new Map([
  ["taken", "taken"],
  ["taken-elsewhere", "taken by another wait"],
  ["buffered", "buffered"],
  ["expired", "expired"],
]);

/** Automatic resends of a decision that got no answer (a network error), with the same key and event id. */
const RESENDS = 2;

/** `approve` → "Approve", `needs_info` → "Needs info". */
export function decisionLabel(decision) {
  const words = String(decision).replace(/[_-]+/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The correlation value as text: a string as it is, a number as JSON writes it. */
const matchText = (match) => (typeof match === "string" ? match : JSON.stringify(match));

/** An own member of an object read from JSON (never one reached through its prototype). */
const own = (value, name) => (value !== null && typeof value === "object" && Object.hasOwn(value, name) ? value[name] : undefined);

/** The tag beside the step's name: what a running wait is doing. Null when it is not running. */
export function waitTag(step) {
  const wait = step.wait;
  if (step.state !== "EXECUTING" || !wait || wait.match === null) return null;
  const id = `parked-${step.vertexId}`;
  if (!step.parkedUntil) return h("span", { class: "tag", id }, "resuming: its event arrived, or its timeout passed");
  return h(
    "span",
    { class: "tag", id },
    "waiting for ",
    h("code", {}, wait.event),
    " with match ",
    h("code", {}, matchText(wait.match)),
    `, timeout at ${time(wait.timeoutAt ?? step.parkedUntil)}`,
  );
}

/**
 * The wait's panel. `sending`: this step's decision in flight or its last answer (the view keeps
 * it across re-renders); `onDecide(step, decision)` sends one; `readOnly`: an archived trace.
 */
export function waitPanel(step, { executionId, sending, onDecide, readOnly }) {
  const wait = step.wait;
  const vertexId = step.vertexId;
  const facts = [
    ["Waits for", h("code", {}, wait.event)],
    ["Match", wait.match === null ? "— (not registered yet: computed when the wait starts)" : h("code", {}, matchText(wait.match))],
    ["Consume", wait.consume === "all" ? "all (a broadcast resumes every wait on it)" : "one (the oldest wait takes the event)"],
    ["Registered", time(wait.registeredAt)],
    ["Timeout at", wait.timedOut ? `${time(wait.timeoutAt)} (timed out: no event was taken)` : time(wait.timeoutAt)],
  ];
  return h(
    "div",
    { class: "wait", id: `wait-${vertexId}`, "data-vertex": vertexId },
    h(
      "dl",
      { class: "facts" },
      facts.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
    ),
    tookEvent(step),
    decisionsOf(step, { executionId, sending, onDecide, readOnly }),
    eventsTable(wait.events, vertexId),
  );
}

/** The event the wait took: its output (`{ name, id, match, data, receivedAt }`). */
function tookEvent(step) {
  const output = step.output;
  const eventId = own(output, "id");
  if (step.state !== "COMPLETED" || typeof eventId !== "string") return null;
  return h(
    "div",
    { class: "took", id: `took-${step.vertexId}` },
    h("p", {}, "Took event ", h("code", { class: "event-id" }, eventId), `, received ${time(own(output, "receivedAt"))}`),
    h("pre", { class: "event-data" }, json(own(output, "data") ?? null)),
  );
}

function decisionsOf(step, { executionId, sending, onDecide, readOnly }) {
  const wait = step.wait;
  const open = step.state === "EXECUTING" && wait.match !== null && !wait.timedOut && !readOnly;
  const status = sending ? statusLine(step.vertexId, sending, executionId) : null;
  if (!wait.decisions || (!open && !status)) return null;
  return h(
    "div",
    { class: "decisions", id: `decisions-${step.vertexId}` },
    open
      ? [
          h(
            "p",
            { class: "muted" },
            "A decision sends the event ",
            h("code", {}, wait.event),
            " with match ",
            h("code", {}, matchText(wait.match)),
            " and data { decision }: this wait takes it and the execution goes on.",
          ),
          h(
            "div",
            { class: "buttons" },
            wait.decisions.map((decision) =>
              h(
                "button",
                {
                  type: "button",
                  class: "decision",
                  id: `decide-${step.vertexId}-${decision}`,
                  "data-decision": decision,
                  disabled: sending?.busy === true,
                  onclick: () => onDecide(step, decision),
                },
                decisionLabel(decision),
              ),
            ),
          ),
        ]
      : null,
    status,
  );
}

function statusLine(vertexId, sending, executionId) {
  const id = `decision-${vertexId}`;
  if (sending.busy) return h("p", { class: "muted", id, role: "status" }, `Sending "${sending.decision}"…`);
  if (sending.error) return h("p", { class: "error", id, role: "alert" }, `"${sending.decision}" was not sent: ${sending.error}`);
  const answer = sending.answer ?? {};
  const resumed = Array.isArray(answer.resumed) ? answer.resumed : [];
  let outcome;
  if (answer.deduplicated) outcome = `deduplicated: event ${answer.eventId} was already delivered, nothing was sent twice`;
  else if (resumed.includes(executionId)) outcome = "resumed this execution";
  else if (resumed.length > 0) outcome = `resumed ${resumed.length} other execution${resumed.length === 1 ? "" : "s"}`;
  else outcome = `buffered until ${time(answer.bufferedUntil)}: no wait took it`;
  return h("p", { class: "sent", id, role: "status", "data-outcome": answer.deduplicated ? "deduplicated" : "sent" }, [
    `"${sending.decision}" sent as event `,
    h("code", {}, String(answer.eventId ?? sending.eventId)),
    `: ${outcome}.`,
  ]);
}

function eventsTable(events, vertexId) {
  if (events.length === 0) return h("p", { class: "muted", id: `wait-events-${vertexId}` }, "No event has arrived for this wait.");
  return h(
    "table",
    { class: "grid wait-events", id: `wait-events-${vertexId}` },
    h("caption", {}, `Events on its name and match, newest first${events.length >= 20 ? " (the newest 20)" : ""}: ${events.length}`),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Event id", "Received", "Source", "Duplicates", "State"].map((t) => h("th", {}, t)),
      ),
    ),
    h(
      "tbody",
      {},
      events.map((e) =>
        h(
          "tr",
          { class: "wait-event", "data-event": e.eventId, "data-state": e.state },
          h("td", { class: "mono" }, e.eventId),
          h("td", {}, time(e.receivedAt)),
          h("td", {}, e.source ?? "POST /v1/events"),
          h("td", { class: "num" }, String(e.duplicates)),
          h("td", {}, h("span", { class: `event-state state-${e.state}` }, EVENT_STATES.get(e.state) ?? String(e.state))),
        ),
      ),
    ),
  );
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends `decision` for the wait of `step`. `sendings` is the view's Map of vertex → its decision
 * (in flight, or the last answer); `rerender` draws the page from it, `refresh` reads the trace
 * again. A second call while one is in flight for the step does nothing.
 */
export async function sendDecision(sendings, step, decision, { rerender, refresh }) {
  if (sendings.get(step.vertexId)?.busy) return;
  // Once per click: a resend below (no answer came) carries the same key and the same event id.
  const sending = {
    busy: true,
    decision,
    key: newActionKey(`decide-${decision}`),
    eventId: `inspector-${crypto.randomUUID()}`,
    answer: null,
    error: null,
  };
  sendings.set(step.vertexId, sending);
  rerender();
  const body = { name: step.wait.event, match: step.wait.match, id: sending.eventId, data: { decision } };
  for (let resends = 0; ; resends++) {
    try {
      sending.answer = await api("POST", "/v1/events", { body, idempotencyKey: sending.key });
      break;
    } catch (e) {
      // No answer (a network error): send the same event again, with the same key. An answer (a refusal) is final.
      if (!e?.status && resends < RESENDS) {
        await pause(500 * (resends + 1));
        continue;
      }
      sending.error = problemText(e);
      break;
    }
  }
  sending.busy = false;
  rerender();
  refresh();
}
