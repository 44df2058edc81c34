/**
 * The Idempotency-Key algorithm, framework-free. `hono.ts` and `wrapper.ts` adapt it.
 *
 *   parse key → derive principal → read body bytes once → fingerprint →
 *   claim-or-load (1 statement) →
 *     claimed:   run handler → complete (fenced)   | threw, declined or body unreadable → release (fenced)
 *     existing:  mismatch 422/409 | pending 409 + Retry-After | completed → replay
 *
 * Request-path round trips: first execution 2 (claim, complete); replay, mismatch and
 * in-progress 1; stale takeover 2 (the claim statement does the takeover, then complete).
 */
import { claimOrLoad, completeIfOwned, releaseIfOwned, type FenceInput } from "../../ledger";
import type { ProblemError } from "../../lib/problem";
import { commonProblems } from "../../lib/common-problems";
import { BodyTooLargeError, readAtMost } from "../../lib/bounded-read";
import { fingerprintRequest } from "./fingerprint";
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from "./key";
import { GUARDED_METHODS, type ResolvedOptions } from "./options";
import { clockOf } from "../../lib/clock";
import { idempotencyProblems, isMissingTableError } from "./problems";
import { captureResponse, replayResponse } from "./response-store";
import type { WaitUntil } from "./sweeper";
import type { Context } from "hono";
import { log } from "../../lib/log";

export interface HandlerResult {
  response: Response;
  /** The handler threw (and a framework already turned that into `response`). */
  failed: boolean;
}

export interface GuardCall {
  request: Request;
  env: unknown;
  waitUntil: WaitUntil | undefined;
  /** Hono's context, handed to the principal function. */
  context?: Context;
  /** Runs the downstream handler on the given request. May throw: the reservation is released. */
  execute: (request: Request) => Promise<HandlerResult>;
  maybeSweep: (db: D1Database, now: number, waitUntil: WaitUntil | undefined) => boolean;
}

