/**
 * `POST /hooks/:workspaceId/:workflowId`: the public webhook of an entry point that declares
 * `webhook.signature` (SPEC section 3). No bearer token: the signature is the authentication.
 * Order matters: unsigned identity inputs in the query (400) → size limit (413) → signature (401)
 * → parse (400) → identity → start. A request
 * refused at any step writes nothing. An entry point without a signature config has no public
 * hook. An unknown workspace or workflow, a hook without a signature config and every signature
 * refusal answer one 401 `delivery-rejected`, and the deployment's problems one 503
 * `delivery-unavailable`: nothing tells an anonymous caller which names exist (../public-answer.ts).
 */
import { Hono, type Context } from "hono";
import type { AppEnv } from "../auth";
import { getWorkflowWithSecrets } from "../../definitions/store";
import { entryPointOf } from "../../definitions/schema";
import { readRawBody } from "../../lib/request-body";
import { ingressDeps } from "../../ingress/start";
import { requestCtx } from "../execution-ctx";
import { parseSignedTriggerBody } from "../../ingress/payload";
import { ingressProblems } from "../../ingress/problems";
import { resolveSigningSecret, verifyWebhookSignature } from "../../ingress/signature";
import { secretLookup } from "../../secrets/resolve";
import { placeWorkspace } from "../../shards/placement";
import { answeringAnonymously } from "../public-answer";
import { forceNewExecution, maxPayloadBytes, startResponse, triggerFromRequest } from "../../ingress/trigger";

export const hookRoutes = new Hono<AppEnv>();

hookRoutes.post("/:workspaceId/:workflowId", async (c) => {
  const workspace = c.req.param("workspaceId");
  const workflowId = c.req.param("workflowId");
  // An anonymous caller learns nothing of which names exist (src/http/public-answer.ts).
  return answeringAnonymously({ route: "hooks", workspace, name: workflowId }, () => deliver(c, workspace, workflowId));
});

async function deliver(c: Context<AppEnv>, workspace: string, workflowId: string): Promise<Response> {
  // The public route records no placement (anyone may name any workspace): it reads its shard, fenced.
  c.env = await placeWorkspace(c.env, workspace, { record: false });
  const deps = ingressDeps(c.env, requestCtx(c));
  const url = new URL(c.req.url);
  forceNewExecution("production", url);
  // Only the scheme, timestamp, target and body are signed (not the query), so nothing else may
  // choose the identity: a captured delivery replayed inside the tolerance with
  // `?clientIdempotencyId=<anything new>` would otherwise start a new execution per replay.
  // Identity on a hook comes from the signed body (`idempotencyFields` or content).
  if (url.searchParams.has("clientIdempotencyId")) throw ingressProblems.clientIdNotSigned();
  // One statement: the workflow and the sealed secrets it names (its signing secret among them).
  const found = await getWorkflowWithSecrets(deps.db, workspace, workflowId);
  const workflow = found?.workflow;
  const settings = workflow ? entryPointOf(workflow.definition).config.webhook?.signature : undefined;
  if (!found || !workflow || !settings) throw ingressProblems.hookNotFound();
  const target = { workspace, workflowId };
  const lookup = secretLookup({ workspace, stored: found.secrets, env: c.env as unknown as Record<string, unknown> });
  const secret = await resolveSigningSecret(settings, lookup, target);
  const raw = await readRawBody(c.req.raw, maxPayloadBytes(workflow));
  await verifyWebhookSignature({ settings, secret, target, headers: c.req.raw.headers, raw, nowMs: deps.now() });
  // The signed bytes alone decide JSON or not: `content-type` is unsigned (see parseSignedTriggerBody).
  const body = parseSignedTriggerBody(raw, c.req.header("content-type") ?? null);
  const result = await triggerFromRequest(deps, { workspace, workflowId, invocation: "production", request: c.req.raw, workflow, body });
  return startResponse(result);
}
