/**
 * The SQL of a MAP's fan-in (private to src/ledger; docs/steps.md "MAP"): when its items are done,
 * the slots of its concurrency in use, and whether a FAILED item stops it. Shared by the item
 * settle (./map-items.ts) and the MAP's park (./step-schedule.ts `parkStep`).
 */
/** How a MAP parks: wake it when its items are done (see `mapDone`); `stopOnFailure` is `onItemFailure: "fail"`. */
export interface MapPark {
  stopOnFailure: boolean;
}

/**
 * A MAP's items are done: none DISPATCHED or EXECUTING, and none PENDING — or one FAILED and the
 * MAP stops on a failed item. Each argument is the SQL of a bound parameter (or a column): the
 * execution id, the MAP's vertex id, stop on failure (0/1). Every subquery is a range of
 * `work_items_by_state`.
 */
export function mapDone(executionId: string, vertexId: string, stop: string): string {
  const of = (alias: string, states: string) =>
    `SELECT 1 FROM work_items ${alias} WHERE ${alias}.execution_id = ${executionId} AND ${alias}.vertex_id = ${vertexId}
       AND ${alias}.kind = 'map_item' AND ${alias}.state IN (${states})`;
  return `(NOT EXISTS (${of("fl", "'DISPATCHED', 'EXECUTING'")})
    AND (NOT EXISTS (${of("pn", "'PENDING'")}) OR (${stop} = 1 AND EXISTS (${of("fd", "'FAILED'")}))))`;
}

/** `mapDone` as `parkStep` binds it (src/ledger/step-schedule.ts): ?1 execution id, ?2 vertex id, ?8 stop. */
export const MAP_DONE = mapDone("?1", "?2", "?8");

/** Items of one MAP DISPATCHED or EXECUTING: the slots of its concurrency in use. */
export const inFlight = (executionId: string, vertexId: string) =>
  `(SELECT count(*) FROM work_items fl WHERE fl.execution_id = ${executionId} AND fl.vertex_id = ${vertexId}
     AND fl.kind = 'map_item' AND fl.state IN ('DISPATCHED', 'EXECUTING'))`;

/** A FAILED item of one MAP stops new starts (`onItemFailure: "fail"`). */
export const stopped = (executionId: string, vertexId: string, stop: string) =>
  `(${stop} = 1 AND EXISTS (SELECT 1 FROM work_items fd WHERE fd.execution_id = ${executionId} AND fd.vertex_id = ${vertexId}
     AND fd.kind = 'map_item' AND fd.state = 'FAILED'))`;
