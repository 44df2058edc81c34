/**
 * The connectors of the workspace (docs/connectors.md): name, version, base URL, and — live, from
 * `GET /v1/connectors/{name}/state` — each one's limits and flow state: permits in flight of its
 * concurrency, steps waiting for a permit, tokens in its bucket, a shared pause (a 429 or 503 with
 * Retry-After holds every send to it back until then) and the sends its limits held back. Limits
 * are operational, not versioned: editing them changes what every workflow through it obeys at once.
 * Re-read every few seconds while the tab is visible.
 */
import { clock, h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { pollWhileVisible } from "../lib/poll.js";
import { limitsWords, paused, readConnectorStates } from "../lib/connector-state.js";

const REFRESH_MS = 3000;
const COLUMNS = ["Connector", "Version", "Base URL", "Limits", "In flight", "Waiting", "Tokens", "Paused until", "Sends held back"];

export function showConnectors(main) {
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: COLUMNS.length }, "Loading…")));
  const status = h("p", { class: "muted", id: "connectors-status", "aria-live": "polite" });
  replace(
    main,
    h(
      "section",
      {},
      h("h1", {}, "Connectors"),
      h(
        "p",
        { class: "help" },
        "A connector's limits hold every workflow through it: at most so many calls in flight and a rate; a 429 or 503 with " +
          "Retry-After pauses every send to it. A step that finds no permit waits (no attempt spent) and says why on its page.",
      ),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "grid", id: "connectors" },
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
      status,
    ),
  );
  let left = false;
  const refresh = async () => {
    try {
      const page = await api("GET", "/v1/connectors");
      const states = await readConnectorStates(page.items.map((c) => c.name));
      if (left) return;
      if (page.items.length === 0) {
        replace(body, h("tr", {}, h("td", { colspan: COLUMNS.length }, "No connectors yet: PUT /v1/connectors/{name}.")));
        return;
      }
      replace(
        body,
        page.items.map((c) => {
          const s = states.get(c.name);
          const num = (value) => h("td", { class: "num" }, value === null || value === undefined ? "—" : String(value));
          return h(
            "tr",
            { "data-connector": c.name, class: paused(s) ? "paused" : null },
            h("td", { class: "mono" }, c.name),
            h("td", { class: "mono", title: c.version }, String(c.version).slice(0, 12)),
            h("td", { class: "mono" }, c.definition?.baseUrl ?? "—"),
            h("td", {}, s ? limitsWords(s) : "—"),
            h(
              "td",
              { class: "num", "data-field": "inFlight" },
              s?.limited ? `${s.inFlight}${s.concurrency !== null ? ` / ${s.concurrency}` : ""}` : "—",
            ),
            s?.limited ? num(s.waiting) : num(null),
            s?.limited ? num(s.tokens) : num(null),
            h("td", { "data-field": "pausedUntil" }, paused(s) ? `${time(s.pausedUntil)} (${s.pauseReason ?? "paused"})` : "—"),
            h("td", { class: s?.heldBack > 0 ? "num strong" : "num", "data-field": "heldBack" }, s?.limited ? String(s.heldBack) : "—"),
          );
        }),
      );
      replace(status, `Updated ${clock()}; refreshes every ${REFRESH_MS / 1000} s.`);
    } catch (e) {
      if (!left)
        replace(body, h("tr", {}, h("td", { colspan: COLUMNS.length, class: "error" }, `Could not load the connectors: ${e.message}`)));
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
