/**
 * The page of an execution whose rows are gone and whose trace cannot be read: the 404
 * `execution-not-retained` problem of `GET /v1/executions/{id}` (docs/problems.md), said in full —
 * what was removed, when, by what (an erasure on request, or the history sweep after the retention
 * of its final status), what remains (its tombstone's facts: `problem.tombstone`) and where the
 * docs say more. Every time in UTC, like the rest of the inspector.
 */
import { badge, duration, h, time } from "../lib/dom.js";

const DOCS = {
  erased: "docs/history-archive.md, “Erasure” and “What an erasure removes, and what it does not”",
  retention: "docs/history.md, “Retention” and “Tombstones and ids”; docs/history-archive.md for the archive",
};

/** The retention var of a final status (docs/history.md): a compensated execution is kept as long as a failed one. */
const RETENTION_VAR = {
  COMPLETED: "HISTORY_COMPLETED (7d)",
  FAILED: "HISTORY_FAILED (30d)",
  CANCELLED: "HISTORY_CANCELLED (30d)",
  COMPENSATED: "HISTORY_FAILED (30d)",
  COMPENSATION_FAILED: "HISTORY_FAILED (30d)",
};

export function removedPage(executionId, problem) {
  const t = problem.tombstone ?? null;
  const erased = problem.reason === "erased";
  const when = time(problem.removedAt);
  const status = t?.status ?? null;
  const kept = t?.finishedAt && problem.removedAt ? Date.parse(problem.removedAt) - Date.parse(t.finishedAt) : null;

  const how = erased
    ? [
        `Erased on request on ${when}: a DELETE /v1/executions/${executionId} sent with this workspace's token. `,
        "Who sent it is not recorded by idemflow (the request's Idempotency-Key answer is kept 24 hours).",
      ]
    : [
        `Removed by the history sweep on ${when}, once the retention of a ${status ?? "finished"} execution had passed`,
        kept !== null ? ` (${duration(kept)} after it finished)` : "",
        `: ${status ? RETENTION_VAR[status] : "HISTORY_COMPLETED, HISTORY_FAILED or HISTORY_CANCELLED"}, `,
        "or the workflow's own `history` if it sets a longer one.",
      ];
  const gone = erased
    ? [
        "the trigger payload and every duplicate it absorbed",
        "every step, its output, request and error; every attempt's request and response; every step event",
        "its waits and the events only it took (blanked to a payload-free record)",
        "its archived trace, if it had one",
        "every execution of its start-over or reuse chain, the same way",
      ]
    : [
        "the trigger payload, every step, attempt and event (the same rows an erasure removes)",
        problem.archived ? "its archived trace exists but cannot be read here (the detail above says why)" : "its trace was not archived",
      ];
  const facts = t
    ? [
        ["Workflow", h("a", { href: `#/executions?workflowId=${encodeURIComponent(t.workflowId)}` }, t.workflowId)],
        ["Final status", badge(t.status)],
        ["Created", time(t.createdAt)],
        ["Finished", time(t.finishedAt)],
        [erased ? "Erased" : "Removed", time(t.removedAt)],
        ["Reason", erased ? "erased on request" : "retention"],
        ["Archived trace", t.archived ? "yes" : "no"],
      ]
    : [
        ["Removed", when],
        ["Reason", erased ? "erased on request" : "retention"],
      ];
  return h(
    "article",
    { class: "execution removed", id: "removed-execution", "data-reason": problem.reason ?? "" },
    h("h1", {}, "Execution ", h("span", { class: "mono" }, executionId), " ", badge(erased ? "ERASED" : "REMOVED")),
    h("p", { id: "removed-how", role: "status" }, how),
    problem.detail ? h("p", { class: "muted", id: "removed-detail" }, problem.detail) : null,
    h("h2", {}, "What was removed"),
    h(
      "ul",
      { id: "removed-what" },
      gone.map((line) => h("li", {}, line)),
    ),
    h("h2", {}, "What remains: its tombstone"),
    h(
      "dl",
      { class: "facts", id: "removed-tombstone" },
      facts.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
    ),
    h(
      "p",
      { class: "muted" },
      "The tombstone holds no payload; it keeps the id from being given to another run and goes after as long again as the " +
        "execution's retention. Guarded destination key sends stay too, so the same business data is not sent twice.",
    ),
    h("p", { id: "removed-docs" }, "More in the repository: ", h("code", {}, erased ? DOCS.erased : DOCS.retention), "."),
  );
}
