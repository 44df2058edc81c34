/** MAP: the step over a list (src/steps/map.ts); its items run as rows of their own (src/steps/map-item.ts). Never retried itself. */
import type { MapVertex } from "../../definitions/schema";
import { runMap } from "../map";
import { NEVER_RETRIED, type VertexKind } from "./kind";

export const mapKind: VertexKind<MapVertex> = {
  execute: (vertex, { rt, fence, context }) => runMap(vertex, rt, fence, context),
  retryPolicy: NEVER_RETRIED,
};
