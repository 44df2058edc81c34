/**
 * The vocabulary the OpenAPI document's operations are written in (one module per area under
 * ./paths/, listed in ./operations.ts): an operation, its answers, its problem sets, and one helper
 * per answer or problem shape that several operations share — a new route says what differs, never
 * restates a shape.
 */
import type { z } from "zod";
import { IDEMPOTENCY_KEY_HEADER_PATTERN } from "./patterns";
import type * as res from "./responses";

export type ProblemCode = (typeof res.PROBLEM_CODES)[number];
export type Problems = Partial<Record<number, readonly ProblemCode[]>>;

export interface Answer {
  description: string;
  /** A JSON body; omitted: no body (204) or `contentType` with its own `bodySchema`. */
  schema?: z.ZodType;
  contentType?: string;
  /** For a non-JSON body (the event stream): its JSON Schema. */
  bodySchema?: Record<string, unknown>;
  headers?: readonly HeaderName[];
}

export interface Operation {
  method: "get" | "put" | "post" | "delete";
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** No bearer token: the route authenticates otherwise (a signature) or not at all. */
  public?: boolean;
  /** An operator token (`OPERATOR_TOKENS`) instead of a workspace's. */
  operator?: boolean;
  query?: z.ZodObject;
  /**
   * Query names the route refuses itself with a problem more precise than `query-parameter-unknown`
   * (src/http/route-check.ts lets them through; the document does not list them).
   */
  refusedQuery?: readonly string[];
  headers?: readonly HeaderParameter[];
  body?: { schema: z.ZodType; required: boolean; description: string; contentType?: string };
  answers: Record<number, Answer>;
  problems: Problems;
}

export interface HeaderParameter {
  name: string;
  required: boolean;
  description: string;
  schema?: Record<string, unknown>;
}

/** What an operation says besides its method, path and id (its area gives its tag). */
export type OperationDetails = Omit<Operation, "method" | "path" | "operationId" | "tag">;

/** One operation of an area: `op("get", "/v1/…", "operationId", { summary, answers, problems, … })`. */
export const op = (method: Operation["method"], path: string, operationId: string, details: OperationDetails): Omit<Operation, "tag"> => ({
  method,
  path,
  operationId,
  ...details,
});

/** An area's operations, each under the area's tag (the document's `tags` lists them: ./operations.ts). */
export const area = (tag: string, operations: ReadonlyArray<Omit<Operation, "tag">>): readonly Operation[] =>
  operations.map(({ method, path, operationId, summary, ...details }) => ({ method, path, operationId, summary, tag, ...details }));

export const HEADERS = {
  location: { description: "where the created or named resource is read", schema: { type: "string" } },
  "idempotent-replayed": {
    description: "`true` when this answer is the stored answer of an earlier request with the same Idempotency-Key",
    schema: { type: "string", enum: ["true"] },
  },
  "retry-after": { description: "seconds to wait before retrying the same request", schema: { type: "string" } },
  "www-authenticate": { description: 'Bearer realm="idemflow"', schema: { type: "string" } },
  "execution-removed-at": {
    description: "on an archived trace (`archived: true`) only: when the history sweep removed its rows from the database",
    schema: { type: "string", format: "date-time" },
  },
} as const;
export type HeaderName = keyof typeof HEADERS;

export const idempotencyKey = (required: boolean): HeaderParameter => ({
  name: "Idempotency-Key",
  required,
  description: required
    ? "Required: one unique key per operation, the same on every retry of it; a retry replays the first answer."
    : "Honoured when sent: a retry with the same key replays the first answer; the same key with another request is refused.",
  schema: {
    type: "string",
    minLength: 1,
    pattern: IDEMPOTENCY_KEY_HEADER_PATTERN,
    description:
      'a key of 1–255 printable ASCII characters (0x20–0x7E): bare (no `,`, not starting with `"`), or an RFC 8941 sf-string ' +
      '(`"…"`, with `"` and `\\` escaped by `\\`) for a key holding a comma',
  },
});

// ---- problem sets ------------------------------------------------------------------------------

export function merge(...sets: Problems[]): Problems {
  const merged: Record<number, ProblemCode[]> = {};
  for (const set of sets) {
    for (const [status, codes] of Object.entries(set)) {
      const list = (merged[Number(status)] ??= []);
      for (const code of codes ?? []) if (!list.includes(code)) list.push(code);
    }
  }
  return merged;
}