export async function guard(options: ResolvedOptions, call: GuardCall): Promise<Response> {
  const { request } = call;
  const method = request.method.toUpperCase();
  if (!GUARDED_METHODS.has(method)) return (await call.execute(request)).response;

  const header = request.headers.get(IDEMPOTENCY_KEY_HEADER);
  if (header === null) {
    if (options.required) return respond(idempotencyProblems.missing());
    return (await call.execute(request)).response;
  }
  const parsed = parseIdempotencyKey(header);
  if (!parsed.ok) return respond(idempotencyProblems.invalid(parsed.reason));

  const principal = await options.principal(request, call.env, call.context);
  if (typeof principal !== "string" || principal.length === 0) {
    // A misconfigured server, never the client's fault: fail closed.
    throw new Error("idempotency(): the principal function returned no principal; mount the middleware after authentication");
  }
  const db = options.database(call.env, principal);
  if (!db) throw new Error("idempotency(): no D1 database (bind it as DB or pass the `database` option)");

  // The body is read exactly once, as bytes; the handler gets a request rebuilt from them.
  if (request.bodyUsed) {
    // Decoded text cannot give back the raw bytes, so fingerprinting it would be wrong.
    throw new Error("idempotency(): the request body was already read; mount the middleware before anything that reads the body");
  }
  // Bounded: an unbounded read here would buffer any size of body, and hash it, before the
  // route's own 413 could run.
  let body: Uint8Array | null = null;
  if (request.body !== null) {
    try {
      body = await readAtMost(request.body, request.headers.get("content-length"), options.maxBodyBytes);
    } catch (error) {
      if (error instanceof BodyTooLargeError) return respond(commonProblems.payloadTooLarge(options.maxBodyBytes));
      throw error;
    }
  }
  const fingerprint = await fingerprintRequest({
    method,
    url: request.url,
    headers: request.headers,
    headerNames: options.fingerprintHeaders,
    body,
  });

  const clock = options.now ?? clockOf(call.env as object);
  const now = clock();
  const claimToken = crypto.randomUUID();
  let outcome;
  try {
    outcome = await claimOrLoad(db, {
      principal,
      key: parsed.key,
      fingerprint,
      claimToken,
      now,
      leaseUntil: now + options.pendingTtlMs,
      expiresAt: now + options.retentionMs,
    });
  } catch (error) {
    if (isMissingTableError(error)) {
      log.error("idempotency.table_missing", { message: "table idempotency_keys is missing; apply the D1 migrations" });
      return respond(idempotencyProblems.tableMissing());
    }
    log.error("idempotency.claim_failed", { error: errorText(error) });
    return respond(idempotencyProblems.ledgerError());
  }

  switch (outcome.kind) {
    case "vanished":
      return respond(idempotencyProblems.lost());
    case "existing": {
      const row = outcome.row;
      if (row.fingerprint !== fingerprint) return respond(idempotencyProblems.mismatch(options.mismatchStatus));
      if (row.status === "pending" || !row.response) {
        return respond(idempotencyProblems.inProgress(retryAfterSeconds(row.leaseUntil, now, options.maxRetryAfterSeconds)));
      }
      return replayResponse(row.response);
    }
    case "claimed":
      break;
  }

  const fence: FenceInput = { principal, key: parsed.key, generation: outcome.generation, claimToken };
  const where = { principal, generation: fence.generation };
  if (outcome.takeover) log.warn("idempotency.taken_over", { message: "took over a stale or expired reservation", ...where });

  const rebuilt = new Request(request, { body: body === null ? null : body });
  let result: HandlerResult;
  try {
    result = await call.execute(rebuilt);
  } catch (error) {
    await release(db, fence, where);
    throw error;
  }
  if (result.failed) {
    await release(db, fence, where);
    return result.response;
  }
  if (!(await options.shouldStore(result.response))) {
    await release(db, fence, where);
    return result.response;
  }

  let captured;
  try {
    captured = await captureResponse(result.response, options);
  } catch (error) {
    // The body could not be read (its stream errored, say): nothing can be stored, and leaving
    // the reservation pending would answer 409 to every retry until the lease ends.
    await release(db, fence, where);
    throw error;
  }
  const settledAt = clock();
  try {
    const completed = await completeIfOwned(db, fence, {
      now: settledAt,
      expiresAt: settledAt + options.retentionMs,
      response: captured.stored,
    });
    if (!completed) {
      // Taken over (our lease expired) or released meanwhile: the newer owner's row stands.
      log.error("idempotency.fenced_out", {
        message: "FENCED OUT — this response was not stored because the reservation is no longer ours",
        ...where,
      });
    } else {
      call.maybeSweep(db, settledAt, call.waitUntil);
    }
  } catch (error) {
    // The side effect happened; the caller must still learn its result. The reservation stays
    // pending until pendingTtlMs, after which a retry takes it over.
    log.error("idempotency.completion_failed", {
      message: "COMPLETION WRITE FAILED — the response was returned but not stored",
      ...where,
      error: errorText(error),
    });
  }
  return captured.forCaller;
}

/**
 * Seconds worth waiting before retrying a pending key: what is left of the lease, capped at
 * `maxSeconds` (see the option), as RFC 9110 delta-seconds (a whole number, at least 1).
 */
export function retryAfterSeconds(leaseUntil: number | null, now: number, maxSeconds: number): number {
  const leftMs = Math.max(0, (leaseUntil ?? now) - now);
  return Math.max(1, Math.min(maxSeconds, Math.ceil(leftMs / 1000)));
}

async function release(db: D1Database, fence: FenceInput, where: { principal: string; generation: number }): Promise<void> {
  try {
    if (!(await releaseIfOwned(db, fence))) {
      log.error("idempotency.release_fenced_out", { message: "release fenced out — the reservation is no longer ours", ...where });
    }
  } catch (error) {
    log.error("idempotency.release_failed", {
      message: "RELEASE FAILED — the key stays reserved until pendingTtlMs",
      ...where,
      error: errorText(error),
    });
  }
}

function respond(problem: ProblemError): Response {
  return problem.toResponse();
}

function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
