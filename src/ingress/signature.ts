/**
 * Signed webhooks (SPEC section 3). The sender computes
 *
 *     hex(HMAC-SHA256(secret, "<timestamp>." + <raw body bytes>))
 *
 * where `<timestamp>` is the exact text of the timestamp header (Unix seconds), and sends it in
 * the signature header (default `x-idemflow-signature`, optionally prefixed `sha256=`) with the
 * timestamp in the timestamp header (default `x-idemflow-timestamp`). Signing the timestamp with
 * the body is what makes the tolerance window a replay defence: an old capture cannot be re-sent
 * with a fresh timestamp.
 *
 * Every failure is the same 401 problem with a reason code, raised before anything is written.
 * The comparison is constant-time (both sides hashed, then compared byte by byte).
 */
import type { EntryPointConfig } from "../definitions/schema";
import { ProblemError } from "../lib/problem";
import { concatBytes, hmacSha256, timingSafeEqualStrings, toHex, utf8 } from "../lib/crypto";

export type SignatureSettings = NonNullable<EntryPointConfig["webhook"]>["signature"];

const SECRET_REFERENCE = /^\s*\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$/;

function unauthorized(code: string, detail: string): ProblemError {
  return new ProblemError({ status: 401, code, title: "Webhook signature rejected", detail });
}

/**
 * The secret named by `{{ secrets.NAME }}`, from the Worker's env. Its value is never logged or
 * returned. When it is missing, the public answer stays generic: the hook is unauthenticated, so
 * the name of the secret (a hint about the deployment) goes only to the operator's log.
 */
export function resolveSigningSecret(settings: SignatureSettings, env: Record<string, unknown>, hook: { workspace: string; workflowId: string }): string {
  const match = SECRET_REFERENCE.exec(settings.secret);
  const value = match ? env[match[1]!] : undefined;
  if (typeof value !== "string" || value.length === 0) {
    console.error(
      "webhook signing secret missing: public hook answered 503",
      JSON.stringify({
        ...hook,
        // The NAME only, never a value.
        secretName: match ? match[1] : null,
        fix: match ? `wrangler secret put ${match[1]}` : "webhook.signature.secret must be `{{ secrets.NAME }}`",
      }),
    );
    // The operator's mistake, not the sender's: 503 so senders retry once it is fixed.
    throw new ProblemError({
      status: 503,
      code: "webhook-secret-missing",
      title: "The webhook is not configured",
      detail: "The hook is not configured; the operator has been told. Retry later.",
    });
  }
  return value;
}

export async function verifyWebhookSignature(input: {
  settings: SignatureSettings;
  secret: string;
  headers: Headers;
  raw: Uint8Array;
  nowMs: number;
}): Promise<void> {
  const { settings, headers } = input;
  const timestamp = headers.get(settings.timestampHeader);
  const given = headers.get(settings.header);
  if (timestamp === null || given === null) {
    throw unauthorized(
      "webhook-signature-missing",
      `Send the HMAC-SHA256 signature in \`${settings.header}\` and the Unix timestamp (seconds) in \`${settings.timestampHeader}\`.`,
    );
  }
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(input.nowMs / 1000 - Number(timestamp)) > settings.toleranceSeconds) {
    throw unauthorized(
      "webhook-signature-stale",
      `The timestamp in \`${settings.timestampHeader}\` must be Unix seconds within ${settings.toleranceSeconds} s of now; sign again with the current time.`,
    );
  }
  const expected = toHex(await hmacSha256(input.secret, concatBytes([utf8(`${timestamp}.`), input.raw])));
  const presented = given.trim().replace(/^sha256=/i, "").toLowerCase();
  if (!(await timingSafeEqualStrings(presented, expected))) {
    throw unauthorized(
      "webhook-signature-invalid",
      `The signature does not match: compute hex(HMAC-SHA256(secret, "<timestamp>." + raw body)) and send it in \`${settings.header}\`.`,
    );
  }
}
