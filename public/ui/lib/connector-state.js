/**
 * A connector's live flow state (docs/connectors.md "Limits"): `GET /v1/connectors/{name}/state` —
 * its limits, the permits in flight, the steps waiting for one, the tokens in its bucket, a shared
 * pause (a 429 or 503 with Retry-After holds every send back until then) and how many sends its
 * limits held back. Read live, beside the versioned definition; shown on the execution page (a
 * waiting step's connector), the connectors page and the overview's "sends held back".
 */
import { h, time } from "./dom.js";
import { api } from "./api.js";

/** The states of `names` (each one request; a connector that cannot be read is left out). */
export async function readConnectorStates(names) {
  const states = new Map();
  await Promise.all(
    [...new Set(names)].map(async (name) => {
      const state = await api("GET", `/v1/connectors/${encodeURIComponent(name)}/state`).catch(() => null);
      if (state) states.set(name, state);
    }),
  );
  return states;
}

/** A rate in words: "20/s (burst 20)". */
export const rateWords = (rate) => (rate ? `${rate.count}/${rate.per} (burst ${rate.burst})` : null);

/** The limits in words: "5 in flight, 20/s (burst 20)"; "no limits". */
export function limitsWords(state) {
  if (!state?.limited) return "no limits";
  return [state.concurrency !== null ? `${state.concurrency} in flight` : null, rateWords(state.rate)].filter(Boolean).join(", ");
}

/** Is the connector's shared pause on now? */
export const paused = (state) => Boolean(state?.pausedUntil) && new Date(state.pausedUntil).getTime() > Date.now();

/**
 * The state as facts (label, value, id suffix): in flight of its concurrency, waiting, tokens of
 * its burst, paused until (and why), sends held back.
 */
export function stateFacts(state) {
  if (!state?.limited) return [["Limits", "none: every step through it sends at once", "limits"]];
  return [
    ["Limits", limitsWords(state), "limits"],
    ["In flight", state.concurrency !== null ? `${state.inFlight} of ${state.concurrency}` : String(state.inFlight), "in-flight"],
    ["Waiting for a permit", String(state.waiting), "waiting"],
    ["Tokens", state.tokens === null ? "— (no rate)" : `${state.tokens} of ${state.rate?.burst ?? "—"}`, "tokens"],
    ["Paused until", paused(state) ? `${time(state.pausedUntil)} (${state.pauseReason ?? "a shared pause"})` : "— (not paused)", "paused"],
    ["Sends held back", String(state.heldBack), "held-back"],
  ];
}

/** A connector's state as a small panel (`id`: the element's id; its facts' ids end with their suffix). */
export function connectorStatePanel(name, state, id) {
  return h(
    "div",
    { class: paused(state) ? "connector-state paused" : "connector-state", id, "data-connector": name },
    h("h4", {}, `${name} now`),
    h(
      "dl",
      { class: "facts" },
      stateFacts(state).map(([label, value, suffix]) => [h("dt", {}, label), h("dd", { id: `${id}-${suffix}` }, value)]),
    ),
  );
}
