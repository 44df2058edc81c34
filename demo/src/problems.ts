/**
 * The problems only the demo destinations answer (docs/problems.md, "Demo destinations"). They are
 * the pretend third parties' own cases, prefixed `demo-`; the body and 500 cases are the engine's
 * (src/lib/common-problems.ts), so a workflow sees the same codes from both.
 */
import { ProblemError, type ProblemCatalog } from "../../src/lib/problem";

export type DemoProblemCode =
  | "demo-fault-after-commit"
  | "demo-fault-invalid"
  | "demo-unauthorized"
  | "demo-charge-invalid"
  | "demo-body-not-object"
  | "demo-legacy-external-id-missing"
  | "demo-legacy-duplicate"
  | "demo-checkout-key-invalid"
  | "demo-checkout-key-reused";

export const demoProblems = {
  /** The answer an armed fault puts in place of the real one, after the work was done. */
  faultAfterCommit: (faultId: number) =>
    new ProblemError({
      status: 502,
      code: "demo-fault-after-commit",
      title: "Bad gateway (injected fault)",
      detail:
        `The demo destination did the work and then dropped its answer, as armed by POST /faults (fault ${faultId}). Retry ` +
        `with the same Idempotency-Key: the destination replays the stored answer instead of doing the work again.`,
      headers: { "x-demo-fault": "after-commit" },
    }),
  faultInvalid: (errors: string[]) =>
    new ProblemError({ status: 422, code: "demo-fault-invalid", title: "Invalid fault", detail: errors.join("; ") }),
  unauthorized: () =>
    new ProblemError({
      status: 401,
      code: "demo-unauthorized",
      title: "Missing API key",
      detail:
        "Send `Authorization: Bearer <key>`; any non-empty key is accepted by the demo (the example workflow sends the " +
        "PAYMENTS_KEY secret).",
    }),
  chargeInvalid: () =>
    new ProblemError({
      status: 422,
      code: "demo-charge-invalid",
      title: "Invalid charge",
      detail: "`amount` must be a non-negative number.",
    }),
  bodyNotObject: () =>
    new ProblemError({
      status: 422,
      code: "demo-body-not-object",
      title: "Body must be a JSON object",
      detail: 'Send a JSON object, e.g. {"order": "A-1001", "amount": 42}.',
    }),
  legacyExternalIdMissing: () =>
    new ProblemError({
      status: 422,
      code: "demo-legacy-external-id-missing",
      title: "external_id is required",
      detail: "Send a JSON object with a non-empty `external_id` (string or number).",
    }),
  legacyDuplicate: (externalId: string) =>
    new ProblemError({
      status: 409,
      code: "demo-legacy-duplicate",
      title: "An order with this external_id exists",
      detail: `external_id ${JSON.stringify(externalId)} was already created. GET /legacy/orders?external_id=… to read it.`,
    }),
  checkoutKeyInvalid: (maxLength: number, length: number | null) =>
    new ProblemError({
      status: 422,
      code: "demo-checkout-key-invalid",
      title: "Invalid idempotency_key",
      detail:
        `The body field \`idempotency_key\` must be a string of 1-${maxLength} characters` +
        (length === null ? "; it is missing or not a string." : `; it has ${length}.`),
    }),
  checkoutKeyReused: () =>
    new ProblemError({
      status: 422,
      code: "demo-checkout-key-reused",
      title: "idempotency_key reused",
      detail: "This idempotency_key was already used for a different request; a new payment needs a new key.",
    }),
} satisfies ProblemCatalog<DemoProblemCode>;
