/**
 * An in-isolate cache of each workflow's latest stored version, so a warm trigger costs ONE D1
 * round trip (the start batch) instead of two (read the workflow, then start).
 *
 * A cache is only safe here because it is never trusted: a start that used a cached definition
 * carries its version into the batch, and the batch's first statement checks that it is still
 * the workflow's latest (src/ledger/executions.ts, `requireLatestVersion`). If a newer version
 * was saved since, the batch writes nothing, the entry is dropped, and the caller re-reads and
 * retries. So a stale isolate can cost one extra round trip, never an execution on a superseded
 * version. Bounded (least recently used entries go first); per isolate, so nothing to invalidate
 * across machines.
 */
import { getWorkflow, type StoredWorkflow } from "../definitions/store";

const MAX_ENTRIES = 256;
const cache = new Map<string, StoredWorkflow>();

const keyOf = (workspace: string, workflowId: string) => JSON.stringify([workspace, workflowId]);

export function cachedWorkflow(workspace: string, workflowId: string): StoredWorkflow | undefined {
  const key = keyOf(workspace, workflowId);
  const hit = cache.get(key);
  if (hit) {
    // Refresh its position: Map iteration order is insertion order.
    cache.delete(key);
    cache.set(key, hit);
  }
  return hit;
}

export function rememberWorkflow(workflow: StoredWorkflow): void {
  const key = keyOf(workflow.workspace, workflow.workflowId);
  cache.delete(key);
  cache.set(key, workflow);
  while (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value as string);
}

export function forgetWorkflow(workspace: string, workflowId: string): void {
  cache.delete(keyOf(workspace, workflowId));
}

/** Read the latest version from D1 and remember it; `null` when it does not exist. */
export async function readLatestWorkflow(db: D1Database, workspace: string, workflowId: string): Promise<StoredWorkflow | null> {
  const workflow = await getWorkflow(db, workspace, workflowId);
  if (workflow) rememberWorkflow(workflow);
  else forgetWorkflow(workspace, workflowId);
  return workflow;
}
