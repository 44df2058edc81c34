/** The Idempotency-Key middleware around a plain `fetch`-style handler (no framework needed). */
import { guard } from "./guard";
import { resolveOptions, type IdempotencyOptions } from "./options";
import { createSweeper } from "./sweeper";

export function withIdempotency<E>(
  handler: (request: Request, env: E, ctx: ExecutionContext) => Promise<Response> | Response,
  options: IdempotencyOptions,
): (request: Request, env: E, ctx: ExecutionContext) => Promise<Response> {
  const resolved = resolveOptions(options);
  const maybeSweep = createSweeper(resolved.sweep);
  return async function idempotentHandler(request, env, ctx) {
    return guard(resolved, {
      request,
      env,
      waitUntil: ctx ? (promise) => ctx.waitUntil(promise) : undefined,
      maybeSweep,
      // A throw propagates to the caller after the reservation is released.
      execute: async (rebuilt) => ({ response: await handler(rebuilt, env, ctx), failed: false }),
    });
  };
}
