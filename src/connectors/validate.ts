/**
 * Whether a connector is valid (PUT /v1/connectors/{name}, `npm run validate`): its schema, then a
 * base URL that is an absolute http(s) URL on the deployment's outbound allowlist, static headers,
 * a key or a probe for its writes — and then everything a step through it would meet at a
 * workflow's save: a probe workflow with one write through it (every key field supplied) is resolved
 * and validated by the very rules a workflow meets (key lint, key profile facts, secret templates,
 * expressions), each error brought back to the connector's own pointer. So a connector that saves
 * never makes a workflow that uses it fail for the connector's sake.
 */
import type { ValidationError } from "../definitions/errors";
import { fromZodIssue, validateDefinition } from "../definitions/validate";
import { isExpression } from "../definitions/schema";
import { hostPortOf, isAllowed } from "../lib/allowlist";
import { checkLimits } from "../flow/limits";
import { resolveConnectors } from "./resolve";
import { ConnectorDefinition, type StoredConnector } from "./schema";

export type ConnectorValidation = { ok: true; definition: ConnectorDefinition } | { ok: false; errors: ValidationError[] };

export interface ConnectorValidationOptions {
  /** OUTBOUND_ALLOWLIST; absent: not checked (the offline CLI). */
  allowlist?: string;
}

export function validateConnector(input: unknown, options: ConnectorValidationOptions = {}): ConnectorValidation {
  const parsed = ConnectorDefinition.safeParse(input);
  if (!parsed.success) return { ok: false, errors: parsed.error.issues.flatMap((issue) => fromZodIssue(issue, input)) };
  const definition = parsed.data;
  const errors: ValidationError[] = [];
  let base: URL | null = null;
  try {
    base = new URL(definition.baseUrl);
  } catch {
    // reported below
  }
  if (!base || !["http:", "https:"].includes(base.protocol) || base.search !== "" || base.hash !== "") {
    errors.push({
      pointer: "/baseUrl",
      code: "invalid-url",
      message: `"${definition.baseUrl.slice(0, 120)}" is not an absolute http(s) URL without query or fragment, e.g. https://api.stripe.com/v1`,
    });
  } else if (options.allowlist !== undefined && !isAllowed(base, options.allowlist)) {
    errors.push({
      pointer: "/baseUrl",
      code: "host-not-allowed",
      message: `${base.host} is not on OUTBOUND_ALLOWLIST; add ${hostPortOf(base)} to it`,
    });
  }
  for (const [name, value] of Object.entries(definition.headers ?? {})) {
    if (isExpression(value)) {
      errors.push({
        pointer: `/headers/${name}`,
        code: "connector-header-expression",
        message: "a connector's headers are literals (and `{{ secrets.NAME }}` templates); a value computed per call belongs in the step",
      });
    }
  }
  if (definition.writes.length > 0 && !definition.key && !definition.verify) {
    errors.push({
      pointer: "",
      code: "connector-without-key",
      message:
        `writes through this connector (${definition.writes.join(", ")}) would carry no key: declare \`key\` (its rule and where it ` +
        "travels), or a `verify` probe for a keyless API, or `writes: []` for a read-only one",
    });
  }
  if (definition.compensate && !definition.key) {
    errors.push({
      pointer: "/compensate",
      code: "connector-compensate-without-key",
      message:
        "an undo through this connector needs its own key, or a retried undo (its response lost) could refund twice: declare " +
        "`key` (its rule and where it travels), or leave `compensate` out and give each step's undo its own `url` and key",
    });
  }
  errors.push(...checkLimits(definition.limits));
  if (errors.length === 0) errors.push(...asAStepWouldMeet(definition));
  return errors.length > 0 ? { ok: false, errors } : { ok: true, definition };
}

/** The errors a workflow with one write through the connector would meet, at the connector's pointers. */
function asAStepWouldMeet(definition: ConnectorDefinition): ValidationError[] {
  const method = definition.writes[0] ?? "GET";
  const rule = definition.key?.rule;
  const keyFields = rule && "fields" in rule ? Object.fromEntries(rule.fields.map((f) => [f, `= payload.${f}`])) : undefined;
  // With a declared undo: the probe's write undone through it, its key by the undo's rule — so an undo key that
  // would equal the write's (one expression for both) is refused here, at the connector.
  const undoRule = definition.compensate ? (definition.compensate.rule ?? rule) : undefined;
  const undoFields = undoRule && "fields" in undoRule ? Object.fromEntries(undoRule.fields.map((f) => [f, `= payload.${f}`])) : undefined;
  const compensate = definition.compensate ? { compensate: undoFields ? { keyFields: undoFields } : {} } : {};
  const probe = {
    id: "connector-probe",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "call",
        type: "GATEWAY",
        config: { connector: definition.name, method, path: "/", operation: "probe", ...(keyFields ? { keyFields } : {}), ...compensate },
      },
    ],
    edges: [{ from: "received", to: "call" }],
  };
  const stored: StoredConnector = { workspace: "", name: definition.name, version: "0".repeat(64), definition, createdAt: 0 };
  const resolved = resolveConnectors(probe, new Map([[definition.name, stored]]));
  const result = validateDefinition(resolved.document);
  const errors = [...resolved.errors, ...(result.ok ? [] : result.errors)];
  return errors.map((e) => ({ ...e, pointer: connectorPointer(e.pointer) }));
}

const STEP = "/vertices/1/config";

/** A probe workflow's pointer as the connector's: its key, headers, probe, base URL, retry. */
function connectorPointer(pointer: string): string {
  if (!pointer.startsWith(STEP)) return "";
  const rest = pointer.slice(STEP.length);
  if (rest === "/idempotencyKey/value") return "/key/rule";
  if (rest.startsWith("/idempotencyKey")) return `/key${rest.slice("/idempotencyKey".length)}`;
  if (rest === "/verify/url") return "/verify/path";
  if (rest === "/url") return "/baseUrl";
  if (rest.startsWith("/compensate/idempotencyKey")) return "/compensate/rule";
  if (rest.startsWith("/compensate")) return "/compensate";
  for (const member of ["/headers", "/verify", "/retry", "/timeoutMs"]) if (rest.startsWith(member)) return rest;
  return "";
}
