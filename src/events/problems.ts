/**
 * Every problem the events routes answer (SPEC section 14). All are raised before the delivery
 * batch: each also means "nothing was recorded" (docs/problems.md).
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type EventProblemCode = "event-invalid" | "event-source-not-found" | "event-source-invalid" | "event-extract-failed";

export const eventProblems = {
  invalid: (pointer: string, detail: string) =>
    new ProblemError({
      status: 422,
      code: "event-invalid",
      title: "The event cannot be delivered",
      detail: `${pointer}: ${detail}. Nothing was recorded; correct the event and send it again`,
      extensions: { pointer },
    }),
  sourceNotFound: (name: string) =>
    new ProblemError({
      status: 404,
      code: "event-source-not-found",
      title: "No such event source",
      detail: `this workspace has no event source "${name}"; create it with PUT /v1/event-sources/${name}`,
    }),
  sourceInvalid: (errors: Array<{ pointer: string; message: string }>) =>
    new ProblemError({
      status: 422,
      code: "event-source-invalid",
      title: "The event source is not valid",
      detail: errors.map((e) => `${e.pointer || "/"}: ${e.message}`).join("; "),
      extensions: { errors },
    }),
  extractFailed: (source: string, member: string, detail: string) =>
    new ProblemError({
      status: 422,
      code: "event-extract-failed",
      title: "The event source could not read the webhook",
      detail: `event source "${source}": \`${member}\` ${detail}. Nothing was recorded; the sender may retry once the source is corrected`,
      extensions: { member },
    }),
} satisfies ProblemCatalog<EventProblemCode>;
