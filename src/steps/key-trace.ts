/**
 * What the trace says of a Gateway step's destination key: the key sent, where it went (the header
 * name or the body field's pointer), the profile and the constraints it was checked against. Read
 * from the execution's pinned definition (src/definitions/destination-key.ts), which the trace's
 * one round trip loads with it, with the retention guard's facts: the destination the key went
 * to, when it was first sent there, the retention and the deadline it gives.
 */
import { resolveDestinationKey } from "../definitions/destination-key";
import { KEY_ALPHABETS } from "../definitions/key-profiles";
import { WorkflowDefinition, type GatewayVertex } from "../definitions/schema";
import type { KeySend } from "../ledger";
import { isoTime } from "../lib/iso-time";
import { ownMember } from "../lib/own-member";
import { retentionDeadline } from "./gateway/retention";

export interface DestinationKeyTrace {
  /** The key the step sent (persisted before its first send); null before that. */
  value: string | null;
  header?: string;
  bodyField?: string;
  profile: string | null;
  maxLength: number;
  /** The alphabet's id (`printable-ascii`, `url-safe`, `alphanumeric`). */
  alphabet: string;
  /** How long the destination remembers a key (declared, or from the profile); null: not declared, not guarded. */
  retentionMs: number | null;
  /** Where the key was sent: the URL's origin, or `connector:<name>` for a step through a connector; null before its first send. */
  destination: string | null;
  /** When the key was first sent there (in this workspace, by any execution); null before that. */
  firstSentAt: string | null;
  /** When an operator acknowledged a re-send the retention guard refused; the retention counts from then. */
  acknowledgedAt: string | null;
  /** After this the retention guard refuses to send the key (less its margin); null without a retention or a send. */
  retentionDeadline: string | null;
}

const parsedVersions = new Map<string, Map<string, GatewayVertex>>();

/**
 * The Gateway vertices of a stored definition by id; empty when it cannot be read (the trace then
 * shows no declaration). A version's definition never changes, so its parse is kept per isolate
 * under `version` (workspace/workflow/version), at most 500 of them.
 */
export function gatewayVerticesOf(definitionJson: string | null, version: string): Map<string, GatewayVertex> {
  const cached = parsedVersions.get(version);
  if (cached) return cached;
  const gateways = parseGateways(definitionJson);
  if (definitionJson !== null) {
    if (parsedVersions.size >= 500) parsedVersions.delete(parsedVersions.keys().next().value as string);
    parsedVersions.set(version, gateways);
  }
  return gateways;
}

function parseGateways(definitionJson: string | null): Map<string, GatewayVertex> {
  const gateways = new Map<string, GatewayVertex>();
  if (definitionJson === null) return gateways;
  let parsed: ReturnType<typeof WorkflowDefinition.safeParse>;
  try {
    parsed = WorkflowDefinition.safeParse(JSON.parse(definitionJson));
  } catch {
    return gateways;
  }
  if (!parsed.success) return gateways;
  for (const vertex of parsed.data.vertices) if (vertex.type === "GATEWAY") gateways.set(vertex.id, vertex);
  return gateways;
}

/** The step's key declaration with the key it sent; null for a step that sends no key. */
export function destinationKeyTrace(vertex: GatewayVertex | undefined, sent: KeySentFacts): DestinationKeyTrace | null {
  if (!vertex) return null;
  const resolved = resolveDestinationKey(vertex.config);
  if ("problems" in resolved || resolved.key === null) return null;
  const { location, profile, constraints, retentionMs } = resolved.key;
  const alphabet = Object.entries(KEY_ALPHABETS).find(([, a]) => a === constraints.alphabet)?.[0] ?? constraints.alphabet.name;
  const [destination, send] = sendOf(sent);
  return {
    value: sent.key,
    ...location,
    profile,
    maxLength: constraints.maxLength,
    alphabet,
    retentionMs,
    destination,
    firstSentAt: send ? isoTime(send.firstSentAt) : null,
    acknowledgedAt: send && send.countedFrom > send.firstSentAt ? isoTime(send.countedFrom) : null,
    // A version saved before durations were bounded may declare a retention past year 9999: null then.
    retentionDeadline: send && retentionMs !== null ? isoTime(retentionDeadline(send, retentionMs)) : null,
  };
}

/** What the step row says of its key: the key, its sends on record, and the URL of its last attempt. */
export interface KeySentFacts {
  key: string | null;
  sends: Record<string, KeySend>;
  /** The redacted request of the step's last attempt, if any (its `url` names the destination). */
  request: unknown;
}

/** The send to the destination of the step's last request, else the earliest on record. */
function sendOf(sent: KeySentFacts): [string | null, KeySend | null] {
  const url = (sent.request as { url?: unknown } | null)?.url;
  if (typeof url === "string") {
    try {
      const origin = new URL(url).origin;
      const send = ownMember(sent.sends, origin) as KeySend | undefined;
      if (send) return [origin, send];
    } catch {
      // not a URL: fall back to the earliest send
    }
  }
  const earliest = Object.entries(sent.sends).sort((a, b) => a[1].firstSentAt - b[1].firstSentAt)[0];
  return earliest ? earliest : [null, null];
}
