/**
 * The trigger service behind every HTTP invocation of a workflow: production trigger, public
 * signed hook, test run, stream run. It validates the invocation, reads the body under the entry
 * point's limit, picks the identity and starts the execution. Everything that can be refused is
 * refused before the start batch, so a refusal writes nothing.
 */
import { DEFAULT_MAX_PAYLOAD_BYTES, entryPointOf, MAX_PAYLOAD_BYTES_LIMIT } from "../definitions/schema";
import type { StoredWorkflow } from "../definitions/store";
import { commonProblems } from "../lib/common-problems";
import { WorkflowVersionChanged, type TriggerKind } from "../ledger";
import { cachedWorkflow, readLatestWorkflow } from "./workflow-cache";
import { identityMaterial } from "./material";
import { readTriggerBody, type TriggerBody } from "./payload";
import { ingressProblems } from "./problems";
import { startWorkflowExecution, type IngressDeps, type StartIdentity, type StartResult } from "./start";
import { TestRunQuery, TriggerQuery } from "./queries";

export type Invocation = "production" | "test" | "stream";

export const FORCE_PARAM = "forceNewExecution";

/**
 * `forceNewExecution` only exists on test and stream runs, where it defaults to on. On a
 * production trigger its mere presence is a 400: silently ignoring it would let a caller believe
 * they bypassed dedupe.
 */
export function forceNewExecution(invocation: Invocation, url: URL): boolean {
  const values = url.searchParams.getAll(FORCE_PARAM);
  if (invocation === "production") {
    if (values.length > 0) throw ingressProblems.forceNewExecutionNotAllowed();
    return false;
  }
  if (values.length === 0) return true;
  // Once, and `true` or `false` (TestRunQuery): a repeated parameter is as unclear as a bad one.
  const parsed = TestRunQuery.safeParse({ forceNewExecution: values[0] });
  if (values.length > 1 || !parsed.success) throw ingressProblems.forceNewExecutionInvalid();
  return parsed.data.forceNewExecution === "true";
}

export async function loadWorkflow(db: D1Database, workspace: string, workflowId: string): Promise<StoredWorkflow> {
  const workflow = await readLatestWorkflow(db, workspace, workflowId);
  if (!workflow) throw commonProblems.notFound(`Workflow \`${workflowId}\``);
  return workflow;
}

export function maxPayloadBytes(workflow: StoredWorkflow): number {
  // Clamped: a version saved before the limit was bounded by D1 may declare more (SPEC section 11).
  return Math.min(entryPointOf(workflow.definition).config.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES_LIMIT);
}

/** Choose the identity of an invocation whose body has been read. */
export async function chooseIdentity(
  workflow: StoredWorkflow,
  invocation: Invocation,
  url: URL,
  body: TriggerBody,
  forced: boolean = forceNewExecution(invocation, url),
): Promise<StartIdentity> {
  if (forced) return { kind: "forced" };
  const clientIdempotencyId = clientIdOf(url);
  const { kind, material } = await identityMaterial({
    clientIdempotencyId,
    idempotencyFields: entryPointOf(workflow.definition).config.idempotencyFields,
    body,
  });
  // Invocation kinds map one-to-one onto identity scopes: none dedupes against another.
  return { kind, material, scope: invocation };
}

/** `?clientIdempotencyId=`, checked by its schema when present (most triggers send none: nothing to parse). */
function clientIdOf(url: URL): string | undefined {
  if (url.search === "") return undefined;
  const value = url.searchParams.get("clientIdempotencyId");
  if (value === null) return undefined;
  const query = TriggerQuery.safeParse({ clientIdempotencyId: value });
  if (!query.success) throw ingressProblems.clientIdInvalid();
  return query.data.clientIdempotencyId;
}

const TRIGGER_KIND: Record<Invocation, TriggerKind> = { production: "webhook", test: "test", stream: "stream" };

/**
 * Start a workflow from an HTTP request. `workflow` may be pre-loaded (the signed hook loads it
 * to find its signature settings, and has already read the body to verify it).
 */
export async function triggerFromRequest(
  deps: IngressDeps,
  input: { workspace: string; workflowId: string; invocation: Invocation; request: Request; workflow?: StoredWorkflow; body?: TriggerBody },
): Promise<StartResult> {
  const url = new URL(input.request.url);
  // Refuse a bad flag before touching D1 or the body.
  const forced = forceNewExecution(input.invocation, url);
  const cached = input.workflow ? undefined : cachedWorkflow(input.workspace, input.workflowId);
  let workflow = input.workflow ?? cached ?? (await loadWorkflow(deps.db, input.workspace, input.workflowId));
  const body = input.body ?? (await readTriggerBody(input.request, maxPayloadBytes(workflow)));
  const start = async (requireLatestVersion: boolean) =>
    startWorkflowExecution(deps, {
      workflow,
      triggerKind: TRIGGER_KIND[input.invocation],
      payload: body.payload,
      payloadJson: body.stored,
      identity: await chooseIdentity(workflow, input.invocation, url, body, forced),
      requireLatestVersion,
    });
  if (workflow !== cached) return start(false);
  try {
    return await start(true);
  } catch (error) {
    if (!(error instanceof WorkflowVersionChanged)) throw error;
    // A newer version was saved since this isolate cached the workflow; nothing was written.
    workflow = await loadWorkflow(deps.db, input.workspace, input.workflowId);
    if (body.raw.byteLength > maxPayloadBytes(workflow)) throw commonProblems.payloadTooLarge(maxPayloadBytes(workflow));
    return start(false);
  }
}

/** SPEC section 3: 202 for a new execution, 200 for a duplicate, the same body shape. */
export function startResponse(result: StartResult): Response {
  return new Response(JSON.stringify(result), {
    status: result.deduplicated ? 200 : 202,
    headers: { "content-type": "application/json", location: `/v1/executions/${result.executionId}` },
  });
}
