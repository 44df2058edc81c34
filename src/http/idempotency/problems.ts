/**
 * Every problem the Idempotency-Key middleware answers, one stable `code` per case
 * (docs/problems.md lists them). The middleware returns these as responses itself, so it works
 * in apps that do not share idemflow's error handler.
 */
import { ProblemError, type ProblemCatalog } from "../../lib/problem";

export type IdempotencyProblemCode =
  | "idempotency-key-missing"
  | "idempotency-key-invalid"
  | "idempotency-key-mismatch"
  | "idempotency-key-in-progress"
  | "idempotency-key-lost"
  | "idempotency-ledger-unavailable"
  | "idempotency-ledger-error"
  | "idempotency-response-too-large";

export const idempotencyProblems = {
  missing: () =>
    new ProblemError({
      status: 400,
      code: "idempotency-key-missing",
      title: "Idempotency-Key header required",
      detail:
        "This endpoint requires an `Idempotency-Key` header: send a unique value (e.g. a UUID) per operation, and the same value " +
        "when you retry it.",
    }),
  invalid: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "idempotency-key-invalid",
      title: "Invalid Idempotency-Key header",
      detail:
        `The Idempotency-Key header is invalid: ${reason}. Send 1–255 printable ASCII characters, bare or as an RFC 8941 ` +
        `quoted string.`,
    }),
  mismatch: (status: 422 | 409) =>
    new ProblemError({
      status,
      code: "idempotency-key-mismatch",
      title: "Idempotency-Key reused for a different request",
      detail:
        "This key was already used with a different request (method, path, query, content-type or body bytes). Retry with exactly " +
        "the same request, or use a new key for a new operation.",
    }),
  inProgress: (retryAfterSeconds: number) =>
    new ProblemError({
      status: 409,
      code: "idempotency-key-in-progress",
      title: "A request with this Idempotency-Key is in progress",
      detail:
        `The first request with this key has not finished yet. Retry the same request after ${retryAfterSeconds} s to get ` + `its result.`,
      headers: { "retry-after": String(retryAfterSeconds) },
    }),
  lost: () =>
    new ProblemError({
      status: 409,
      code: "idempotency-key-lost",
      title: "The Idempotency-Key record changed while it was being read",
      detail: "The record of this key disappeared while the request was being admitted (it expired and was swept). Retry the same request.",
      headers: { "retry-after": "1" },
    }),
  tableMissing: () =>
    new ProblemError({
      status: 503,
      code: "idempotency-ledger-unavailable",
      title: "The Idempotency-Key ledger is not provisioned",
      detail:
        "The D1 table `idempotency_keys` does not exist. Apply the migrations: `npx wrangler d1 migrations apply <database> " +
        "--local` (or `--remote` in production).",
    }),
  ledgerError: () =>
    new ProblemError({
      status: 503,
      code: "idempotency-ledger-error",
      title: "The Idempotency-Key ledger could not be reached",
      detail: "The request was not executed because its key could not be recorded. Retry the same request with the same key.",
      headers: { "retry-after": "1" },
    }),
  responseTooLarge: (limitBytes: number) =>
    new ProblemError({
      status: 500,
      code: "idempotency-response-too-large",
      title: "The original response was too large to store",
      detail:
        `The request with this key DID run, but its response body exceeded ${limitBytes} bytes and was not kept, so it ` +
        `cannot be replayed. Look the result up through the API; do not re-send with a new key unless you want the operation twice.`,
    }),
} satisfies ProblemCatalog<IdempotencyProblemCode>;

/** D1 reports a missing table as an SQLite error whose message contains "no such table". */
export function isMissingTableError(error: unknown): boolean {
  return error instanceof Error && /no such table/i.test(error.message);
}
