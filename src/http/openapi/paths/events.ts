/**
 * The OpenAPI operations of the `events` area: events that resume WAIT_FOR_EVENT steps, the waits
 * open on them, event sources and their signed public route (src/http/routes/events.ts, event-sources.ts).
 */
import {
  area,
  AUTH,
  DELETED,
  eventAnswers,
  GUARDED,
  idempotencyKey,
  JSON_BODY,
  json,
  listing,
  merge,
  op,
  PUBLIC_DELIVERY,
  savingPut,
} from "../operation";
import * as req from "../requests";
import * as res from "../responses";

const SOURCE_NOT_FOUND = merge(AUTH, { 404: ["event-source-not-found"] });

export const EVENT_OPERATIONS = area("events", [
  op("post", "/v1/events", "sendEvent", {
    summary: "Send an event: it resumes the wait that matches it, or waits in the buffer for one (deduplicated by id or content)",
    headers: [idempotencyKey(false)],
    body: { schema: req.EventBody, required: true, description: "`{ name, match, id?, data? }`" },
    answers: eventAnswers(res.EventAnswer, ["idempotent-replayed"]),
    problems: merge(AUTH, GUARDED, JSON_BODY, { 422: ["event-invalid", "json-number-out-of-range"] }),
  }),
  op("get", "/v1/waits", "listWaits", {
    summary: "The executions waiting for an event (and a correlation value), oldest first, with their timeouts",
    query: req.WaitListQuery,
    answers: { 200: json("the open waits", res.WaitList) },
    problems: merge(AUTH, { 400: ["invalid-query"], 422: ["event-invalid"] }),
  }),
  listing(
    "/v1/event-sources",
    "listEventSources",
    "The workspace's event sources (how providers' signed webhooks become events), by name",
    "every source",
    res.EventSourceList,
  ),
  op("put", "/v1/event-sources/{name}", "putEventSource", {
    summary: "Create or replace an event source: its signature scheme, its secret (a template) and the expressions that read the event",
    ...savingPut(
      { schema: req.EventSourceDefinition, description: "`{ scheme, secret, name, match, id?, data?, toleranceSeconds? }`" },
      { schema: res.EventSource, unchanged: "replaced, or the same definition again", created: "created" },
      ["event-source-invalid"],
    ),
  }),
  op("get", "/v1/event-sources/{name}", "getEventSource", {
    summary: "One event source, with the path its provider posts to",
    answers: { 200: json("the source", res.EventSource) },
    problems: SOURCE_NOT_FOUND,
  }),
  op("delete", "/v1/event-sources/{name}", "deleteEventSource", {
    summary: "Delete an event source: its deliveries answer 404 from now on",
    answers: DELETED,
    problems: SOURCE_NOT_FOUND,
  }),
  op("post", "/events/{workspaceId}/{source}", "deliverSourceEvent", {
    summary: "Public: a provider's signed webhook, made an event by the workspace's event source (the signature authenticates)",
    public: true,
    headers: [
      {
        name: "webhook-id",
        required: false,
        description: "standard-webhooks: the message id (the event id unless the source reads one)",
      },
      {
        name: "webhook-timestamp",
        required: false,
        description: "standard-webhooks: Unix seconds, within the tolerance (default 300 s)",
      },
      {
        name: "webhook-signature",
        required: false,
        description: "standard-webhooks: `v1,<base64 HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<raw body>>`, space-separated entries",
      },
      {
        name: "x-idemflow-signature",
        required: false,
        description: "v1: `v1=<hex HMAC-SHA256 of v1:<timestamp>:<workspaceId>:events/<source>:<raw body>>`",
      },
      { name: "x-idemflow-timestamp", required: false, description: "v1: Unix seconds, within the tolerance (default 300 s)" },
    ],
    body: { schema: req.TriggerPayload, required: true, description: "the provider's signed JSON body" },
    answers: eventAnswers(res.EventAnswer),
    // One answer for an unknown workspace or source and every signature refusal.
    problems: merge(JSON_BODY, PUBLIC_DELIVERY, { 422: ["event-extract-failed", "event-invalid", "json-number-out-of-range"] }),
  }),
]);
