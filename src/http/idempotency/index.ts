/**
 * The HTTP Idempotency-Key middleware (SPEC section 6), exported two ways: Hono middleware
 * (`idempotency`) and a framework-free wrapper for a `fetch`-style handler (`withIdempotency`).
 * See docs/ledger.md.
 */
export { idempotency, principalFromContext } from "./hono";
export { withIdempotency } from "./wrapper";
export { DEFAULTS as IDEMPOTENCY_DEFAULTS, type IdempotencyOptions } from "./options";
export { parseIdempotencyKey, IDEMPOTENCY_KEY_HEADER } from "./key";
export { fingerprintRequest } from "./fingerprint";
export { REPLAYED_HEADER } from "./response-store";
export { ledgerCron, idempotencySweepTask } from "./cron";
