/**
 * Every problem ingress answers — production triggers, the public signed hook, test and stream
 * runs, and the start itself. All are raised before the start batch, so each one also means
 * "nothing was recorded" (docs/problems.md says what the client should do).
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";
import { MAX_EXACT_NUMBER, type UnsafeNumber } from "../lib/json-numbers";

export type IngressProblemCode =
  | "force-new-execution-not-allowed"
  | "force-new-execution-invalid"
  | "client-idempotency-id-invalid"
  | "client-idempotency-id-not-signed"
  | "idempotency-fields-need-json"
  | "idempotency-field-missing"
  | "idempotency-field-empty"
  | "json-number-out-of-range"
  | "stored-payload-too-large"
  | "edge-condition-failed"
  | "hook-not-found"
  | "webhook-signature-missing"
  | "webhook-signature-stale"
  | "webhook-signature-version-unsupported"
  | "webhook-signature-invalid"
  | "webhook-secret-missing"
  | "delivery-rejected"
  | "delivery-unavailable";

/** The v1 signing recipe as the refusals spell it out (src/lib/signature-v1.ts, `signedBytesV1`, is the code of it). */
const SCHEME_TEXT = `hex(HMAC-SHA256(secret, "v1:<timestamp>:<workspaceId>:<workflowId>:" + raw body))`;

/** Long literals and pointers are cut in the answer (a body may hold a megabyte of digits). */
const SHOWN_CHARS = 200;
const shorten = (s: string) => (s.length > SHOWN_CHARS ? `${s.slice(0, SHOWN_CHARS)}…` : s);

const quoted = (paths: string[]) => paths.map((p) => `\`${p}\``).join(", ");

/** Every signature refusal shares the title; the code says which check failed. */
const signatureRejected = <Code extends IngressProblemCode>(code: Code, detail: string) =>
  new ProblemError({ status: 401, code, title: "Webhook signature rejected", detail });

