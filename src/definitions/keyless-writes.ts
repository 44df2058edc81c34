/**
 * Writes without a key (SPEC section 15, docs/connectors.md): a Gateway step whose method changes
 * something (POST, PUT, PATCH, DELETE) with neither a destination key (an `idempotencyKey`, or the
 * `Idempotency-Key` header form) nor a verify probe has nothing that stops a retried call from
 * acting twice. Existing definitions keep working, so this is a **warning** by default — in the
 * save's answer and in `npm run validate` — and a refusal for the workspaces the deployment lists
 * in KEYLESS_WRITES_REFUSED (`*` for every one).
 */
import { asRecord, type ValidationError } from "./errors";
import { gatewayConfigs } from "./step-configs";
import { isDefaultKeyHeader } from "./destination-key";
import { pointerOf } from "./pointer";

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export function checkKeylessWrites(document: unknown): ValidationError[] {
  const warnings: ValidationError[] = [];
  // Every Gateway: a top-level one and a MAP's step, which writes once per item.
  for (const { config, base } of gatewayConfigs(document)) {
    if (typeof config.method !== "string" || !WRITES.has(config.method)) continue;
    const headerKey = Object.keys(asRecord(config.headers) ?? {}).some(isDefaultKeyHeader);
    if (config.idempotencyKey !== undefined || config.verify !== undefined || headerKey) continue;
    warnings.push({
      pointer: pointerOf(...base),
      code: "write-without-key",
      message:
        `a ${config.method} with neither a destination key nor a verify probe: a retried call can act twice at the destination. ` +
        "Declare `idempotencyKey` (or go through a connector, which carries its key), or a `verify` probe for a keyless API",
    });
  }
  return warnings;
}

/** Whether the deployment refuses keyless writes for `workspace` (KEYLESS_WRITES_REFUSED: workspaces, or `*`). */
export function keylessWritesRefused(setting: unknown, workspace: string): boolean {
  if (typeof setting !== "string") return false;
  const listed = setting.split(",").map((w) => w.trim());
  return listed.includes("*") || listed.includes(workspace);
}
