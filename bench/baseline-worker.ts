/**
 * The idemflow engine as `npm run bench` runs it: src/index.ts, unchanged, plus the bench-only
 * baseline route — so the production Worker carries no bench code.
 *
 * `POST /v1/workflows/:workflowId/trigger-baseline` (bench/triggers.mjs): the same bearer auth and
 * body reading as `/trigger`, then ONE plain INSERT of an execution row — no identity, no dedupe,
 * no steps. It prices what an engine without dedupe does per trigger, next to the real route.
 * Every other request goes to the engine.
 */
import engine from "../src/index";
import { workspaceForToken } from "../src/http/auth";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "../src/definitions/schema";
import { readJsonBody } from "../src/lib/request-body";
import { randomExecutionId } from "../src/ingress/identity";

const BASELINE = /^\/v1\/workflows\/([^/]+)\/trigger-baseline$/;

async function triggerBaseline(request: Request, env: Env, workflowId: string): Promise<Response> {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "")?.[1];
  const workspace = token ? await workspaceForToken(env.API_TOKENS, token) : undefined;
  if (!workspace) return new Response(null, { status: 401 });
  const { json } = await readJsonBody(request, DEFAULT_MAX_PAYLOAD_BYTES);
  const id = randomExecutionId();
  const now = Date.now();
  await env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, status, payload,
                             created_at, updated_at, finished_at)
     VALUES (?1, ?2, ?3, 'baseline', 'baseline', 'test', 'forced', 'COMPLETED', ?4, ?5, ?5, ?5)`,
  )
    .bind(id, workspace, decodeURIComponent(workflowId), JSON.stringify(json), now)
    .run();
  return Response.json({ executionId: id }, { status: 202 });
}

export default {
  fetch(request, env, ctx) {
    const baseline = request.method === "POST" ? BASELINE.exec(new URL(request.url).pathname) : null;
    if (baseline?.[1]) return triggerBaseline(request, env, baseline[1]);
    return engine.fetch(request, env, ctx);
  },
  queue: (batch, env, ctx) => engine.queue(batch, env, ctx),
  scheduled: (controller, env, ctx) => engine.scheduled(controller, env, ctx),
} satisfies ExportedHandler<Env>;
