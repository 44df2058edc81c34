/**
 * MAP vertices (SPEC section 16, docs/steps.md "MAP"): the step itself. Its items run as rows of
 * their own (src/steps/map-item.ts); the MAP step evaluates the list once, persists it with its
 * first items started, parks while they run, and is decided by its own claim once they are done —
 * the ordinary step claim, so the step fence decides it once.
 *
 * Each claim of the MAP reads its items (src/ledger `readMapItems`) and:
 * - none on record (its first claim, or one that died before persisting): evaluate `items`, check
 *   it (an array, at most `maxItems`, JSON, at most `MAX_MAP_LIST_BYTES`), persist it and start the
 *   first `concurrency` items in one fenced batch, send their messages, park;
 * - some unsettled: start PENDING items into free slots (an operator retry's, a lost start's), park;
 * - done: the collected values in list order (or the first failure under `onItemFailure: "fail"`).
 * The park parks only while an item is unsettled (`parkStep` with `mapItems`): an item that settled
 * between this read and the park could not wake a MAP that was not parked.
 */
import { EXPRESSION_PREFIX, type MapVertex } from "../definitions/schema";
import { evaluate } from "../expressions/evaluate";
import { MAX_MAP_LIST_BYTES, readMapItems, startMapItems, type Fence, type MapItemsRead } from "../ledger";
import { setOwnMember } from "../lib/own-member";
import { errorMessage } from "../lib/log";
import { sendItemMessages } from "./dispatch";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import type { StepRuntime } from "./runtime";

/** How long a MAP sleeps between two looks when nothing wakes it: a safety net (the cron's wake-up task), never the way it ends. */
export const MAP_PARK_MS = 60 * 60_000;

/** The expression context of one item: the MAP's, with the item under its name and `index`. */
export function itemContext(context: ExpressionContext, as: string, item: unknown, index: number): ExpressionContext {
  const ctx = { ...context } as ExpressionContext & Record<string, unknown>;
  setOwnMember(ctx, "index", index);
  setOwnMember(ctx, as, item);
  return ctx;
}

const utf8 = new TextEncoder();

/** The list `items` gives, checked: each element's JSON text, or why the MAP fails (not retried). */
export async function evaluateList(vertex: MapVertex, context: ExpressionContext): Promise<{ elements: string[] } | { error: string }> {
  const { items, maxItems } = vertex.config;
  let list: unknown;
  try {
    list = await evaluate(items.slice(EXPRESSION_PREFIX.length), context);
  } catch (error) {
    return { error: `map ${vertex.id}: \`items\` could not be evaluated: ${errorMessage(error)}; not retried` };
  }
  if (!Array.isArray(list)) {
    const what = list === undefined ? "no value" : list === null ? "null" : typeof list === "object" ? "an object" : `a ${typeof list}`;
    return { error: `map ${vertex.id}: \`items\` gave ${what}, not an array; a MAP runs over a list (not retried)` };
  }
  if (list.length > maxItems) {
    return {
      error: `map ${vertex.id}: \`items\` gave ${list.length} items, over this MAP's maxItems of ${maxItems} (at most 1000); not retried`,
    };
  }
  const elements: string[] = [];
  for (const [i, element] of list.entries()) {
    const text = jsonText(element);
    if (text === null) return { error: `map ${vertex.id}: item ${i} is not a JSON value (a function, or undefined); not retried` };
    elements.push(text);
  }
  const encoded = JSON.stringify(elements);
  if (utf8.encode(encoded).byteLength > MAX_MAP_LIST_BYTES) {
    return {
      error:
        `map ${vertex.id}: the list is ${utf8.encode(encoded).byteLength} bytes of JSON, over the ${MAX_MAP_LIST_BYTES}-byte bound ` +
        "on a persisted list; pass smaller items (ids, not whole records); not retried",
    };
  }
  return { elements };
}

/** A value's JSON, or null when it is not one (a function or undefined anywhere in it). */
function jsonText(value: unknown): string | null {
  let json = true;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "function" || typeof v === "symbol" || v === undefined || typeof v === "bigint") json = false;
    return v;
  });
  return json && text !== undefined ? text : null;
}

/** Run the MAP step once for this claim. */
export async function runMap(vertex: MapVertex, rt: StepRuntime, fence: Fence, context: ExpressionContext): Promise<RunOutcome> {
  const { concurrency, onItemFailure } = vertex.config;
  const stopOnFailure = onItemFailure === "fail";
  const read = await readMapItems(rt.db, fence.executionId, fence.vertexId);
  const now = rt.now();
  if (read.total === 0) {
    const list = await evaluateList(vertex, context);
    if ("error" in list) return { kind: "failed", error: list.error };
    if (list.elements.length === 0) return { kind: "completed", output: stopOnFailure ? [] : { items: [], failed: [] } };
    const started = await startMapItems(rt.db, fence, { now, elementsJson: JSON.stringify(list.elements), concurrency, stopOnFailure });
    // Fenced out: the MAP was taken over; the settle that follows is fenced out too (and recorded).
    if (started === null) return { kind: "failed", error: `map ${vertex.id}: the MAP was taken over while persisting its list` };
    await sendItemMessages(
      rt.queue,
      started.map((item) => ({ ...fenceRef(fence), item })),
    );
    return park(`${list.elements.length} items persisted, ${started.length} started`, now, stopOnFailure);
  }
  if (!done(read, stopOnFailure)) {
    const started = await startMapItems(rt.db, fence, { now, elementsJson: null, concurrency, stopOnFailure });
    if (started)
      await sendItemMessages(
        rt.queue,
        started.map((item) => ({ ...fenceRef(fence), item })),
      );
    return park(`${progress(read)}; ${started?.length ?? 0} started`, now, stopOnFailure);
  }
  return decided(vertex, read, stopOnFailure);
}

const fenceRef = (fence: Fence) => ({ executionId: fence.executionId, vertexId: fence.vertexId });

const park = (detail: string, now: number, stopOnFailure: boolean): RunOutcome => ({
  kind: "parked",
  until: now + MAP_PARK_MS,
  detail: `waiting for its items: ${detail}`,
  mapItems: { stopOnFailure },
});

/** The items are done (the guard the MAP's decision stands on; its SQL twin is src/ledger/map-sql.ts `mapDone`). */
export function done(read: MapItemsRead, stopOnFailure: boolean): boolean {
  if (read.dispatched + read.executing > 0) return false;
  return read.pending === 0 || (stopOnFailure && read.failed > 0);
}

const progress = (r: MapItemsRead) =>
  `${r.completed} of ${r.total} completed, ${r.failed} failed, ${r.dispatched + r.executing} running, ${r.pending} not started`;

/** The MAP's outcome once its items are done: the collected values in list order, or its first item's failure. */
function decided(vertex: MapVertex, read: MapItemsRead, stopOnFailure: boolean): RunOutcome {
  const failed = JSON.parse(read.failedJson) as Array<{ index: number; error: string }>;
  if (stopOnFailure && failed.length > 0) {
    const first = failed[0]!;
    return { kind: "failed", error: `map ${vertex.id}: item ${first.index} failed: ${first.error} (${progress(read)})` };
  }
  if (read.cancelled > 0) return { kind: "failed", error: `map ${vertex.id}: ${read.cancelled} item(s) were cancelled` };
  const items = JSON.parse(read.collectedJson) as unknown[];
  return { kind: "completed", output: stopOnFailure ? items : { items, failed } };
}
