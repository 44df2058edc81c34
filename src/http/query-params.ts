/**
 * The list and stats routes' query parameters and the operator actions' bodies, parsed with the
 * same zod schemas the OpenAPI document is generated from (src/http/openapi/requests.ts), so what
 * a route accepts and what the document says it accepts cannot differ. A refusal is the route's
 * own problem, naming the parameter or member.
 */
import type { z } from "zod";
import { parseJsonBytes, readRawBody } from "../lib/request-body";
import { executionProblems } from "../steps/problems";
import { EXECUTION_STATUSES } from "./openapi/responses";

/**
 * Query parameters arrive as text; `limit` is a number in the schema (the document says integer),
 * so it is read as one here — "abc" becomes NaN, which the schema refuses like any bad number.
 */
export function parseQuery<S extends z.ZodType>(
  schema: S,
  query: Record<string, string>,
  refuse: (name: string, given: string, message: string) => Error = listRefusal,
): z.output<S> {
  const input: Record<string, unknown> = { ...query };
  if (query.limit !== undefined) input.limit = query.limit.trim() === "" ? NaN : Number(query.limit);
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const name = String(parsed.error.issues[0]?.path[0] ?? "");
  throw refuse(name, query[name] ?? "", parsed.error.issues[0]?.message ?? "not accepted");
}

/** The execution list's and the stats' refusals (400 `invalid-query`, naming the parameter). */
function listRefusal(name: string, given: string, message: string): Error {
  switch (name) {
    case "status":
      return executionProblems.invalidStatus(EXECUTION_STATUSES, given);
    case "limit":
      return executionProblems.invalidLimit();
    case "since":
    case "until":
      return executionProblems.invalidTime(name, given);
    case "hadDuplicates":
    case "retried":
      return executionProblems.invalidFlag(name, given);
    default:
      return executionProblems.invalidParameter(name || "the query", message);
  }
}

/** An ISO 8601 date-time the schema accepted, as ms since the epoch. */
export const timeOf = (value: string | undefined): number | undefined => (value === undefined ? undefined : Date.parse(value));

/**
 * An operator action's body: none (the schema's defaults), or a JSON object the schema accepts
 * (`RetryBody`, `CancelBody`). `invalid` is the action's own 400 problem.
 */
export async function parseOperatorBody<S extends z.ZodType>(
  request: Request,
  schema: S,
  invalid: (reason: string) => Error,
): Promise<z.output<S>> {
  const raw = await readRawBody(request, MAX_OPERATOR_BODY_BYTES);
  const body = raw.byteLength === 0 ? {} : parseJsonBytes(raw);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("The body is not a JSON object");
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys") throw invalid(`Unknown member ${JSON.stringify(issue.keys[0])}`);
  const member = String(issue?.path[0] ?? "");
  throw invalid(member ? `\`${member}\` must be true or false` : (issue?.message ?? "The body is not accepted"));
}

const MAX_OPERATOR_BODY_BYTES = 4096;
