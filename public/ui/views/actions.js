/**
 * The operator actions — retry a failed step, start over, cancel — each behind a confirmation
 * that says what it does to side effects. The `Idempotency-Key` is generated here, in the
 * browser, once per confirmation: the confirm button is disabled while its request runs, and if
 * the request is sent again (a double click that got through, a retry after a network error) it
 * carries the same key, so the engine's Idempotency-Key ledger acts once and replays the answer.
 */
import { h, replace } from "../lib/dom.js";
import { api, newActionKey } from "../lib/api.js";

/**
 * A modal confirmation (`<dialog>`: focus moves into it, Escape closes it, Tab stays inside).
 * `perform(key, choices)` sends the request; its result goes to `done`. `choices` are checkboxes
 * `{ name, label }` whose values reach `perform`.
 */
export function confirmAction({ id, title, explain, confirmLabel, choices = [], perform, done }) {
  let key = newActionKey(id);
  const keyLine = h("p", { class: "muted mono" }, `Idempotency-Key: ${key}`);
  const error = h("p", { class: "error", role: "alert" });
  const boxes = choices.map((c) => h("input", { type: "checkbox", name: c.name, id: `${id}-${c.name}` }));
  const confirm = h("button", { type: "button", class: "danger", id: `${id}-confirm` }, confirmLabel);
  const close = h("button", { type: "button", id: `${id}-dismiss` }, "Keep as is");
  const dialog = h(
    "dialog",
    { class: "confirm", id: `${id}-dialog`, "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title` }, title),
    explain.map((line) => h("p", {}, line)),
    choices.map((c, i) => h("p", {}, h("label", { class: "check", for: `${id}-${c.name}` }, boxes[i], c.label))),
    keyLine,
    error,
    h("div", { class: "buttons" }, close, confirm),
  );
  let busy = false;
  confirm.addEventListener("click", async () => {
    if (busy) return;
    busy = true;
    confirm.disabled = true;
    replace(error);
    const picked = Object.fromEntries(choices.map((c, i) => [c.name, boxes[i].checked]));
    try {
      const result = await perform(key, picked);
      dialog.close();
      dialog.remove();
      done?.(result);
    } catch (e) {
      // No answer (a network error): the same key is kept, so sending again replays or finishes the one
      // action. An answer (a refusal) was final for that key: a changed request needs a new one.
      if (e?.status) {
        key = newActionKey(id);
        replace(keyLine, `Idempotency-Key: ${key}`);
      }
      replace(error, problemText(e));
      busy = false;
      confirm.disabled = false;
    }
  });
  close.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => dialog.remove());
  document.body.appendChild(dialog);
  dialog.showModal();
  close.focus();
  return dialog;
}

/** A refusal in words: the problem's detail, and its code for the docs (docs/problems.md). */
export function problemText(e) {
  const code = e?.problem?.code ? ` (${e.problem.code})` : "";
  return `${e?.message ?? String(e)}${code}`;
}

export function cancelExecution(trace, done) {
  const running = trace.steps.filter((s) => s.state === "EXECUTING");
  return confirmAction({
    id: "cancel",
    title: `Cancel execution ${trace.executionId}?`,
    explain: [
      "Steps that have not started will never run, and every later write of a running step is fenced out.",
      running.length > 0
        ? `Running now: ${running.map((s) => s.vertexId).join(", ")}. A call already sent cannot be recalled: it may still ` +
          "take effect at its destination. Its key stays on record, so a start over sends the same key and the destination replays."
        : "No step is running now, so no call is in flight.",
      "Nothing that already happened is undone.",
    ],
    confirmLabel: "Cancel the execution",
    choices: [{ name: "releaseIdentity", label: "Also release the trigger identity (a re-sent trigger then starts a new execution)" }],
    perform: (key, picked) =>
      api("POST", `/v1/executions/${encodeURIComponent(trace.executionId)}/cancel`, {
        idempotencyKey: key,
        body: picked.releaseIdentity ? { releaseIdentity: true } : {},
      }),
    done,
  });
}

export function startOver(trace, done) {
  return confirmAction({
    id: "start-over",
    title: `Start execution ${trace.executionId} over?`,
    explain: [
      "A new execution runs the same payload on the same pinned workflow version.",
      "Its Gateway steps compute the same destination keys from the same business data, so a destination that still " +
        "remembers a key replays its first answer instead of acting twice. Past a destination's key retention it may act again.",
    ],
    confirmLabel: "Start over",
    perform: (key) => api("POST", `/v1/executions/${encodeURIComponent(trace.executionId)}/start-over`, { idempotencyKey: key }),
    done,
  });
}

export function retryStep(trace, step, done) {
  const keyNote = step.idempotencyKey
    ? `It sends the same destination key as before (${step.idempotencyKey}): a destination that remembers it replays its ` +
      "first answer instead of acting twice."
    : "This step has no destination key on record: if its destination acted before failing, it may act again.";
  return confirmAction({
    id: `retry-${step.vertexId}`,
    title: `Retry step ${step.vertexId}?`,
    explain: [`The failed step runs again as attempt ${step.attempt + 1}, then the steps after it.`, keyNote],
    confirmLabel: "Retry the step",
    choices: step.destinationKey?.retentionMs
      ? [{ name: "acknowledgeForgottenKey", label: "I checked the destination: send even if its key retention has passed" }]
      : [],
    perform: (key, picked) =>
      api("POST", `/v1/executions/${encodeURIComponent(trace.executionId)}/steps/${encodeURIComponent(step.vertexId)}/retry`, {
        idempotencyKey: key,
        body: picked.acknowledgeForgottenKey ? { acknowledgeForgottenKey: true } : {},
      }),
    done,
  });
}
