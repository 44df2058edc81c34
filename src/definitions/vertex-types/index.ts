/**
 * The save-time rules of each vertex type (one module per type), by type name: the part of a
 * vertex type that lives in src/definitions — its schema is in ../schema.ts, how it executes in
 * src/steps/vertices. TRANSFORM has no rule beyond its schema and its expressions.
 */
import type { Vertex } from "../schema";
import type { VertexRules } from "../rule-helpers";
import { delayRules } from "./delay";
import { entryPointRules } from "./entry-point";
import { gatewayRules } from "./gateway";
import { mapRules } from "./map";
import { waitForEventRules } from "./wait-for-event";

const none: VertexRules = () => [];

const RULES_BY_TYPE: { [T in Vertex["type"]]: VertexRules } = {
  ENTRY_POINT: entryPointRules,
  GATEWAY: gatewayRules,
  TRANSFORM: none,
  DELAY: delayRules,
  WAIT_FOR_EVENT: waitForEventRules,
  MAP: mapRules,
};

/** The rules of a type named by the document (any string: a document is checked before it is trusted). */
export const RULES: ReadonlyMap<string, VertexRules> = new Map(Object.entries(RULES_BY_TYPE));
