/**
 * The HTTP surface: one Hono app, one error handler. Every error becomes
 * `application/problem+json` here (src/lib/problem.ts), whatever layer threw it.
 */
import { Hono } from "hono";
import { requireConfiguredTokens, type AppEnv } from "./http/auth";
import { checkRoute } from "./http/route-check";
import { ProblemError } from "./lib/problem";
import { commonProblems } from "./lib/common-problems";
import { workflowRoutes } from "./http/routes/workflows";
import { triggerRoutes } from "./http/routes/triggers";
import { hookRoutes } from "./http/routes/hooks";
import { executionRoutes } from "./http/routes/executions";
import { mapItemRoutes } from "./http/routes/map-items";
import { compensationRoutes } from "./http/routes/compensation";
import { statsRoutes } from "./http/routes/stats";
import { demoRoutes } from "./http/routes/demo";
import { secretRoutes } from "./http/routes/secrets";
import { notificationRoutes } from "./http/routes/notifications";
import { operatorRoutes } from "./http/routes/operator";
import { eventRoutes, waitRoutes } from "./http/routes/events";
import { connectorRoutes } from "./http/routes/connectors";
import { eventSourceRoutes, sourceDeliveryRoutes } from "./http/routes/event-sources";
import { serveOpenApi } from "./http/openapi/document";
import { log } from "./lib/log";

export const app = new Hono<AppEnv>();

app.get("/health", (c) => c.json({ ok: true, service: "idemflow" }));

// Every /v1 request's method and query names against the document's operations (405, 400), then
// the public document, then no /v1 route at all without configured tokens (503).
app.use("/v1/*", checkRoute);
app.get("/v1/openapi.json", () => serveOpenApi());
app.use("/v1/*", requireConfiguredTokens);
// The operator's routes (an OPERATOR_TOKENS token, never a workspace's): mounted before the
// workspace groups. Each group applies the workspace middleware to its own paths only (no `/v1/*`
// middleware), so it never sees /v1/operator, and an operator token grants no workspace route.
app.route("/v1/operator", operatorRoutes);
app.route("/v1/workflows", workflowRoutes);
app.route("/v1/workflows", triggerRoutes);
// A MAP's items (docs/steps.md "MAP"): before the executions group, so its own workspace check is the only one.
app.route("/v1/executions", mapItemRoutes);
// The operator's actions on a failed compensation (docs/steps.md "Compensation"): likewise before the executions group.
app.route("/v1/executions", compensationRoutes);
app.route("/v1/executions", executionRoutes);
app.route("/v1/secrets", secretRoutes);
app.route("/v1/notifications", notificationRoutes);
app.route("/v1/connectors", connectorRoutes);
app.route("/v1/stats", statsRoutes);
app.route("/v1/events", eventRoutes);
app.route("/v1/waits", waitRoutes);
app.route("/v1/event-sources", eventSourceRoutes);
app.route("/hooks", hookRoutes);
app.route("/events", sourceDeliveryRoutes);
app.route("/demo", demoRoutes);

app.notFound(() => commonProblems.routeNotFound().toResponse());

app.onError((error) => {
  if (error instanceof ProblemError) return error.toResponse();
  log.error("http.unhandled_error", { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
  return commonProblems.internal().toResponse();
});
