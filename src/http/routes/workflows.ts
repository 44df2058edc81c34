/**
 * Workflow definitions over HTTP (SPEC section 7):
 *   PUT /v1/workflows/{workflowId}   save (201 new version, 200 already saved, 422 every error); the
 *                                    steps that name a connector are resolved first (docs/connectors.md),
 *                                    and a write without a key is a warning in the answer (or refused
 *                                    for a workspace in KEYLESS_WRITES_REFUSED)
 *   GET /v1/workflows/{workflowId}   the latest version, or `?version=`; a scheduled workflow's latest
 *                                    version also shows its recent scheduled runs (`scheduleRuns`)
 *   GET /v1/workflows                list (`?after=` & `?limit=` page by id)
 * Every route is scoped to the bearer token's workspace; another workspace's workflow is a 404.
 */
import { Hono } from "hono";
import { requireWorkspace, type AppEnv } from "../auth";
import { readJsonBody } from "../../lib/request-body";
import { commonProblems } from "../../lib/common-problems";
import { isoTime } from "../../lib/iso-time";
import { configuredCrons } from "../../definitions/crons";
import { getWorkflow, listWorkflows, saveWorkflow, type StoredWorkflow } from "../../definitions/store";
import { validateDefinition, type ValidationError } from "../../definitions/validate";
import { asRecord } from "../../definitions/errors";
import { definitionProblems } from "../../definitions/problems";
import { entryPointOf } from "../../definitions/schema";
import { WorkflowListQuery, WorkflowReadQuery } from "../openapi/requests";
import { parseQuery } from "../query-params";
import { recentScheduleRuns, type ScheduleRunRecord } from "../../ledger";
import { authorsErrors, connectorNamesOf, resolveConnectors } from "../../connectors/resolve";
import { latestConnectors } from "../../connectors/store";
import { connectorProblems } from "../../connectors/problems";
import { keylessWritesRefused } from "../../definitions/keyless-writes";
import { nowOf } from "../../lib/clock";

/** How many scheduled runs the workflow read shows (newest minute first). */
const SCHEDULE_RUNS_SHOWN = 20;

/** Definitions are small documents; 256 KiB leaves room for large TRANSFORM templates. */
export const MAX_DEFINITION_BYTES = 256 * 1024;

export const workflowRoutes = new Hono<AppEnv>();

workflowRoutes.put("/:workflowId", requireWorkspace, async (c) => {
  const workflowId = c.req.param("workflowId");
  const workspace = c.get("workspace");
  const { json } = await readJsonBody(c.req.raw, MAX_DEFINITION_BYTES);
  // Connectors are resolved into the definition before it is validated and hashed (src/connectors/resolve.ts).
  const allowlist = (c.env as { OUTBOUND_ALLOWLIST?: string }).OUTBOUND_ALLOWLIST ?? "";
  const connectors = await latestConnectors(c.env.DB, workspace, connectorNamesOf(json));
  const resolution = resolveConnectors(json, connectors, { allowlist });
  const result = validateDefinition(resolution.document, { crons: configuredCrons(c.env) });
  const errors: ValidationError[] = authorsErrors(resolution, result.ok ? [] : result.errors);
  const bodyId = asRecord(json)?.id;
  if (bodyId !== workflowId) {
    errors.unshift({
      pointer: "/id",
      code: "id-mismatch",
      message: `the body's id (${JSON.stringify(bodyId)}) differs from the id in the path ("${workflowId}"); make them equal`,
    });
  }
  if (!result.ok || errors.length > 0) throw definitionProblems.invalidDefinition(errors);
  if (
    result.warnings.length > 0 &&
    keylessWritesRefused((c.env as { KEYLESS_WRITES_REFUSED?: string }).KEYLESS_WRITES_REFUSED, workspace)
  ) {
    throw connectorProblems.keylessWriteRefused(result.warnings);
  }

  const { version, created } = await saveWorkflow(c.env.DB, workspace, result.definition, nowOf(c.env));
  const location = `/v1/workflows/${encodeURIComponent(workflowId)}?version=${version}`;
  const warnings = result.warnings.length > 0 ? { warnings: result.warnings } : {};
  return c.json({ workflowId, version, created, ...warnings }, created ? 201 : 200, { location });
});

workflowRoutes.get("/:workflowId", requireWorkspace, async (c) => {
  const workflowId = c.req.param("workflowId");
  const { version } = parseQuery(WorkflowReadQuery, c.req.query(), () => definitionProblems.invalidVersion());
  const stored = await getWorkflow(c.env.DB, c.get("workspace"), workflowId, version);
  if (!stored) throw commonProblems.notFound(version ? `Version ${version} of workflow "${workflowId}"` : `Workflow "${workflowId}"`);
  // Operators see scheduled starts here: which minutes started which execution, and which failed (with the error).
  if (version === undefined && entryPointOf(stored.definition).config.schedule !== undefined) {
    const runs = await recentScheduleRuns(c.env.DB, stored.workspace, stored.workflowId, SCHEDULE_RUNS_SHOWN);
    return c.json({ ...present(stored), scheduleRuns: runs.map(presentRun) });
  }
  return c.json(present(stored));
});

workflowRoutes.get("/", requireWorkspace, async (c) => {
  const { after, limit } = parseQuery(WorkflowListQuery, c.req.query(), () => definitionProblems.invalidLimit());
  const items = await listWorkflows(c.env.DB, c.get("workspace"), { after, limit });
  return c.json({
    items: items.map((w) => ({ ...w, updatedAt: isoTime(w.updatedAt) })),
    next: items.length === limit ? items[items.length - 1]!.workflowId : null,
  });
});

function present(stored: StoredWorkflow) {
  return {
    workflowId: stored.workflowId,
    version: stored.version,
    createdAt: isoTime(stored.createdAt),
    definition: stored.definition,
  };
}

function presentRun(run: ScheduleRunRecord) {
  return {
    cron: run.cron,
    scheduledTime: isoTime(run.scheduledAt),
    status: run.status,
    attempts: run.attempts,
    executionId: run.executionId,
    error: run.error,
    updatedAt: isoTime(run.updatedAt),
  };
}
