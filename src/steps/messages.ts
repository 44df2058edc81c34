/** The body of a step queue message: which step of which execution to run. */
export interface StepMessage {
  executionId: string;
  vertexId: string;
}

/** A queue body is untrusted input: anything but `{ executionId, vertexId }` strings is poison. */
export function parseStepMessage(body: unknown): StepMessage | null {
  if (body === null || typeof body !== "object") return null;
  const { executionId, vertexId } = body as Record<string, unknown>;
  if (typeof executionId !== "string" || executionId.length === 0 || executionId.length > 128) return null;
  if (typeof vertexId !== "string" || vertexId.length === 0 || vertexId.length > 64) return null;
  return { executionId, vertexId };
}
