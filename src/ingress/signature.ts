/**
 * Signed webhooks (SPEC section 3), scheme v1. The sender computes
 *
 *     hex(HMAC-SHA256(secret, "v1:" + <timestamp> + ":" + <workspaceId> + ":" + <workflowId> + ":" + <raw body bytes>))
 *
 * and sends `v1=<hex>` in the signature header (default `x-idemflow-signature`) with the timestamp
 * (Unix seconds, the exact text signed) in the timestamp header (default `x-idemflow-timestamp`).
 * `<workspaceId>` and `<workflowId>` are the two path segments of `/hooks/{workspaceId}/{workflowId}`.
 *
 * - Signing the timestamp makes the tolerance window a replay defence: an old capture cannot be
 *   re-sent with a fresh timestamp.
 * - Signing the target makes a delivery valid for one hook only: a capture for `/hooks/dev/A`
 *   does not verify at `/hooks/other/B` or `/hooks/dev/B`, even where both share a secret.
 *   Neither id can contain `:` (workflow ids are `[A-Za-z0-9_-]`, workspaces come from
 *   `API_TOKENS` whose `:` is the separator), so the fields cannot slide into each other.
 * - The `v1` label is inside the signed bytes as well as in the header: a signature made for one
 *   scheme is never valid under another. Any other version, or none, is refused.
 *
 * Every failure is a 401 problem with a reason code, raised before anything is written. The
 * comparison is constant-time (both sides hashed, then compared byte by byte).
 */
import type { EntryPointConfig } from "../definitions/schema";
import { hmacSha256, timingSafeEqualStrings, toHex } from "../lib/crypto";
import { SIGNATURE_SCHEME, signedBytesV1, timestampWithinTolerance, type SignedDelivery, type SignedTarget } from "../lib/signature-v1";
import { lookupOrReason, type SecretLookup } from "../secrets/resolve";
import { log } from "../lib/log";
import { ingressProblems } from "./problems";

export type SignatureSettings = NonNullable<EntryPointConfig["webhook"]>["signature"];

const SECRET_REFERENCE = /^\s*\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$/;

/** A hook: its workspace and workflow (the v1 recipe: src/lib/signature-v1.ts). */
export type HookTarget = SignedTarget;

/**
 * The signing secret named by `{{ secrets.NAME }}`, for the hook's workspace (its own sealed
 * secret, else a Worker secret granted to it). Its value is never logged or returned. When it
 * cannot be had, the public answer stays generic: the hook is unauthenticated, so the name of the
 * secret (a hint about the deployment) and the reason go only to the operator's log.
 */
export async function resolveSigningSecret(settings: SignatureSettings, lookup: SecretLookup, hook: HookTarget): Promise<string> {
  const match = SECRET_REFERENCE.exec(settings.secret);
  let reason: string;
  if (match) {
    const found = await lookupOrReason(lookup, match[1]!);
    if ("value" in found) return found.value;
    reason = found.reason;
  } else {
    reason = "webhook.signature.secret must be `{{ secrets.NAME }}`";
  }
  // The NAME and the reason only, never a value.
  log.error("hook.secret_unavailable", { message: "public hook answered 503", ...hook, secretName: match ? match[1] : null, reason });
  // The operator's mistake, not the sender's: 503 so senders retry once it is fixed.
  throw ingressProblems.secretMissing();
}

/** `v1=<hex>` → the hex; anything else → 401 naming what is accepted. */
function presentedV1(given: string, header: string): string {
  const match = /^\s*([A-Za-z0-9]+)=(.*)$/.exec(given);
  if (!match || match[1]!.toLowerCase() !== SIGNATURE_SCHEME) throw ingressProblems.signatureVersionUnsupported(match?.[1], header);
  return match[2]!.trim().toLowerCase();
}

export async function verifyWebhookSignature(input: SignedDelivery<HookTarget> & { settings: SignatureSettings }): Promise<void> {
  const { settings, headers } = input;
  const timestamp = headers.get(settings.timestampHeader);
  const given = headers.get(settings.header);
  if (timestamp === null || given === null) throw ingressProblems.signatureMissing(settings.header, settings.timestampHeader);
  const presented = presentedV1(given, settings.header);
  if (!timestampWithinTolerance(timestamp, input.nowMs, settings.toleranceSeconds)) {
    throw ingressProblems.signatureStale(settings.timestampHeader, settings.toleranceSeconds);
  }
  const expected = toHex(await hmacSha256(input.secret, signedBytesV1(timestamp, input.target, input.raw)));
  if (!(await timingSafeEqualStrings(presented, expected))) throw ingressProblems.signatureInvalid();
}
