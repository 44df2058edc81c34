/**
 * What the trace says of a Gateway step's destination key: the key sent, where it went (the header
 * name or the body field's pointer), the profile and the constraints it was checked against. Read
 * from the execution's pinned definition (src/definitions/destination-key.ts), which the trace's
 * one round trip loads with it. Kept small on purpose: the retention guard adds the first-sent
 * time and the retention deadline to the same object.
 */
import { resolveDestinationKey } from "../definitions/destination-key";
import { KEY_ALPHABETS } from "../definitions/key-profiles";
import { WorkflowDefinition, type GatewayVertex } from "../definitions/schema";

export interface DestinationKeyTrace {
  /** The key the step sent (persisted before its first send); null before that. */
  value: string | null;
  header?: string;
  bodyField?: string;
  profile: string | null;
  maxLength: number;
  /** The alphabet's id (`printable-ascii`, `url-safe`, `alphanumeric`). */
  alphabet: string;
}

/** The Gateway vertices of a stored definition by id; empty when it cannot be read (the trace then shows no declaration). */
export function gatewayVerticesOf(definitionJson: string | null): Map<string, GatewayVertex> {
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
export function destinationKeyTrace(vertex: GatewayVertex | undefined, sent: string | null): DestinationKeyTrace | null {
  if (!vertex) return null;
  const resolved = resolveDestinationKey(vertex.config);
  if ("problems" in resolved || resolved.key === null) return null;
  const { location, profile, constraints } = resolved.key;
  const alphabet = Object.entries(KEY_ALPHABETS).find(([, a]) => a === constraints.alphabet)?.[0] ?? constraints.alphabet.name;
  return { value: sent, ...location, profile, maxLength: constraints.maxLength, alphabet };
}
