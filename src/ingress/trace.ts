/**
 * The trace a test run returns after `Prefer: wait=N`: the same one `GET /v1/executions/:id`
 * serves (src/steps/trace.ts), so a test run shows exactly what operators will see.
 */
import { readTrace } from "../steps/trace";

export async function readExecutionTrace(db: D1Database, workspace: string, executionId: string): Promise<Record<string, unknown> | null> {
  return readTrace(db, workspace, executionId);
}
