/**
 * The rules of a Gateway step's verify probe (`config.verify`) that its schema cannot state:
 * only a write may declare one (a GET or HEAD step is a read itself: re-running it is harmless,
 * and nothing could be "already done"), a literal probe URL is an absolute http(s) URL, and the
 * probe sends no Idempotency-Key (the key belongs to the write; the probe asks without one).
 * Its expressions are compiled with all others (expression-sites.ts), its secrets checked by
 * secrets.ts; the outbound allowlist applies at run time, as for the step's own URL.
 */
import { asRecord, asString, type ValidationError } from "./errors";
import { isIdempotencyKeyHeader } from "./expression-sites";
import { pointerOf } from "./pointer";
import { literalUrlError } from "./rule-helpers";
import { gatewayConfigs } from "./step-configs";

export function checkVerifyProbes(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  // Every Gateway: a top-level one and a MAP's step.
  for (const site of gatewayConfigs(document)) {
    const { config } = site;
    const verify = asRecord(config.verify);
    if (!verify) continue;
    const at = (...path: string[]) => pointerOf(...site.base, "verify", ...path);
    const method = asString(config.method);
    if (method === "GET" || method === "HEAD") {
      errors.push({
        pointer: at(),
        code: "verify-on-read",
        message:
          `a ${method} step is a read: running it again writes nothing, so there is nothing to verify; ` +
          "declare `verify` on the write step instead",
      });
    }
    const urlError = literalUrlError(verify.url, at("url"), "http://localhost:8788/legacy/orders");
    if (urlError) errors.push(urlError);
    for (const name of Object.keys(asRecord(verify.headers) ?? {})) {
      if (!isIdempotencyKeyHeader(name)) continue;
      errors.push({
        pointer: at("headers", name),
        code: "verify-key-header",
        message: "the verify probe is a plain GET and sends no Idempotency-Key (the key belongs to the write); remove this header",
      });
    }
  }
  return errors;
}
