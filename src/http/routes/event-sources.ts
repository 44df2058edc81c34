/**
 * Event sources (SPEC section 14, docs/waits.md "Event sources"): how a provider's signed webhook
 * becomes an event.
 *
 * In the bearer token's workspace (like /v1/secrets):
 *   PUT    /v1/event-sources/{name}   the definition (src/events/source-definition.ts): 201 new, 200 replaced
 *                                     or unchanged; 422 `event-source-invalid` with every error's pointer
 *   GET    /v1/event-sources          every source of the workspace, by name
 *   GET    /v1/event-sources/{name}   one, with the URL to give the provider
 *   DELETE /v1/event-sources/{name}   204, or 404 `event-source-not-found`
 *
 * Public, the signature is the authentication (like /hooks):
 *   POST /events/{workspace}/{source}  → 202 a new event / 200 a duplicate, answered as POST /v1/events.
 *
 * The public route's order, as the hook's (src/http/routes/hooks.ts): the workspace's shard (no
 * placement recorded: anyone may name any workspace) → the source with its sealed secrets, one
 * statement → the secret (503) → the size-limited raw body (413) → the signature (401) → JSON, with
 * numbers a double cannot carry refused (400/422) → the expressions (422 `event-extract-failed`)
 * → the delivery batch. Every refusal comes before the batch: it writes nothing. An unknown
 * workspace or source and every signature refusal answer one 401 `delivery-rejected`, the
 * deployment's problems one 503 `delivery-unavailable` (../public-answer.ts): an anonymous caller
 * learns no name; the log has the reason.
 */
import { Hono, type Context } from "hono";
import { ingestEvent } from "../../events/ingest";
import { eventProblems } from "../../events/problems";
import { EVENT_SOURCE_NAME_PATTERN, MAX_SOURCE_DEFINITION_BYTES, validateEventSource } from "../../events/source-definition";
import { extractEvent } from "../../events/source-extract";
import { resolveSourceSecret, verifySourceDelivery } from "../../events/source-signature";
import {
  deleteEventSource,
  getEventSource,
  getEventSourceWithSecrets,
  listEventSources,
  putEventSource,
  type StoredEventSource,
} from "../../events/source-store";
import { ingressProblems } from "../../ingress/problems";
import { findUnsafeNumberLiteral } from "../../lib/json-numbers";
import { readJsonBody, readRawBody, parseJsonBytesWithText } from "../../lib/request-body";
import { secretLookup } from "../../secrets/resolve";
import { placeWorkspace } from "../../shards/placement";
import type { StepQueue } from "../../steps/runtime";
import { requireWorkspace, type AppEnv } from "../auth";
import { answeringAnonymously } from "../public-answer";
import { nowOf } from "../../lib/clock";

/**
 * A provider's webhook is its own shape, often larger than the part a workflow needs; the event's
 * data stays bounded at 256 KiB (src/events/ingest.ts), whatever `data` selects.
 */
export const MAX_SOURCE_BODY_BYTES = 1024 * 1024;

export const eventSourceRoutes = new Hono<AppEnv>();
eventSourceRoutes.use("*", requireWorkspace);

/** Where the provider sends its webhooks (relative to the engine's origin). */
export function deliveryPath(workspace: string, name: string): string {
  return `/events/${encodeURIComponent(workspace)}/${name}`;
}

function present(source: StoredEventSource) {
  return {
    name: source.name,
    version: source.version,
    url: deliveryPath(source.workspace, source.name),
    definition: source.definition,
    createdAt: new Date(source.createdAt).toISOString(),
    updatedAt: new Date(source.updatedAt).toISOString(),
  };
}

eventSourceRoutes.put("/:name", async (c) => {
  const name = c.req.param("name");
  const { json } = await readJsonBody(c.req.raw, MAX_SOURCE_DEFINITION_BYTES);
  const result = await validateEventSource(json);
  const errors = result.ok ? [] : [...result.errors];
  if (!EVENT_SOURCE_NAME_PATTERN.test(name)) {
    errors.unshift({
      pointer: "",
      code: "source-name-invalid",
      message:
        `the name in the path ("${name.slice(0, 80)}") must be letters, digits, \`_\` or \`-\`, ` +
        "starting with a letter or digit (at most 64)",
    });
  }
  if (!result.ok || errors.length > 0) throw eventProblems.sourceInvalid(errors);
  const { stored, created } = await putEventSource(c.env.DB, c.get("workspace"), name, result, nowOf(c.env));
  return c.json(present(stored), created ? 201 : 200, { location: `/v1/event-sources/${name}` });
});

eventSourceRoutes.get("/", async (c) => {
  const sources = await listEventSources(c.env.DB, c.get("workspace"));
  return c.json({ items: sources.map(present) });
});

eventSourceRoutes.get("/:name", async (c) => {
  const name = c.req.param("name");
  const source = EVENT_SOURCE_NAME_PATTERN.test(name) ? await getEventSource(c.env.DB, c.get("workspace"), name) : null;
  if (!source) throw eventProblems.sourceNotFound(name);
  return c.json(present(source));
});

eventSourceRoutes.delete("/:name", async (c) => {
  const name = c.req.param("name");
  if (!EVENT_SOURCE_NAME_PATTERN.test(name) || !(await deleteEventSource(c.env.DB, c.get("workspace"), name))) {
    throw eventProblems.sourceNotFound(name);
  }
  return c.body(null, 204);
});

export const sourceDeliveryRoutes = new Hono<AppEnv>();

sourceDeliveryRoutes.post("/:workspaceId/:source", async (c) => {
  const workspace = c.req.param("workspaceId");
  const name = c.req.param("source");
  // An anonymous caller learns nothing of which names exist (src/http/public-answer.ts).
  return answeringAnonymously({ route: "events", workspace, name }, () => deliver(c, workspace, name));
});

async function deliver(c: Context<AppEnv>, workspace: string, name: string): Promise<Response> {
  if (!EVENT_SOURCE_NAME_PATTERN.test(name)) throw eventProblems.sourceNotFound(name);
  // The public route records no placement (a name must not become a row): it reads its shard, fenced.
  c.env = await placeWorkspace(c.env, workspace, { record: false });
  const found = await getEventSourceWithSecrets(c.env.DB, workspace, name);
  if (!found) throw eventProblems.sourceNotFound(name);
  const { source, secrets } = found;
  const target = { workspace, source: name };
  const lookup = secretLookup({ workspace, stored: secrets, env: c.env as unknown as Record<string, unknown> });
  const secret = await resolveSourceSecret(source.definition, lookup, target);
  const raw = await readRawBody(c.req.raw, MAX_SOURCE_BODY_BYTES);
  const now = nowOf(c.env);
  const delivery = await verifySourceDelivery({
    definition: source.definition,
    secret,
    target,
    headers: c.req.raw.headers,
    raw,
    nowMs: now,
  });
  const { text, json } = parseJsonBytesWithText(raw);
  const unsafe = findUnsafeNumberLiteral(text);
  if (unsafe) throw ingressProblems.numberOutOfRange(unsafe, "body");
  const event = await extractEvent({ name, definition: source.definition }, json, delivery);
  const { answer } = await ingestEvent(event, {
    db: c.env.DB,
    queue: c.env.QUEUE as unknown as StepQueue,
    vars: c.env as unknown as Record<string, unknown>,
    workspace,
    source: name,
    // A Standard Webhooks `webhook-id` deduplicates per signing secret, not per source (src/events/source-signature.ts).
    ...(event.idScope === undefined ? {} : { idScope: event.idScope }),
    now,
  });
  return c.json(answer, answer.deduplicated ? 200 : 202);
}
