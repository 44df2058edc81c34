/**
 * The Worker's ExecutionContext of a request, or undefined when there is none (`app.request` in a
 * test): Hono's `c.executionCtx` throws then. The trigger routes hand it to `ingressDeps`, so with
 * step chaining on the first step runs under `ctx.waitUntil` (src/ingress/start.ts).
 */
import type { Context } from "hono";

export function requestCtx(c: Context): ExecutionContext | undefined {
  try {
    // Hono declares its own, narrower ExecutionContext; at run time it is the Worker's own.
    return c.executionCtx as unknown as ExecutionContext;
  } catch {
    return undefined;
  }
}