/** Every authenticated route: the token, and the workspace's shard (src/shards: placement, schema, configuration). */
export const AUTH: Problems = {
  401: ["unauthorized"],
  500: ["internal-error"],
  503: ["shards-misconfigured", "shard-schema-behind", "workspace-misplaced"],
};
/** Behind the Idempotency-Key middleware. */
export const GUARDED: Problems = {
  400: ["idempotency-key-invalid"],
  409: ["idempotency-key-in-progress", "idempotency-key-lost"],
  413: ["payload-too-large"],
  422: ["idempotency-key-mismatch"],
  500: ["idempotency-response-too-large"],
  503: ["idempotency-ledger-unavailable", "idempotency-ledger-error"],
};
export const KEY_REQUIRED: Problems = { 400: ["idempotency-key-missing"] };
/** An authenticated action that requires an Idempotency-Key (the operator actions, erasure, the demo). */
export const KEYED_ACTION: Problems = merge(AUTH, GUARDED, KEY_REQUIRED);
/** A JSON request body: read under the size limit, parsed under the depth limit. */
export const JSON_BODY: Problems = { 400: ["malformed-json", "json-too-deep"], 413: ["payload-too-large"] };
/** A trigger's start (src/ingress): the payload, its identity, the first steps' edges. */
export const START: Problems = {
  400: ["malformed-json", "json-too-deep", "force-new-execution-not-allowed", "client-idempotency-id-invalid"],
  404: ["not-found"],
  413: ["payload-too-large", "stored-payload-too-large"],
  415: ["idempotency-fields-need-json"],
  422: ["idempotency-field-missing", "idempotency-field-empty", "json-number-out-of-range", "edge-condition-failed"],
};
/** A public route a signature authenticates: one answer for every refusal (src/http/public-answer.ts). */
export const PUBLIC_DELIVERY: Problems = { 401: ["delivery-rejected"], 500: ["internal-error"], 503: ["delivery-unavailable"] };

// ---- answer shapes -----------------------------------------------------------------------------

export const json = (description: string, schema: z.ZodType, headers?: readonly HeaderName[]): Answer => ({ description, schema, headers });

/** A `text/event-stream` answer. */
export const eventStream = (description: string): Answer => ({
  description,
  contentType: "text/event-stream",
  bodySchema: { type: "string" },
});

/** A `GET` of the workspace's collection: 200 with its JSON, refused only as any authenticated route is. */
export const listing = (
  path: string,
  operationId: string,
  summary: string,
  description: string,
  schema: z.ZodType,
): Omit<Operation, "tag"> => op("get", path, operationId, { summary, answers: { 200: json(description, schema) }, problems: AUTH });

/** A `DELETE` that answers no body. */
export const DELETED: Record<number, Answer> = { 204: { description: "deleted" } };

/** A `PUT` that saves a document: 200 when it was already the saved one, 201 when it is new; both name it in `Location`. */
export const saved = (schema: z.ZodType, unchanged: string, created: string): Record<number, Answer> => ({
  200: json(unchanged, schema, ["location"]),
  201: json(created, schema, ["location"]),
});

/** A start: 200 for a duplicate of an execution already started, 202 for a new one. */
export const startAnswers = (what: string, schema: z.ZodType): Record<number, Answer> => ({
  200: json(`a duplicate of an execution already started: ${what} names it (deduplicated: true)`, schema, ["location"]),
  202: json(`a new execution started (${what})`, schema, ["location"]),
});

/**
 * A `PUT` that saves a versioned document (a workflow, a connector, an event source): its JSON body,
 * `saved` answers, and the body's problems with the ones its validation answers as 422.
 */
export const savingPut = (
  body: { schema: z.ZodType; description: string },
  answer: { schema: z.ZodType; unchanged: string; created: string },
  invalid: readonly ProblemCode[],
): Omit<OperationDetails, "summary"> => ({
  body: { schema: body.schema, required: true, description: body.description },
  answers: saved(answer.schema, answer.unchanged, answer.created),
  problems: merge(AUTH, JSON_BODY, { 422: invalid }),
});

/**
 * An action that requires an Idempotency-Key (an operator action, an erasure): with `body`, an
 * optional JSON body refused as `body.invalid` when it does not parse or fit; `problems` adds its own.
 */
export const keyedAction = (
  body: { schema: z.ZodType; invalid: ProblemCode } | null,
  answers: Record<number, Answer>,
  problems: Problems,
): Omit<OperationDetails, "summary"> => ({
  headers: [idempotencyKey(true)],
  ...(body ? { body: { schema: body.schema, required: false, description: "optional" } } : {}),
  answers,
  problems: merge(KEYED_ACTION, body ? { 400: ["malformed-json", "json-too-deep", body.invalid] } : {}, problems),
});

/** An event's delivery: 200 for a duplicate, 202 for a new event. */
export const eventAnswers = (schema: z.ZodType, headers?: readonly HeaderName[]): Record<number, Answer> => ({
  200: json("a duplicate: the first delivery's outcome", schema, headers),
  202: json("a new event: the waits it resumed, or buffered", schema, headers),
});
