/**
 * Sending step messages — always AFTER the batch that made the steps DISPATCHED committed. A send
 * that fails is logged and left to the reaper: the row is the truth, the message only a wake-up.
 */
import type { ItemRef, StepRef } from "../ledger";
import type { StepQueue } from "./runtime";
import { errorMessage, log } from "../lib/log";

const SEND_BATCH_LIMIT = 100;

/** `wake`: the messages are a permit waiter's wake-ups (src/steps/messages.ts `wake`). */
export async function sendStepMessages(queue: StepQueue, steps: readonly StepRef[], delaySeconds = 0, wake?: "permit"): Promise<boolean> {
  if (steps.length === 0) return true;
  try {
    for (let i = 0; i < steps.length; i += SEND_BATCH_LIMIT) {
      const chunk = steps.slice(i, i + SEND_BATCH_LIMIT).map((s) => ({
        body: { executionId: s.executionId, vertexId: s.vertexId, ...(wake ? { wake } : {}) },
        ...(delaySeconds > 0 ? { delaySeconds } : {}),
      }));
      await queue.sendBatch(chunk);
    }
    return true;
  } catch (error) {
    log.error("step.send_failed", {
      message: "step message send failed after commit; the reaper will re-send",
      steps: steps.map((s) => ({ executionId: s.executionId, vertexId: s.vertexId })),
      error: errorMessage(error),
    });
    return false;
  }
}

/** The messages of MAP items (`{ executionId, vertexId, item }`), after the batch that dispatched them committed. */
export async function sendItemMessages(queue: StepQueue, items: readonly ItemRef[], delaySeconds = 0, wake?: "permit"): Promise<boolean> {
  if (items.length === 0) return true;
  try {
    for (let i = 0; i < items.length; i += SEND_BATCH_LIMIT) {
      const chunk = items.slice(i, i + SEND_BATCH_LIMIT).map((s) => ({
        body: { executionId: s.executionId, vertexId: s.vertexId, item: s.item, ...(wake ? { wake } : {}) },
        ...(delaySeconds > 0 ? { delaySeconds } : {}),
      }));
      await queue.sendBatch(chunk);
    }
    return true;
  } catch (error) {
    log.error("step.send_failed", {
      message: "item message send failed after commit; the reaper will re-send",
      items: items.map((s) => ({ executionId: s.executionId, vertexId: s.vertexId, item: s.item })),
      error: errorMessage(error),
    });
    return false;
  }
}
