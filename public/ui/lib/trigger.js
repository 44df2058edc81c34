/**
 * How an execution was started, in words, for the Trigger column and the execution's header.
 *
 * The ledger records `webhook` both for the authenticated `POST /v1/workflows/{id}/trigger` and for
 * the signed public `POST /hooks/{workspace}/{id}` (docs/ingress.md: one identity space, one kind).
 * The page tells them apart where the facts allow: a client idempotency id (`identity: client`) is
 * refused on the public hook, and a version whose entry point declares no `webhook.signature` has
 * no public hook — either way it was the API. Otherwise it says both, never a guess.
 */
import { api } from "./api.js";

const KINDS = {
  test: "test run",
  stream: "stream",
  schedule: "schedule",
  start_over: "start over",
};

/** The pinned definitions read so far, by workflow and version (a version never changes). */
const definitions = new Map();

/** The definition of a workflow version, read once per page load (null if it cannot be read). */
export function definitionOf(workflowId, version) {
  const id = `${workflowId}\u0000${version}`;
  if (!definitions.has(id)) {
    const read = api("GET", `/v1/workflows/${encodeURIComponent(workflowId)}?version=${encodeURIComponent(version)}`)
      .then((wf) => wf?.definition ?? null)
      .catch(() => null);
    definitions.set(id, read);
  }
  return definitions.get(id);
}

/** Whether a version's entry point has a public (signed) hook; undefined when the definition is unknown. */
function hasPublicHook(definition) {
  if (!definition) return undefined;
  const entry = (definition.vertices ?? []).find((v) => v.type === "ENTRY_POINT");
  return Boolean(entry?.config?.webhook?.signature);
}

/** `{ text, title }` for an execution (`trigger`, `identity`) of a version whose definition is `definition` (or unknown). */
export function triggerWords(execution, definition) {
  const kind = execution.trigger;
  if (kind !== "webhook") return { text: KINDS[kind] ?? String(kind), title: `recorded as ${kind}` };
  if (execution.identity === "client" || hasPublicHook(definition) === false) {
    return {
      text: "API trigger",
      title:
        "POST /v1/workflows/{id}/trigger with a bearer token (recorded as webhook; " +
        (execution.identity === "client" ? "a client idempotency id is refused on the public hook)" : "this version has no public hook)"),
    };
  }
  return {
    text: "API trigger or signed webhook",
    title: "POST /v1/workflows/{id}/trigger or the signed POST /hooks/{workspace}/{id}: both are recorded as webhook",
  };
}

/** The words of every execution of a list, once the definitions they need are read. */
export async function triggerWordsOf(executions) {
  const needed = executions.filter((e) => e.trigger === "webhook" && e.identity !== "client");
  const read = await Promise.all(needed.map((e) => definitionOf(e.workflowId, e.version)));
  const byId = new Map(needed.map((e, i) => [e.executionId, read[i]]));
  return new Map(executions.map((e) => [e.executionId, triggerWords(e, byId.get(e.executionId))]));
}
