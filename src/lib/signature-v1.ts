/**
 * idemflow's own webhook signature, scheme v1 (SPEC section 3): the signed bytes and the
 * timestamp's tolerance. Two routes verify it — a workflow's signed hook (src/ingress/signature.ts,
 * target `<workspaceId>:<workflowId>`) and an event source's delivery (src/events/source-signature.ts,
 * target `<workspaceId>:events/<source>`) — so the recipe lives here, below both.
 *
 *     hex(HMAC-SHA256(secret, "v1:" + <timestamp> + ":" + <workspaceId> + ":" + <target> + ":" + <raw body bytes>))
 */
import { concatBytes, utf8, type Bytes } from "./crypto";

export const SIGNATURE_SCHEME = "v1";

/** What a v1 signature is made for: the workspace and the hook's second path field. */
export interface SignedTarget {
  workspace: string;
  workflowId: string;
}

/** The exact bytes signed under v1. */
export function signedBytesV1(timestamp: string, target: SignedTarget, raw: Uint8Array): Bytes {
  return concatBytes([utf8(`${SIGNATURE_SCHEME}:${timestamp}:${target.workspace}:${target.workflowId}:`), raw]);
}

/** The signed timestamp (Unix seconds, the exact text signed) is well-formed and within `toleranceSeconds` of now. */
export function timestampWithinTolerance(timestamp: string, nowMs: number, toleranceSeconds: number): boolean {
  return /^\d{1,12}$/.test(timestamp) && Math.abs(nowMs / 1000 - Number(timestamp)) <= toleranceSeconds;
}

/** A signed delivery as a public route verifies it: the signing secret, what it was sent to, and the request's headers and raw bytes. */
export interface SignedDelivery<Target> {
  secret: string;
  target: Target;
  headers: Headers;
  raw: Uint8Array;
  nowMs: number;
}
