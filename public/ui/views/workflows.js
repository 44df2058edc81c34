/**
 * The workflows of the workspace: id, latest version, how the entry point identifies a delivery
 * (its identity kind), schedule. One `GET /v1/workflows`, then each workflow's latest definition.
 */
import { h, replace, time } from "../lib/dom.js";
import { api } from "../lib/api.js";

/** How an entry point names a delivery, in words (SPEC section 3). */
export function identityOf(definition) {
  const entry = definition?.vertices?.find((v) => v.type === "ENTRY_POINT");
  const config = entry?.config ?? {};
  const kinds = [];
  if (config.idempotencyFields) kinds.push(`fields: ${[config.idempotencyFields].flat().join(", ")}`);
  if (config.schedule) kinds.push("schedule: one execution per scheduled minute");
  if (kinds.length === 0) kinds.push("client: the trigger's Idempotency-Key, else content: the payload's hash");
  if (config.webhook) kinds.push("webhook signature checked");
  return kinds.join("; ");
}

export function showWorkflows(main) {
  const body = h("tbody", {}, h("tr", {}, h("td", { colspan: 5 }, "Loading…")));
  replace(
    main,
    h(
      "section",
      {},
      h("h1", {}, "Workflows"),
      h(
        "table",
        { class: "grid", id: "workflows" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Workflow", "Latest version", "Entry point identity", "Schedule", "Updated"].map((t) => h("th", {}, t)),
          ),
        ),
        body,
      ),
    ),
  );
  let left = false;
  void (async () => {
    try {
      const page = await api("GET", "/v1/workflows?limit=100");
      const details = await Promise.all(
        page.items.map((w) => api("GET", `/v1/workflows/${encodeURIComponent(w.workflowId)}`).catch(() => null)),
      );
      if (left) return;
      if (page.items.length === 0) return replace(body, h("tr", {}, h("td", { colspan: 5 }, "No workflows yet: PUT /v1/workflows/{id}.")));
      replace(
        body,
        page.items.map((w, i) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `#/executions?workflowId=${encodeURIComponent(w.workflowId)}` }, w.workflowId)),
            h("td", { class: "mono" }, w.latestVersion),
            h("td", {}, details[i] ? identityOf(details[i].definition) : "—"),
            h("td", { class: "mono" }, w.schedule ?? "—"),
            h("td", {}, time(w.updatedAt)),
          ),
        ),
      );
    } catch (e) {
      if (!left) replace(body, h("tr", {}, h("td", { colspan: 5, class: "error" }, `Could not load the workflows: ${e.message}`)));
    }
  })();
  return {
    leave() {
      left = true;
    },
  };
}
