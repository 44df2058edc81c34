/**
 * src/ledger: the one owner of claim, fence and sweep SQL. Every module here is a set of named
 * single-statement transitions on one table; callers above (HTTP, ingress, steps) never write
 * SQL against these tables themselves.
 */
export * from "./sweep";
export * from "./idempotency-keys";
