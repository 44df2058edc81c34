/**
 * Writes without a key (SPEC section 15, docs/connectors.md): a Gateway step whose method changes
 * something (POST, PUT, PATCH, DELETE) with neither a destination key (an `idempotencyKey`, or the
 * `Idempotency-Key` header form) nor a verify probe has nothing that stops a retried call from
 * acting twice. Existing definitions keep working, so this is a **warning** by default — in the
 * save's answer and in `npm run validate` — and a refusal for the workspaces the deployment lists
 * in KEYLESS_WRITES_REFUSED (`*` for every one).
 */
import { asArray, asRecord, type ValidationError } from "./errors";
import { isDefaultKeyHeader } from "./destination-key";
import { pointerOf } from "./pointer";

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export function checkKeylessWrites(document: unknown): ValidationError[] {
  const warnings: ValidationError[] = [];
  asArray(asRecord(document)?.vertices).forEach((raw, i) => {
    const vertex = asRecord(raw);
    const config = asRecord(vertex?.config);
    if (vertex?.type !== "GATEWAY" || !config || typeof config.method !== "string" || !WRITES.has(config.method)) return;
    const headerKey = Object.keys(asRecord(config.headers) ?? {}).some(isDefaultKeyHeader);
    if (config.idempotencyKey !== undefined || config.verify !== undefined || headerKey) return;
    warnings.push({
      pointer: pointerOf("vertices", i, "config"),
      code: "write-without-key",
      message:
        `a ${config.method} with neither a destination key nor a verify probe: a retried call can act twice at the destination. ` +
        "Declare `idempotencyKey` (or go through a connector, which carries its key), or a `verify` probe for a keyless API",
    });
  });
  return warnings;
}

/** Whether the deployment refuses keyless writes for `workspace` (KEYLESS_WRITES_REFUSED: workspaces, or `*`). */
export function keylessWritesRefused(setting: unknown, workspace: string): boolean {
  if (typeof setting !== "string") return false;
  const listed = setting.split(",").map((w) => w.trim());
  return listed.includes("*") || listed.includes(workspace);
}
