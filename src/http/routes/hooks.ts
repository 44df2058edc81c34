/**
 * `POST /hooks/:workspaceId/:workflowId`: the public webhook of an entry point that declares
 * `webhook.signature` (SPEC section 3). No bearer token: the signature is the authentication.
 * Order matters: size limit (413) → signature (401) → parse (400) → identity → start. A request
 * refused at any step writes nothing. An entry point without a signature config has no public
 * hook: 404, the same answer as for a workflow that does not exist.
 */
import { Hono } from "hono";
import type { AppEnv } from "../auth";
import { getWorkflow } from "../../definitions/store";
import { entryPointOf } from "../../definitions/schema";
import { readRawBody } from "../../lib/request-body";
import { ProblemError } from "../../lib/problem";
import { ingressDeps } from "../../ingress/start";
import { parseTriggerBody } from "../../ingress/payload";
import { resolveSigningSecret, verifyWebhookSignature } from "../../ingress/signature";
import { forceNewExecution, maxPayloadBytes, startResponse, triggerFromRequest } from "../../ingress/trigger";

export const hookRoutes = new Hono<AppEnv>();

const noHook = () =>
  new ProblemError({
    status: 404,
    code: "hook-not-found",
    title: "No public hook here",
    detail: "Public hooks exist only for workflows whose ENTRY_POINT declares `webhook.signature`. Use the authenticated `POST /v1/workflows/{workflowId}/trigger` otherwise.",
  });

hookRoutes.post("/:workspaceId/:workflowId", async (c) => {
  const deps = ingressDeps(c.env);
  const workspace = c.req.param("workspaceId");
  const workflowId = c.req.param("workflowId");
  forceNewExecution("production", new URL(c.req.url));
  const workflow = await getWorkflow(deps.db, workspace, workflowId);
  const settings = workflow ? entryPointOf(workflow.definition).config.webhook?.signature : undefined;
  if (!workflow || !settings) throw noHook();
  const secret = resolveSigningSecret(settings, c.env as unknown as Record<string, unknown>);
  const raw = await readRawBody(c.req.raw, maxPayloadBytes(workflow));
  await verifyWebhookSignature({ settings, secret, headers: c.req.raw.headers, raw, nowMs: deps.now() });
  const body = parseTriggerBody(raw, c.req.header("content-type") ?? null);
  const result = await triggerFromRequest(deps, { workspace, workflowId, invocation: "production", request: c.req.raw, workflow, body });
  return startResponse(result);
});
