/**
 * The trace of a MAP (docs/steps.md "MAP"): its items counted by state and the first page of its
 * items, each with its state, attempts, key, output (or its size when too large) or error, its
 * events; `GET /v1/executions/{id}/steps/{vertexId}/items?cursor=` pages the rest with the same
 * shape. Pure: built from the ledger's records (src/ledger/map-trace.ts).
 */
import type { AttemptRecord, ItemCountRecord, ItemRecord, ItemState } from "../ledger";
import { isoTime } from "../lib/iso-time";
import { permitWaitTrace } from "../flow/permits";

const iso = (ms: number | null | undefined): string | null => isoTime(ms);
const parsed = (text: string | null): unknown => (text === null ? null : (JSON.parse(text) as unknown));

export interface ItemEvent {
  type: string;
  epoch: number | null;
  at: string | null;
  detail: string | null;
}

export type MapCounts = { total: number } & Record<Lowercase<ItemState>, number>;

/** A MAP's items counted by state. */
export function mapCounts(counts: readonly ItemCountRecord[]): MapCounts {
  const out: MapCounts = { total: 0, pending: 0, dispatched: 0, executing: 0, completed: 0, failed: 0, cancelled: 0 };
  for (const c of counts) {
    out[c.state.toLowerCase() as Lowercase<ItemState>] += c.count;
    out.total += c.count;
  }
  return out;
}

/** The cursor of the next page: the last index shown, opaque to the client. */
export const itemsCursor = (after: number | null): string | null => (after === null ? null : btoa(JSON.stringify(["i", after])));

/** The index a cursor continues after; null when it is not one we issued. */
export function itemsCursorAfter(cursor: string): number | null {
  try {
    const value = JSON.parse(atob(cursor)) as unknown;
    if (Array.isArray(value) && value[0] === "i" && Number.isInteger(value[1]) && (value[1] as number) >= -1) return value[1] as number;
  } catch {
    // fall through
  }
  return null;
}

/**
 * One item: its attempts (an attempt still open whose item moved on reads `lost`, as a step's) and
 * events are those recorded under its row key.
 */
export function itemTrace(
  i: ItemRecord,
  attempts: readonly AttemptRecord[],
  events: readonly ItemEvent[],
  attemptTrace: (a: AttemptRecord, row: { state: string; epoch: number }) => unknown,
  readAt: number = Date.now(),
) {
  return {
    index: i.index,
    state: i.state,
    attempt: i.attempt,
    epoch: i.epoch,
    idempotencyKey: i.idempotencyKey,
    item: parsed(i.itemJson),
    output: parsed(i.outputJson),
    outputOmitted: i.outputJson === null && i.outputBytes !== null ? { bytes: i.outputBytes, limit: 65_536 } : null,
    collected: parsed(i.collectedJson),
    error: i.error,
    createdAt: iso(i.createdAt),
    finishedAt: iso(i.finishedAt),
    durationMs: i.finishedAt === null ? null : i.finishedAt - i.createdAt,
    events,
    attempts: attempts.map((a) => attemptTrace(a, i)),
    // Through a limited connector: its wait for a permit, as a step's (docs/connectors.md "Limits").
    permitWait: permitWaitTrace(i.permitWaitJson, readAt),
  };
}

export type ItemTrace = ReturnType<typeof itemTrace>;

export interface MapTrace extends MapCounts {
  /** The first page of items, in list order. */
  items: ItemTrace[];
  /** The items route's cursor for the next page; null when every item is above. */
  nextCursor: string | null;
}