export const ingressProblems = {
  forceNewExecutionNotAllowed: () =>
    new ProblemError({
      status: 400,
      code: "force-new-execution-not-allowed",
      title: "forceNewExecution is not allowed on production triggers",
      detail:
        "Production triggers always deduplicate. Remove `forceNewExecution`, or use `POST /v1/workflows/{workflowId}/test-runs` " +
        "to start a fresh execution.",
    }),
  forceNewExecutionInvalid: () =>
    new ProblemError({
      status: 400,
      code: "force-new-execution-invalid",
      title: "forceNewExecution must be true or false",
      detail:
        "Pass `?forceNewExecution=false` to deduplicate this run like a production trigger (in a scope of its own: test and " +
        "stream runs never deduplicate against production or each other), or leave it out.",
    }),
  clientIdInvalid: () =>
    new ProblemError({
      status: 400,
      code: "client-idempotency-id-invalid",
      title: "clientIdempotencyId is invalid",
      detail: "clientIdempotencyId must be 1 to 255 printable ASCII characters.",
    }),
  /** The hook's query is not signed, so it may not choose the identity (src/http/routes/hooks.ts says why). */
  clientIdNotSigned: () =>
    new ProblemError({
      status: 400,
      code: "client-idempotency-id-not-signed",
      title: "clientIdempotencyId is not accepted on a signed hook",
      detail:
        "The query string is not covered by the signature, so it cannot choose the execution identity. Remove " +
        "`clientIdempotencyId`; deduplicate on a signed body field with the entry point's `idempotencyFields` instead.",
    }),
  fieldsNeedJson: (paths: string[]) =>
    new ProblemError({
      status: 415,
      code: "idempotency-fields-need-json",
      title: "This workflow selects idempotencyFields from a JSON body",
      detail:
        `The entry point deduplicates on ${quoted(paths)}, which needs a JSON body: send it with \`content-type: ` +
        `application/json\`, or pass \`clientIdempotencyId\`.`,
      headers: { accept: "application/json" },
    }),
  fieldMissing: (missing: string[]) =>
    new ProblemError({
      status: 422,
      code: "idempotency-field-missing",
      title: "The payload lacks a field this workflow deduplicates on",
      detail:
        `The payload has no value at ${quoted(missing)} (listed in the entry point's idempotencyFields). Include ` +
        `${missing.length === 1 ? "it" : "them"}, or pass \`clientIdempotencyId\`.`,
      extensions: { fields: missing },
    }),
  fieldEmpty: (empty: string[]) =>
    new ProblemError({
      status: 422,
      code: "idempotency-field-empty",
      title: "A field this workflow deduplicates on is empty",
      detail:
        `The value at ${quoted(empty)} (listed in the entry point's idempotencyFields) is empty: an empty or blank string, ` +
        `\`[]\` or \`{}\`. Every delivery with such a value would be one execution. Send the real value, or pass \`clientIdempotencyId\`.`,
      extensions: { fields: empty },
    }),
  /** `where`: a trigger's body, or the payload stored with the execution a start over repeats. */
  numberOutOfRange: (found: UnsafeNumber, where: "body" | "stored") => {
    const literal = shorten(found.literal);
    const what = where === "body" ? "The JSON body" : "The stored payload";
    const subject = found.pointer === "" ? `${what} is \`${literal}\`` : `${what} holds \`${literal}\` at \`${shorten(found.pointer)}\``;
    const why = Number.isFinite(Number(found.literal))
      ? `an integer beyond ±${MAX_EXACT_NUMBER} (2^53 − 1): JSON numbers are 64-bit floats here, which cannot tell it from its ` +
        `neighbours, so two different values would become one identity`
      : "beyond the range of a 64-bit float (it parses as Infinity)";
    const fix =
      where === "body"
        ? `Send it as a JSON string (for example \`"${literal}"\`); numbers up to ±${MAX_EXACT_NUMBER} and fractions are accepted.`
        : "It was stored before idemflow refused such numbers, so it may already be rounded: trigger the workflow again with the " +
          "value as a JSON string instead of starting over.";
    return new ProblemError({
      status: 422,
      code: "json-number-out-of-range",
      title: "A number in the payload cannot be carried exactly",
      detail: `${subject}, ${why}. ${fix}`,
      extensions: { pointer: shorten(found.pointer), number: literal },
    });
  },
  /** The body fits `maxPayloadBytes`, but the JSON it is stored as would not fit D1 (src/ingress/payload.ts). */
  storedPayloadTooLarge: (sizes: { bodyBytes: number; storedBytes: number; limitBytes: number }) =>
    new ProblemError({
      status: 413,
      code: "stored-payload-too-large",
      title: "The payload is too large once stored",
      detail:
        `The body is ${sizes.bodyBytes} bytes, but the payload is stored as JSON, which takes ${sizes.storedBytes} bytes: over the ` +
        `${sizes.limitBytes}-byte limit on a stored payload (what a D1 row can hold). A body that is not JSON is stored as text, ` +
        'where a control character takes 6 bytes (`\\u0001`) and `"` or `\\` two, or as base64 (4 bytes per 3) when it is not ' +
        "UTF-8; a JSON body is stored with every number in full (`1e15` takes 16 bytes). Send a smaller body.",
      extensions: sizes,
    }),
  edgeConditionFailed: (reason: string) =>
    new ProblemError({
      status: 422,
      code: "edge-condition-failed",
      title: "An edge condition of the entry point failed on this payload",
      detail:
        `Evaluating the \`when\` of an edge leaving the entry point failed: ${reason}. Fix the payload or the workflow's ` +
        `edge expression.`,
    }),
  /** The same answer for a workflow that does not exist and one without a public hook. */
  hookNotFound: () =>
    new ProblemError({
      status: 404,
      code: "hook-not-found",
      title: "No public hook here",
      detail:
        "Public hooks exist only for workflows whose ENTRY_POINT declares `webhook.signature`. Use the authenticated `POST " +
        "/v1/workflows/{workflowId}/trigger` otherwise.",
    }),
  signatureMissing: (header: string, timestampHeader: string) =>
    signatureRejected(
      "webhook-signature-missing",
      `Send \`${header}: v1=<hex>\` (<hex> = ${SCHEME_TEXT}) and the Unix timestamp (seconds) in \`${timestampHeader}\`.`,
    ),
  /** `scheme`: the label the sender used, or `undefined` when the signature had none. */
  signatureVersionUnsupported: (scheme: string | undefined, header: string) => {
    const what = scheme === undefined ? "the signature has no scheme version" : `scheme "${scheme}" is not supported`;
    return signatureRejected(
      "webhook-signature-version-unsupported",
      `${what}: send \`${header}: v1=<hex>\` where <hex> = ${SCHEME_TEXT} (docs/ingress.md, "Signed webhooks").`,
    );
  },
  signatureStale: (timestampHeader: string, toleranceSeconds: number) =>
    signatureRejected(
      "webhook-signature-stale",
      `The timestamp in \`${timestampHeader}\` must be Unix seconds within ${toleranceSeconds} s of now; sign again with the current time.`,
    ),
  signatureInvalid: () =>
    signatureRejected(
      "webhook-signature-invalid",
      `The signature does not match: send \`v1=\` + ${SCHEME_TEXT}, signed for this hook's workspace and workflow.`,
    ),
  /** Generic on purpose: the hook is unauthenticated, so the secret's name and the reason go only to the log (signature.ts). */
  secretMissing: () =>
    new ProblemError({
      status: 503,
      code: "webhook-secret-missing",
      title: "The webhook is not configured",
      detail: "The hook is not configured; the operator has been told. Retry later.",
    }),
  /**
   * The public routes' one answer to an anonymous caller refused before its signature proved it
   * holds the secret (src/http/public-answer.ts): an unknown workspace, workflow or event source, a
   * hook without a signature config, and every signature refusal look alike; the reason is logged.
   */
  deliveryRejected: () =>
    new ProblemError({
      status: 401,
      code: "delivery-rejected",
      title: "Delivery not accepted",
      detail:
        "No public hook or event source at this address accepts this delivery: the address, the signing secret or the " +
        "signature headers are wrong. Nothing was recorded. The deployment's log (`public.refused`) says which.",
    }),
  /** The public routes' answer when the deployment cannot take the delivery now (names no workspace, shard or secret). */
  deliveryUnavailable: (retryAfter: string) =>
    new ProblemError({
      status: 503,
      code: "delivery-unavailable",
      title: "Deliveries cannot be taken here right now",
      detail: "The deployment cannot take this delivery at the moment; nothing was recorded. Retry later (the operator is told).",
      headers: { "retry-after": retryAfter },
    }),
} satisfies ProblemCatalog<IngressProblemCode>;
