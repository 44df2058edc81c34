/** The step queue consumer. */
export async function handleStepBatch(batch: MessageBatch, _env: Env, _ctx: ExecutionContext): Promise<void> {
  batch.ackAll();
}
