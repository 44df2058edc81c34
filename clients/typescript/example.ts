/**
 * The client in use, type-checked by `npm run client:check`: a workflow saved, triggered, its trace
 * read, an event sent and the open waits listed. A change to the API that breaks one of these calls
 * breaks the check.
 */
import { idemflowClient, newIdempotencyKey, type components } from "./index.js";

type Trace = components["schemas"]["Trace"];

export async function example(baseUrl: string): Promise<Trace | undefined> {
  const idemflow = idemflowClient({ baseUrl, token: "dev-token" });

  const saved = await idemflow.PUT("/v1/workflows/{workflowId}", {
    params: { path: { workflowId: "hello" } },
    body: {
      id: "hello",
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "greet", type: "TRANSFORM", config: { output: { greeting: "= 'hello ' & payload.name" } } },
      ],
      edges: [{ from: "received", to: "greet" }],
    },
  });
  if (saved.error) throw new Error(`${saved.error.code}: ${saved.error.detail ?? saved.error.title}`);

  const started = await idemflow.POST("/v1/workflows/{workflowId}/trigger", {
    params: { path: { workflowId: "hello" } },
    body: { name: "Ada" },
  });
  if (started.error || !started.data) return undefined;

  const trace = await idemflow.GET("/v1/executions/{executionId}", { params: { path: { executionId: started.data.executionId } } });

  const event = await idemflow.POST("/v1/events", {
    headers: { "Idempotency-Key": newIdempotencyKey() },
    body: { name: "payment.confirmed", match: "A-1001", data: { amount: 1200 } },
  });
  if (event.data && !event.data.deduplicated) console.log(`resumed ${event.data.resumed.length} wait(s)`);

  const waits = await idemflow.GET("/v1/waits", { params: { query: { event: "payment.confirmed", match: "A-1001" } } });
  for (const wait of waits.data?.waits ?? []) console.log(`${wait.executionId} waits until ${wait.timeoutAt}`);

  return trace.data;
}
