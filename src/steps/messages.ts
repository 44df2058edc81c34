/**
 * The body of a step queue message: which step of which execution to run — and, for one item of a
 * MAP (docs/steps.md "MAP"), which item: `item` is its index in the MAP's persisted list. An item
 * has its own field rather than a derived vertex id, which could collide with a real one.
 */
export interface StepMessage {
  executionId: string;
  vertexId: string;
  item?: number;
  /** An undo step of a compensation (docs/steps.md "Compensation"): its place in the order; `vertexId` is the step it undoes. */
  undo?: number;
  /**
   * A permit waiter's wake-up (docs/connectors.md "Limits"): met by a settled step it is expected — the
   * waiter was woken sooner and ran — not a stopped redelivery.
   */
  wake?: "permit";
}

/** The most items a MAP holds (src/definitions/schema.ts MAP_MAX_ITEMS): an index is below it. */
const MAX_ITEM_INDEX = 999;

/**
 * A queue body is untrusted input: anything but `{ executionId, vertexId }` strings, with an
 * optional integer `item` from 0 to 999, is poison.
 */
export function parseStepMessage(body: unknown): StepMessage | null {
  if (body === null || typeof body !== "object") return null;
  const { executionId, vertexId, item, undo, wake } = body as Record<string, unknown>;
  const permitWake = wake === "permit" ? { wake: "permit" as const } : {};
  if (typeof executionId !== "string" || executionId.length === 0 || executionId.length > 128) return null;
  if (typeof vertexId !== "string" || vertexId.length === 0 || vertexId.length > 64) return null;
  if (undo !== undefined) {
    if (item !== undefined || typeof undo !== "number" || !Number.isInteger(undo) || undo < 0 || undo > MAX_ITEM_INDEX) return null;
    return { executionId, vertexId, undo };
  }
  if (item === undefined) return { executionId, vertexId, ...permitWake };
  if (typeof item !== "number" || !Number.isInteger(item) || item < 0 || item > MAX_ITEM_INDEX) return null;
  return { executionId, vertexId, item, ...permitWake };
}
