/** TRANSFORM vertices: evaluate `output` with the bounded evaluator. No side effects, no retries. */
import type { TransformVertex } from "../definitions/schema";
import { evaluateValue } from "../expressions/evaluate";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { errorMessage } from "../lib/log";

export async function runTransform(vertex: TransformVertex, context: ExpressionContext): Promise<RunOutcome> {
  try {
    const output = await evaluateValue(vertex.config.output, context);
    return { kind: "completed", output: output ?? null };
  } catch (error) {
    return { kind: "failed", error: `transform ${vertex.id}: ${errorMessage(error)}` };
  }
}
