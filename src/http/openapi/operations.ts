/**
 * Every operation of the HTTP API, in the order the document lists them, and the document's tags.
 * An area's operations live in its own module under ./paths/ (written with ./operation.ts); a new
 * area is one module there, one line in `OPERATIONS` and one in `TAGS`. src/http/route-check.ts
 * checks every `/v1` request against this same table, so what a route accepts and what the
 * document says cannot differ.
 */
import type { Operation } from "./operation";
import { CONNECTOR_OPERATIONS } from "./paths/connectors";
import { DEMO_OPERATIONS } from "./paths/demo";
import { EVENT_OPERATIONS } from "./paths/events";
import { EXECUTION_OPERATIONS } from "./paths/executions";
import { FLOW_OPERATIONS } from "./paths/flow";
import { META_OPERATIONS } from "./paths/meta";
import { NOTIFICATION_OPERATIONS } from "./paths/notifications";
import { OPERATOR_OPERATIONS } from "./paths/operator";
import { RUN_OPERATIONS } from "./paths/runs";
import { SECRET_OPERATIONS } from "./paths/secrets";
import { WORKFLOW_OPERATIONS } from "./paths/workflows";

export type { Operation } from "./operation";

export const OPERATIONS: readonly Operation[] = [
  ...META_OPERATIONS,
  ...WORKFLOW_OPERATIONS,
  ...RUN_OPERATIONS,
  ...EXECUTION_OPERATIONS,
  ...EVENT_OPERATIONS,
  ...CONNECTOR_OPERATIONS,
  ...FLOW_OPERATIONS,
  ...SECRET_OPERATIONS,
  ...NOTIFICATION_OPERATIONS,
  ...OPERATOR_OPERATIONS,
  ...DEMO_OPERATIONS,
];

/** The document's tags, one per area, in the order a reader meets them. */
export const TAGS: ReadonlyArray<{ name: string; description: string }> = [
  { name: "meta", description: "liveness and this document; no token" },
  { name: "workflows", description: "workflow definitions: versioned, validated on save" },
  { name: "runs", description: "starting executions: production triggers, test runs, streams, signed webhooks" },
  { name: "executions", description: "traces, lists, operator actions, erasure and the stats of duplicates stopped" },
  { name: "events", description: "events that resume WAIT_FOR_EVENT steps, and the waits open on them" },
  { name: "secrets", description: "the workspace's secrets: write-only" },
  { name: "notifications", description: "signed POSTs when an execution fails, is stuck or a key is refused, and their deliveries" },
  { name: "connectors", description: "reusable destinations with their key rule, resolved into a workflow when it is saved" },
  { name: "operator", description: "the deployment's operator: figures that describe every workspace (an `OPERATOR_TOKENS` token)" },
  { name: "demo", description: "demo endpoints of the engine Worker itself" },
];
