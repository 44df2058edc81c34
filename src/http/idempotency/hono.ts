/** The Idempotency-Key middleware as Hono middleware. */
import type { Context, MiddlewareHandler } from "hono";
import { guard } from "./guard";
import { resolveOptions, type IdempotencyOptions } from "./options";
import { createSweeper, type WaitUntil } from "./sweeper";

export function idempotency(options: IdempotencyOptions): MiddlewareHandler {
  const resolved = resolveOptions(options);
  const maybeSweep = createSweeper(resolved.sweep);
  return async function idempotencyMiddleware(c, next) {
    let ranHandler = false;
    const response = await guard(resolved, {
      request: c.req.raw,
      env: c.env,
      context: c,
      waitUntil: waitUntilOf(c),
      maybeSweep,
      execute: async (request) => {
        ranHandler = true;
        // The middleware consumed the original body; downstream reads the rebuilt request.
        c.req.raw = request;
        await next();
        // Hono catches a throwing handler, records it in c.error and renders onError's response.
        return { response: c.res, failed: c.error !== undefined };
      },
    });
    if (!ranHandler) return response;
    // Replace (not merge into) the handler's response, whose body the ledger has consumed.
    c.res = undefined;
    c.res = response;
  };
}

/**
 * Reads a server-set Hono context variable (e.g. `workspace`, set by the auth middleware) as
 * the principal. Mount the idempotency middleware after the middleware that sets it.
 */
export function principalFromContext(variable: string): IdempotencyOptions["principal"] {
  return (_request, _env, context) => {
    const value: unknown = context?.get(variable as never);
    if (typeof value !== "string" || value.length === 0) {
      throw new Error(`idempotency(): context variable "${variable}" is not set; mount idempotency() after the middleware that sets it`);
    }
    return value;
  };
}

function waitUntilOf(c: Context): WaitUntil | undefined {
  try {
    const ctx = c.executionCtx;
    return (promise) => ctx.waitUntil(promise);
  } catch {
    return undefined; // e.g. app.request() in a test without an ExecutionContext
  }
}
