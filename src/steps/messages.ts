/** The body of a step queue message: which step of which execution to run. */
export interface StepMessage {
  executionId: string;
  vertexId: string;
}
