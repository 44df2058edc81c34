/**
 * Phase 1 of a Gateway attempt: url, headers, query and body evaluated against the execution
 * context. A failing expression fails the step: it would fail the same way on every retry.
 *
 * The key header (the original `Idempotency-Key` form) is set aside unevaluated: its expression runs
 * only when no key was persisted yet (phase 2, ./key.ts), so a later attempt never recomputes it.
 */
import type { GatewayVertex } from "../../definitions/schema";
import { evaluateValue } from "../../expressions/evaluate";
import { errorMessage } from "../../lib/log";
import { ownRecord } from "../../lib/own-member";
import type { ExpressionContext } from "../plan";
import { isKeyHeader, type DestinationKeyRule } from "./key";

export interface EvaluatedRequest {
  /** With the evaluated query appended. */
  url: URL;
  /**
   * Evaluated header values; a header that evaluated to nothing is left out. Not the key. Without a
   * prototype: a header's name is the tenant's (`__proto__` is a valid one), src/lib/own-member.ts.
   */
  headers: Record<string, string>;
  /** Undefined for GET and HEAD, and when the vertex has none. */
  body: unknown;
}

export async function evaluateRequest(
  vertex: GatewayVertex,
  context: ExpressionContext,
  keyRule: DestinationKeyRule | null,
): Promise<{ evaluated: EvaluatedRequest } | { error: string }> {
  const config = vertex.config;
  try {
    const rawUrl = await evaluateValue(config.url, context);
    if (typeof rawUrl !== "string") return { error: `url evaluated to ${typeof rawUrl}, not a string` };
    const url = checkUrl(rawUrl);
    if ("error" in url) return url;
    const evaluated: EvaluatedRequest = { url: url.url, headers: ownRecord(), body: undefined };
    for (const [name, value] of Object.entries(config.headers ?? {})) {
      if (isKeyHeader(name, keyRule)) continue;
      const text = asText(await evaluateValue(value, context));
      if (text !== undefined) evaluated.headers[name] = text;
    }
    for (const [name, value] of Object.entries(config.query ?? {})) {
      const text = asText(await evaluateValue(value, context));
      if (text !== undefined) evaluated.url.searchParams.append(name, text);
    }
    if (config.body !== undefined && config.method !== "GET" && config.method !== "HEAD") {
      evaluated.body = await evaluateValue(config.body, context);
    }
    return { evaluated };
  } catch (error) {
    return { error: `gateway ${vertex.id}: ${errorMessage(error)}` };
  }
}

/** An absolute http(s) URL without credentials, or why the step cannot call it. */
export function checkUrl(rawUrl: string): { url: URL } | { error: string } {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return { error: `url ${JSON.stringify(rawUrl.slice(0, 200))} is not an absolute URL` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    // fetch would refuse it with a TypeError, which reads as a network error and is retried.
    return { error: `url ${url.protocol}//${url.host}${url.pathname} is not http(s); a Gateway step only calls http:// or https:// URLs` };
  }
  if (url.username !== "" || url.password !== "") {
    // They would be stored in the request summary and shown in the trace.
    return {
      error: `url ${url.host}${url.pathname} carries credentials (user:password@); send them in a header with {{ secrets.NAME }} instead`,
    };
  }
  return { url };
}

/** A header or query value as text: strings as they are, other values as JSON, nothing as nothing. */
function asText(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  return typeof value === "string" ? value : JSON.stringify(value);
}
