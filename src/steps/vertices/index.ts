/**
 * The table of vertex types (./kind.ts): a new type is a module and a line here, and TypeScript
 * refuses the table until every type of src/definitions/schema.ts `Vertex` has its entry.
 */
import type { RetryPolicy, Vertex } from "../../definitions/schema";
import type { RunOutcome } from "../outcome";
import { gatewayKind } from "./gateway";
import type { VertexKind, VertexRun } from "./kind";
import { mapKind } from "./map";
import { delayKind, entryPointKind, transformKind, waitForEventKind } from "./simple";

export type { VertexRun } from "./kind";

const KINDS: { [T in Vertex["type"]]: VertexKind<Extract<Vertex, { type: T }>> } = {
  ENTRY_POINT: entryPointKind,
  GATEWAY: gatewayKind,
  TRANSFORM: transformKind,
  DELAY: delayKind,
  WAIT_FOR_EVENT: waitForEventKind,
  MAP: mapKind,
};

const kindOf = (vertex: Vertex) => KINDS[vertex.type] as VertexKind<Vertex>;

export function executeVertex(vertex: Vertex, r: VertexRun): Promise<RunOutcome> {
  return kindOf(vertex).execute(vertex, r);
}

export function retryPolicyOf(vertex: Vertex | undefined): RetryPolicy | null {
  return vertex ? kindOf(vertex).retryPolicy(vertex) : null;
}
