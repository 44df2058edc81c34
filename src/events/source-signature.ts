/**
 * Verifying a delivery to an event source (`POST /events/{workspace}/{source}`): the signature is
 * the route's only authentication, checked before the body is parsed or anything is written.
 *
 * - `v1`: the hooks' scheme (src/lib/signature-v1.ts, `signedBytesV1`) with the target
 *   `<workspace>` and `events/<source>` in place of the workflow id, so the signed bytes are
 *   `v1:<timestamp>:<workspace>:events/<source>:<raw body>`. A workflow id never holds `/` (nor a
 *   source name `:`), so a delivery signed for an event source never verifies at a workflow's hook,
 *   nor one for a hook here, even where both share a secret. Headers `x-idemflow-signature: v1=<hex>`
 *   and `x-idemflow-timestamp`.
 * - `standard-webhooks`: ./standard-webhooks.ts; the secret is `whsec_<base64>`.
 *
 * What a verified delivery hands on: the headers the signature covers (all an extraction may read,
 * src/events/source-extract.ts) and, under Standard Webhooks, `webhook-id` as the default event id.
 */
import { hmacSha256, sha256Hex, timingSafeEqualStrings, toHex } from "../lib/crypto";
import { signedBytesV1, timestampWithinTolerance, type SignedDelivery } from "../lib/signature-v1";
import { log } from "../lib/log";
import { lookupOrReason, type SecretLookup } from "../secrets/resolve";
import { SECRET_TEMPLATE_SOURCE } from "../definitions/secrets";
import { eventProblems } from "./problems";
import type { EventSourceDefinition } from "./source-definition";
import { verifyStandardWebhook, WEBHOOK_ID_HEADER, WEBHOOK_TIMESTAMP_HEADER, webhookSecretKey } from "./standard-webhooks";

export const V1_SIGNATURE_HEADER = "x-idemflow-signature";
export const V1_TIMESTAMP_HEADER = "x-idemflow-timestamp";

export interface SourceTarget {
  workspace: string;
  source: string;
}

/** The v1 target's second field: never a workflow id (those hold no `/`). */
export const v1TargetOf = (target: SourceTarget) => ({ workspace: target.workspace, workflowId: `events/${target.source}` });

export interface VerifiedDelivery {
  /** The signed headers, lowercase: the only headers an extraction sees. */
  headers: Map<string, string>;
  /** The delivery's own id when the scheme signs one (`webhook-id`), else undefined. */
  id: string | undefined;
  /**
   * Whose id space `id` is in, for deduplication (src/events/ingest.ts): under Standard Webhooks
   * the SECRET's (`~sw-` + 16 hex of SHA-256 of its key; no source name starts with `~`) — the signature covers the id, the
   * timestamp and the body but not the URL, so a delivery replayed to another source that shares
   * the secret is the same message, and must be its duplicate. Undefined: the source's own.
   */
  idScope: string | undefined;
}

const TEMPLATE = new RegExp(`^\\s*${SECRET_TEMPLATE_SOURCE}\\s*$`);

/**
 * The signing secret's value, for the source's workspace (its own sealed secret, else a Worker
 * secret granted to it). When it cannot be had the public answer stays generic — the secret's
 * name and the reason go only to the operator's log — and is a 503: the operator's mistake, so
 * the provider's retry succeeds once it is fixed.
 */
export async function resolveSourceSecret(definition: EventSourceDefinition, lookup: SecretLookup, target: SourceTarget): Promise<string> {
  const name = TEMPLATE.exec(definition.secret)?.[1];
  let reason = "the secret is not `{{ secrets.NAME }}`";
  if (name !== undefined) {
    const found = await lookupOrReason(lookup, name);
    if ("value" in found) return found.value;
    reason = found.reason;
  }
  unavailable(target, name ?? null, reason);
}

function unavailable(target: SourceTarget, secretName: string | null, reason: string): never {
  // The NAME and the reason only, never a value.
  log.error("events.source_unavailable", { message: "event source answered 503", ...target, secretName, reason });
  throw eventProblems.sourceUnavailable();
}

export async function verifySourceDelivery(
  input: SignedDelivery<SourceTarget> & { definition: EventSourceDefinition },
): Promise<VerifiedDelivery> {
  const { definition, headers } = input;
  const tolerance = definition.toleranceSeconds;
  if (definition.scheme === "standard-webhooks") {
    const key = webhookSecretKey(input.secret);
    if (!key) unavailable(input.target, TEMPLATE.exec(definition.secret)?.[1] ?? null, "the secret is not `whsec_` + base64");
    const verdict = await verifyStandardWebhook({ key, headers, raw: input.raw, nowMs: input.nowMs, toleranceSeconds: tolerance });
    if (!verdict.ok) {
      if (verdict.reason === "missing") throw eventProblems.signatureMissing("standard-webhooks");
      if (verdict.reason === "stale") throw eventProblems.signatureStale("standard-webhooks", WEBHOOK_TIMESTAMP_HEADER, tolerance);
      throw eventProblems.signatureInvalid("standard-webhooks");
    }
    const signed = new Map([
      [WEBHOOK_ID_HEADER, verdict.id],
      [WEBHOOK_TIMESTAMP_HEADER, verdict.timestamp],
    ]);
    return { headers: signed, id: verdict.id, idScope: `~sw-${(await sha256Hex(key)).slice(0, 16)}` };
  }
  const timestamp = headers.get(V1_TIMESTAMP_HEADER);
  const given = headers.get(V1_SIGNATURE_HEADER);
  if (timestamp === null || given === null) throw eventProblems.signatureMissing("v1");
  if (!timestampWithinTolerance(timestamp, input.nowMs, tolerance)) {
    throw eventProblems.signatureStale("v1", V1_TIMESTAMP_HEADER, tolerance);
  }
  const presented = /^\s*v1=([0-9A-Fa-f]*)\s*$/.exec(given)?.[1]?.toLowerCase() ?? "";
  const expected = toHex(await hmacSha256(input.secret, signedBytesV1(timestamp, v1TargetOf(input.target), input.raw)));
  if (!(await timingSafeEqualStrings(presented, expected))) throw eventProblems.signatureInvalid("v1");
  return { headers: new Map([[V1_TIMESTAMP_HEADER, timestamp]]), id: undefined, idScope: undefined };
}
