/**
 * An event source's definition (SPEC section 14, docs/waits.md "Event sources"): how one provider's
 * signed webhook, delivered to `POST /events/{workspace}/{source}`, becomes an event.
 *
 *     { "scheme": "standard-webhooks",                     // or "v1" (the hooks' scheme)
 *       "secret": "{{ secrets.PAYMENTS_WEBHOOK_SECRET }}", // a template, never a value
 *       "name":   "payment.confirmed",                     // a literal, or "= <expression>"
 *       "match":  "= body.data.order",                     // the correlation value
 *       "id":     "= body.id",                             // optional: the sender's event id
 *       "data":   "= body.data",                           // optional: default the whole body
 *       "toleranceSeconds": 300 }                          // optional: how old a signed timestamp may be
 *
 * The expressions are JSONata over `{ body, headers }` (src/events/source-extract.ts says which
 * headers). A definition is checked here at save, every error at once with its pointer, the way a
 * workflow definition is: it is the engine's own `compile` and function check that decide
 * (src/definitions/expressions-check.ts), so a source that saves is one whose expressions run.
 * Its version is the SHA-256 of its canonical JSON (RFC 8785) with the defaults filled in.
 */
import { z } from "zod";
import { asRecord, type ValidationError } from "../definitions/errors";
import { checkExpressions } from "../definitions/expressions-check";
import { toPointer } from "../definitions/pointer";
import { EVENT_NAME_PATTERN, EXPRESSION_PREFIX, isExpression, WORKFLOW_ID_PATTERN } from "../definitions/schema";
import { SECRET_TEMPLATE_SOURCE } from "../definitions/secrets";
import { WHOLE_SECRET_TEMPLATE_SOURCE } from "../definitions/secret-template";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { hasOwnMember } from "../lib/own-member";
import { RESERVED_SECRETS } from "../secrets/resolve";

/**
 * A source's name: a workflow id's alphabet (letters, digits, `_`, `-`; at most 64). It holds no
 * `:` and no `/`, which the v1 signing target `events/<source>` relies on (src/events/source-signature.ts).
 */
export const EVENT_SOURCE_NAME_PATTERN = WORKFLOW_ID_PATTERN;

export const SOURCE_SCHEMES = ["v1", "standard-webhooks"] as const;

/** The most a stored definition may take (the column's CHECK is 64 KiB). */
export const MAX_SOURCE_DEFINITION_BYTES = 16 * 1024;

const Expression = z.string().startsWith(EXPRESSION_PREFIX, "an expression starting with `=`");

export const EventSourceDefinition = z
  .strictObject({
    scheme: z
      .enum(SOURCE_SCHEMES)
      .describe(
        "how deliveries are signed: `v1` (the hooks' scheme, target `<workspace>:events/<source>`) or `standard-webhooks` " +
          "(webhook-id, webhook-timestamp, webhook-signature; a `whsec_…` secret)",
      ),
    secret: z
      .string()
      .describe("exactly `{{ secrets.NAME }}`: a secret of the workspace (PUT /v1/secrets/NAME), never the value itself")
      // Stated in the OpenAPI document only; checkSecret below refuses with its own codes.
      .meta({ pattern: WHOLE_SECRET_TEMPLATE_SOURCE }),
    name: z
      .string()
      .min(1)
      .describe("the event's name: a literal such as `payment.confirmed`, or an expression over `{ body, headers }` giving one"),
    match: Expression.describe("an expression over `{ body, headers }` giving the correlation value (a string or a number)"),
    id: Expression.optional().describe(
      "an expression giving the sender's event id (deliveries with one id are one event); default: `webhook-id` under " +
        "standard-webhooks, else the content decides",
    ),
    data: Expression.optional().describe("an expression giving the event's data; default the whole body"),
    toleranceSeconds: z.int().positive().max(3600).default(300).describe("how old a signed timestamp may be, in seconds (default 300)"),
  })
  .describe("an event source: how a provider's signed webhook becomes an event (POST /events/{workspace}/{source})");

export type EventSourceDefinition = z.output<typeof EventSourceDefinition>;
export type EventSourceDefinitionInput = z.input<typeof EventSourceDefinition>;

/** The members that are read from the delivery (each a literal name or an expression). */
export const EXTRACTED_MEMBERS = ["name", "match", "id", "data"] as const;

