/**
 * The operator actions — retry a failed step, start over, cancel, and on a failed compensation
 * retry its failed undo or mark it resolved with a note — each behind a confirmation
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
 * `{ name, label }` whose values reach `perform`; `texts` are text fields `{ name, label, required }`
 * whose values reach it too (a required one left empty keeps the dialog open and says so).
 */
export function confirmAction({ id, title, explain, confirmLabel, choices = [], texts = [], perform, done }) {
  let key = newActionKey(id);
  const keyLine = h("p", { class: "muted mono" }, `Idempotency-Key: ${key}`);
  const error = h("p", { class: "error", role: "alert" });
  const boxes = choices.map((c) => h("input", { type: "checkbox", name: c.name, id: `${id}-${c.name}` }));
  const fields = texts.map((t) => h("textarea", { name: t.name, id: `${id}-${t.name}`, rows: 3, maxlength: 2000 }));
  const confirm = h("button", { type: "button", class: "danger", id: `${id}-confirm` }, confirmLabel);
  const close = h("button", { type: "button", id: `${id}-dismiss` }, "Keep as is");
  const dialog = h(
    "dialog",
    { class: "confirm", id: `${id}-dialog`, "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title` }, title),
    explain.map((line) => h("p", {}, line)),
    choices.map((c, i) => h("p", {}, h("label", { class: "check", for: `${id}-${c.name}` }, boxes[i], c.label))),
    texts.map((t, i) => h("p", {}, h("label", { for: `${id}-${t.name}` }, t.label), fields[i])),
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
    const picked = Object.fromEntries([
      ...choices.map((c, i) => [c.name, boxes[i].checked]),
      ...texts.map((t, i) => [t.name, fields[i].value.trim()]),
    ]);
    const missing = texts.find((t) => t.required && !picked[t.name]);
    if (missing) {
      replace(error, `${missing.label}: required.`);
      busy = false;
      confirm.disabled = false;
      return;
    }
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

/** The failed undo of a COMPENSATION_FAILED execution, once more with its same key (docs/steps.md "Compensation"). */
export function retryCompensation(trace, undo, done) {
  return confirmAction({
    id: "retry-compensation",
    title: `Retry the undo of ${undo.undoes}?`,
    explain: [
      `The failed undo runs again as attempt ${undo.attempt + 1}; the execution goes back to COMPENSATING and the undo steps ` +
        "after it run once it completes.",
      undo.idempotencyKey
        ? `It sends the same undo key as before (${undo.idempotencyKey}): a destination that already acted on it replays its ` +
          "first answer instead of refunding twice."
        : "This undo never sent its key: it is computed and kept before its first send.",
    ],
    confirmLabel: "Retry the undo",
    perform: (key) => api("POST", `/v1/executions/${encodeURIComponent(trace.executionId)}/compensation/retry`, { idempotencyKey: key }),
    done,
  });
}

/** Mark a COMPENSATION_FAILED execution's compensation resolved, with a note: it becomes COMPENSATED. */
export function resolveCompensation(trace, done) {
  return confirmAction({
    id: "resolve-compensation",
    title: `Mark the compensation of ${trace.executionId} resolved?`,
    explain: [
      "Say it was settled by hand: the execution becomes COMPENSATED with your note on record, the undo steps not sent " +
        "yet are cancelled (nothing more is sent), and the keys of the steps left undone are burnt — a later send of them " +
        "fails before sending, so the destination never replays an undone call as if it stood.",
    ],
    confirmLabel: "Mark resolved",
    texts: [{ name: "note", label: "Note (what was done, by whom)", required: true }],
    perform: (key, picked) =>
      api("POST", `/v1/executions/${encodeURIComponent(trace.executionId)}/compensation/resolve`, {
        idempotencyKey: key,
        body: { note: picked.note },
      }),
    done,
  });
}
