/**
 * Connectors (SPEC section 15, docs/connectors.md), in the bearer token's workspace:
 *   PUT    /v1/connectors/{name}   save a version: 201 new, 200 unchanged; 422 `connector-invalid`
 *                                  with every error's pointer
 *   GET    /v1/connectors          the workspace's connectors (latest versions), by name
 *   GET    /v1/connectors/{name}[?version=]
 *   GET    /v1/connectors/{name}/state  the live state of its limits: in flight, tokens, paused until
 *   DELETE /v1/connectors/{name}   204; saved workflow versions keep their resolved steps
 * No Idempotency-Key: a PUT is idempotent by itself (the same document is the same version).
 */
import { Hono } from "hono";
import { asRecord } from "../../definitions/errors";
import { CONNECTOR_NAME_PATTERN } from "../../definitions/schema";
import { connectorProblems } from "../../connectors/problems";
import { deleteConnector, getConnector, listConnectors, putConnector } from "../../connectors/store";
import type { StoredConnector } from "../../connectors/schema";
import { validateConnector } from "../../connectors/validate";
import { definitionProblems } from "../../definitions/problems";
import { commonProblems } from "../../lib/common-problems";
import { isoTime } from "../../lib/iso-time";
import { readJsonBody } from "../../lib/request-body";
import { requireWorkspace, type AppEnv } from "../auth";
import { WorkflowReadQuery } from "../openapi/requests";
import { parseQuery } from "../query-params";
import { nowOf } from "../../lib/clock";
import { presentState } from "../../flow/state";
import { readScopeState } from "../../ledger/connector-permits";

/** A connector is a short document: headers, a key rule, a probe. */
export const MAX_CONNECTOR_BYTES = 64 * 1024;

export const connectorRoutes = new Hono<AppEnv>();
connectorRoutes.use("*", requireWorkspace);

function present(stored: StoredConnector) {
  return { name: stored.name, version: stored.version, createdAt: isoTime(stored.createdAt), definition: stored.definition };
}

connectorRoutes.put("/:name", async (c) => {
  const name = c.req.param("name");
  const { json } = await readJsonBody(c.req.raw, MAX_CONNECTOR_BYTES);
  const result = validateConnector(json, { allowlist: (c.env as { OUTBOUND_ALLOWLIST?: string }).OUTBOUND_ALLOWLIST ?? "" });
  const errors = result.ok ? [] : [...result.errors];
  const bodyName = asRecord(json)?.name;
  if (bodyName !== name || !CONNECTOR_NAME_PATTERN.test(name)) {
    errors.unshift({
      pointer: "/name",
      code: "name-mismatch",
      message: `the body's name (${JSON.stringify(bodyName)}) differs from the name in the path ("${name.slice(0, 80)}"); make them equal`,
    });
  }
  if (!result.ok || errors.length > 0) throw connectorProblems.invalid(errors);
  const { $schema: _editorHint, ...definition } = result.definition;
  const { version, created } = await putConnector(c.env.DB, c.get("workspace"), definition, nowOf(c.env));
  return c.json({ name, version, created }, created ? 201 : 200, { location: `/v1/connectors/${name}?version=${version}` });
});

connectorRoutes.get("/", async (c) => {
  const items = await listConnectors(c.env.DB, c.get("workspace"));
  return c.json({ items: items.map(present) });
});

connectorRoutes.get("/:name", async (c) => {
  const name = c.req.param("name");
  const { version } = parseQuery(WorkflowReadQuery, c.req.query(), () => definitionProblems.invalidVersion());
  const stored = CONNECTOR_NAME_PATTERN.test(name) ? await getConnector(c.env.DB, c.get("workspace"), name, version) : null;
  if (!stored) throw commonProblems.notFound(version ? `Version ${version} of connector "${name}"` : `Connector "${name}"`);
  return c.json(present(stored));
});

/** The live state of the connector's limits (docs/connectors.md "Limits"): read now, not versioned. */
connectorRoutes.get("/:name/state", async (c) => {
  const name = c.req.param("name");
  const workspace = c.get("workspace");
  const stored = CONNECTOR_NAME_PATTERN.test(name) ? await getConnector(c.env.DB, workspace, name) : null;
  if (!stored) throw commonProblems.notFound(`Connector "${name}"`);
  const now = nowOf(c.env);
  return c.json(presentState(name, await readScopeState(c.env.DB, workspace, name, now)));
});

connectorRoutes.delete("/:name", async (c) => {
  const name = c.req.param("name");
  if (!CONNECTOR_NAME_PATTERN.test(name) || !(await deleteConnector(c.env.DB, c.get("workspace"), name))) {
    throw commonProblems.notFound(`Connector "${name}"`);
  }
  return c.body(null, 204);
});
