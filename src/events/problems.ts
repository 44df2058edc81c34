/**
 * Every problem the events routes answer (SPEC section 14). All are raised before the delivery
 * batch: each also means "nothing was recorded" (docs/problems.md).
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type EventProblemCode =
  | "event-invalid"
  | "event-source-not-found"
  | "event-source-invalid"
  | "event-extract-failed"
  | "event-signature-missing"
  | "event-signature-stale"
  | "event-signature-invalid"
  | "event-source-unavailable";

/**
 * How a sender signs for an event source, as the refusals spell it out (src/events/source-signature.ts
 * is the code of it): v1 is the hooks' recipe with the target `<workspace>:events/<source>`.
 */
export const SOURCE_SIGNING_TEXT = {
  v1:
    '`x-idemflow-signature: v1=<hex>` with <hex> = hex(HMAC-SHA256(secret, "v1:<timestamp>:<workspace>:events/<source>:" + raw body)) ' +
    "and `x-idemflow-timestamp: <Unix seconds>`",
  "standard-webhooks":
    "`webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<base64>` with <base64> = " +
    'base64(HMAC-SHA256(base64-decoded secret after `whsec_`, "<webhook-id>.<webhook-timestamp>." + raw body)) (Standard Webhooks)',
} as const;
export type SourceScheme = keyof typeof SOURCE_SIGNING_TEXT;

/** Every signature refusal of an event source shares the title; the code says which check failed. */
const sourceSignatureRejected = <Code extends EventProblemCode>(code: Code, detail: string) =>
  new ProblemError({ status: 401, code, title: "Event signature rejected", detail: `${detail} Nothing was recorded.` });

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
  signatureMissing: (scheme: SourceScheme) =>
    sourceSignatureRejected("event-signature-missing", `This event source verifies ${scheme}: send ${SOURCE_SIGNING_TEXT[scheme]}.`),
  signatureStale: (scheme: SourceScheme, timestampHeader: string, toleranceSeconds: number) =>
    sourceSignatureRejected(
      "event-signature-stale",
      `The timestamp in \`${timestampHeader}\` must be Unix seconds within ${toleranceSeconds} s of now (scheme ${scheme}); ` +
        "sign again with the current time.",
    ),
  signatureInvalid: (scheme: SourceScheme) =>
    sourceSignatureRejected(
      "event-signature-invalid",
      `The signature does not match: send ${SOURCE_SIGNING_TEXT[scheme]}, signed with this event source's secret.`,
    ),
  /** Generic on purpose: the route is unauthenticated, so the secret's name and the reason go only to the log. */
  sourceUnavailable: () =>
    new ProblemError({
      status: 503,
      code: "event-source-unavailable",
      title: "The event source is not configured",
      detail: "The event source cannot verify deliveries yet; the operator has been told. Nothing was recorded; retry later.",
      headers: { "retry-after": "60" },
    }),
} satisfies ProblemCatalog<EventProblemCode>;