export type SourceValidation =
  { ok: true; definition: EventSourceDefinition; canonical: string; version: string } | { ok: false; errors: ValidationError[] };

/** The one check of a definition, for `PUT /v1/event-sources/{name}`: every error at once. */
export async function validateEventSource(input: unknown): Promise<SourceValidation> {
  const errors: ValidationError[] = [];
  const parsed = EventSourceDefinition.safeParse(input);
  if (!parsed.success) for (const issue of parsed.error.issues) errors.push(...fromZodIssue(issue, input));
  const root = asRecord(input);
  if (root) errors.push(...checkSecret(root.secret), ...checkName(root.name), ...checkMembers(root));
  if (!parsed.success || errors.length > 0) return { ok: false, errors: dedupe(errors) };
  const canonical = canonicalJson(parsed.data);
  return { ok: true, definition: parsed.data, canonical, version: await sha256Hex(canonical) };
}

const WHOLE_TEMPLATE = new RegExp(`^\\s*${SECRET_TEMPLATE_SOURCE}\\s*$`);

function checkSecret(secret: unknown): ValidationError[] {
  if (typeof secret !== "string") return [];
  const match = WHOLE_TEMPLATE.exec(secret);
  if (!match) {
    return [
      {
        pointer: "/secret",
        code: "secret-not-template",
        message:
          "the signing secret must be exactly `{{ secrets.NAME }}` naming a secret of the workspace; never write the secret itself " +
          "into an event source (it would be stored and answered by GET). Store it with `PUT /v1/secrets/NAME` and reference it",
      },
    ];
  }
  if (RESERVED_SECRETS.has(match[1]!)) {
    return [
      {
        pointer: "/secret",
        code: "secret-name-reserved",
        message: `${match[1]} is idemflow's own credential, never a signing secret; store the provider's secret under its own name`,
      },
    ];
  }
  return [];
}

function checkName(name: unknown): ValidationError[] {
  if (typeof name !== "string" || name === "" || isExpression(name) || EVENT_NAME_PATTERN.test(name)) return [];
  return [
    {
      pointer: "/name",
      code: "event-name-invalid",
      message:
        "a literal event name is letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit (at most 200); for a name " +
        "read from the webhook, write an expression starting with `=`",
    },
  ];
}

/** The expressions compile and call only known functions; no member carries a secret template. */
function checkMembers(root: Record<string, unknown>): ValidationError[] {
  const errors: ValidationError[] = [];
  for (const member of EXTRACTED_MEMBERS) {
    if (!hasOwnMember(root, member)) continue;
    const value = root[member];
    if (typeof value !== "string") continue;
    const pointer = toPointer([member]);
    if (/\{\{\s*secrets?\./i.test(value)) {
      errors.push({
        pointer,
        code: "secret-not-allowed-here",
        message: "`{{ secrets.NAME }}` is only the signing secret's place; an event's name, match, id or data is stored and shown",
      });
      continue;
    }
    if (!isExpression(value)) continue;
    // The workflow check itself, on a one-vertex document whose only expression site is this one.
    const probe = { vertices: [{ id: "probe", type: "DELAY", config: { until: value } }] };
    for (const error of checkExpressions(probe)) errors.push({ ...error, pointer });
  }
  return errors;
}

/** zod's issues, worded like a workflow definition's (src/definitions/validate.ts), one per offending value. */
function fromZodIssue(issue: z.core.$ZodIssue, input: unknown): ValidationError[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
  const pointer = toPointer(path);
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      pointer: toPointer([...path, key]),
      code: "unknown-key",
      message:
        `"${key}" is not a member of an event source (scheme, secret, name, match, id, data, toleranceSeconds); ` +
        "remove it or fix its spelling",
    }));
  }
  if (path.length === 1 && asRecord(input) && !hasOwnMember(input, String(path[0]))) {
    return [{ pointer, code: "required", message: `"${String(path[0])}" is required; add it` }];
  }
  if (path.length === 0 && issue.code === "invalid_type") {
    return [{ pointer: "", code: "invalid-type", message: "an event source is a JSON object `{ scheme, secret, name, match, … }`" }];
  }
  const code = `invalid-${issue.code.replace(/_/g, "-")}`.replace(/^invalid-invalid-/, "invalid-");
  return [{ pointer, code, message: issue.message }];
}

function dedupe(errors: ValidationError[]): ValidationError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.pointer}\u0000${e.code}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
