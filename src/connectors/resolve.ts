/**
 * Resolving connectors at save (SPEC section 15, docs/connectors.md): every GATEWAY step that names
 * a connector (a top-level one, or a MAP's step: SPEC section 16) becomes a plain Gateway step —
 * its URL under the connector's base, the connector's headers, its key as the connector's rule
 * makes it, its probe, its retry and timeout defaults —
 * plus `connector: { name, version, operation }` saying where it came from. The resolved document
 * is what is validated, hashed and stored, so a version is self-contained: the start batch's first
 * key, the step-inputs analysis, the key lint and the archive read it with no extra read, and editing
 * a connector never changes a saved version (a re-save after the edit is a new version).
 *
 * What a step may not do through a connector, each refused here with its pointer: name an unknown
 * connector; give a `url` (an absolute URL would leave the connector's base), an `idempotencyKey`
 * or a `verify` (the connector owns them); set a header the connector sets or the key's header; put
 * a member at the key's body pointer; leave out a business field the key rule needs (a write).
 *
 * Works on the raw JSON document, before the schema: the refusals name the author's own pointers,
 * and what it builds is then checked by `validateDefinition` like any definition.
 */
import type { ValidationError } from "../definitions/errors";
import { gatewayConfigs } from "../definitions/step-configs";
import { resolveDestinationKey } from "../definitions/destination-key";
import { OPERATION_PATTERN, type DestinationKeyDeclaration, type GatewayConfig } from "../definitions/schema";
import { pointerTokens } from "../lib/json-pointer";
import { hasOwnMember, isJsonObject, ownMember } from "../lib/own-member";
import { isAllowed } from "../lib/allowlist";
import { KEY_FIELD_PATTERN, type ConnectorDefinition, type StoredConnector } from "./schema";

/** The connector names a document's GATEWAY steps use (the string form: not yet resolved). */
export function connectorNamesOf(document: unknown): string[] {
  const names = new Set<string>();
  for (const { config } of gatewaySteps(document)) {
    const name = ownMember(config, "connector");
    if (typeof name === "string") names.add(name);
  }
  return [...names];
}

export interface Resolution {
  /** The document with every connector step resolved (a copy; the input is not changed). */
  document: unknown;
  errors: ValidationError[];
  /** Members the resolution built, and what of the author's each came from (`authorsErrors` points there). */
  origins: Origin[];
}

/** A member of the resolved document (`resolved`, a pointer) made from the author's `author`; `note` says how. */
export interface Origin {
  resolved: string;
  author: string;
  note: string;
}

/**
 * `allowlist`: OUTBOUND_ALLOWLIST, when known — a connector whose base URL is not on it is refused at
 * the step that names it (the deployment's list may have changed since the connector was saved).
 */
export function resolveConnectors(
  document: unknown,
  connectors: ReadonlyMap<string, StoredConnector>,
  options: { allowlist?: string } = {},
): Resolution {
  const errors: ValidationError[] = [];
  const origins: Origin[] = [];
  if (!isJsonObject(document) || !Array.isArray(document.vertices)) return { document, errors, origins };
  const vertices = document.vertices.map((raw: unknown, i: number) => {
    const at = (...path: Array<string | number>) =>
      ["", "vertices", i, "config", ...path].map((t) => String(t).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
    if (!isJsonObject(raw) || !isJsonObject(raw.config)) return raw;
    if (raw.type === "GATEWAY") return { ...raw, config: resolveGateway(raw.config, connectors, options, at, errors, origins) };
    // A MAP's step through a connector (SPEC section 16): resolved like a top-level one; the key lint judges its key per item.
    const step = raw.type === "MAP" ? ownMember(raw.config, "step") : undefined;
    if (!isJsonObject(step) || step.type !== "GATEWAY" || !isJsonObject(step.config)) return raw;
    const atStep = (...path: Array<string | number>) => at("step", "config", ...path);
    const config = resolveGateway(step.config, connectors, options, atStep, errors, origins);
    return config === step.config ? raw : { ...raw, config: { ...raw.config, step: { ...step, config } } };
  });
  return { document: { ...document, vertices }, errors, origins };
}

/** One Gateway config: resolved when it names a connector, as it was otherwise (the same object). */
function resolveGateway(
  config: Record<string, unknown>,
  connectors: ReadonlyMap<string, StoredConnector>,
  options: { allowlist?: string },
  at: At,
  errors: ValidationError[],
  origins: Origin[],
): Record<string, unknown> {
  const undo = ownMember(config, "compensate");
  if (isJsonObject(undo) && hasOwnMember(undo, "connector")) {
    errors.push({
      pointer: at("compensate", "connector"),
      code: "connector-provenance-given",
      message:
        "`compensate.connector` is what idemflow records of an undo it resolved through the step's connector; give the undo " +
        "`path`, `operation` and `keyFields` on a step that names its connector instead",
    });
  }
  if (!hasOwnMember(config, "connector")) return config;
  if (typeof ownMember(config, "connector") !== "string") {
    // The provenance object (`{ name, version, operation }`) is what this resolution records; the
    // retention guard trusts it (its sends count under `connector:<name>`), so only it may set it.
    errors.push({
      pointer: at("connector"),
      code: "connector-provenance-given",
      message:
        "`connector` as an object is what idemflow records of a step it resolved through a connector; a definition " +
        'names the connector instead (`"connector": "<name>"` with `path`, `operation` and `keyFields`), or leaves ' +
        "`connector` out for a plain Gateway step",
    });
    return config;
  }
  const name = config.connector as string;
  const connector = connectors.get(name);
  if (!connector) {
    errors.push({
      pointer: at("connector"),
      code: "connector-not-found",
      message: `this workspace has no connector "${name}"; create it with PUT /v1/connectors/${name}, or correct the name`,
    });
    return config;
  }
  if (options.allowlist !== undefined && !baseAllowed(connector.definition.baseUrl, options.allowlist)) {
    errors.push({
      pointer: at("connector"),
      code: "host-not-allowed",
      message: `connector "${name}" calls ${connector.definition.baseUrl}, whose host is not on OUTBOUND_ALLOWLIST; add it there`,
    });
  }
  return resolveStep(config, connector, at, errors, origins);
}

type At = (...path: Array<string | number>) => string;

/** The schema's default of `writes`, for a connector read without its defaults. */
const DEFAULT_WRITES: readonly string[] = ["POST", "PUT", "PATCH", "DELETE"];

function resolveStep(
  step: Record<string, unknown>,
  stored: StoredConnector,
  at: At,
  errors: ValidationError[],
  origins: Origin[],
): Record<string, unknown> {
  const c = stored.definition;
  for (const owned of ["url", "idempotencyKey", "verify"]) {
    if (hasOwnMember(step, owned)) {
      errors.push({
        pointer: at(owned),
        code: "connector-owns-member",
        message:
          `a step through connector "${c.name}" takes ` +
          (owned === "url" ? "its URL from the connector's base and the step's `path`" : `\`${owned}\` from the connector`) +
          `; remove \`${owned}\``,
      });
    }
  }
  const method = typeof step.method === "string" ? step.method : "";
  const write = ((c.writes as readonly string[] | undefined) ?? DEFAULT_WRITES).includes(method);
  const url = urlOf(c.baseUrl, step.path, at, errors);
  const key = write && c.key ? keyOf(c, step, at, errors, origins) : undefined;
  checkHeaders(c, step, key, at, errors);
  checkBody(step, key, at, errors);

  const { connector: _name, path: _path, keyFields: _fields, operation, ...rest } = step;
  const resolved: Record<string, unknown> = { ...rest, url };
  if (c.headers || isJsonObject(step.headers))
    resolved.headers = { ...(c.headers ?? {}), ...(isJsonObject(step.headers) ? step.headers : {}) };
  if (key) resolved.idempotencyKey = key;
  if (write && !c.key && c.verify) resolved.verify = verifyOf(c);
  if (!hasOwnMember(step, "retry") && c.retry) resolved.retry = c.retry;
  if (!hasOwnMember(step, "timeoutMs") && c.timeoutMs !== undefined) resolved.timeoutMs = c.timeoutMs;
  resolved.connector = { name: c.name, version: stored.version, ...(typeof operation === "string" ? { operation } : {}) };
  // Through the connector: the undo gives `path`, or the connector declares its undo and the step's gives no `url`.
  if (isJsonObject(step.compensate) && (hasOwnMember(step.compensate, "path") || (c.compensate && !hasOwnMember(step.compensate, "url")))) {
    resolved.compensate = resolveCompensate(step.compensate, stored, at, errors, origins);
  }
  origins.push(
    { resolved: at("url"), author: at("path"), note: `the URL is connector "${c.name}"'s base and \`path\`` },
    { resolved: at("verify"), author: at("connector"), note: `the verify probe is connector "${c.name}"'s` },
  );
  return resolved;
}

/**
 * A step's `compensate` through its connector (docs/steps.md "Compensation"): `path`, `operation`
 * and `keyFields` as a write's — the undo's URL under the connector's base, its key made by the
 * connector's rule from the undo's OWN operation (`refund-<order>`, never the step's `charge-<order>`:
 * the same operation makes the same key, refused by `compensation-key-equals-step-key`), the
 * connector's headers (the step's resolved ones) — plus `connector: { name, version, operation }`,
 * so the undo takes the connector's permits. `url` and `idempotencyKey` are the connector's to make.
 */
function resolveCompensate(
  undo: Record<string, unknown>,
  stored: StoredConnector,
  atStep: At,
  errors: ValidationError[],
  origins: Origin[],
): Record<string, unknown> {
  const c = stored.definition;
  const at: At = (...path) => atStep("compensate", ...path);
  for (const owned of ["url", "idempotencyKey"]) {
    if (hasOwnMember(undo, owned)) {
      errors.push({
        pointer: at(owned),
        code: "connector-owns-member",
        message:
          `an undo through connector "${c.name}" (it gives \`path\`) takes ` +
          (owned === "url" ? "its URL from the connector's base and its `path`" : "its key from the connector's rule and its `operation`") +
          `; remove \`${owned}\` (or give \`url\` and \`idempotencyKey\` without \`path\` for an undo elsewhere)`,
      });
    }
  }
  // The connector's declared undo (`compensate`) gives what the step's leaves out, and its own key rule.
  const declared = c.compensate;
  const given = { ...undo };
  if (declared && !hasOwnMember(given, "path")) given.path = declared.path;
  if (declared && !hasOwnMember(given, "operation")) given.operation = declared.operation;
  if (declared && !hasOwnMember(given, "method")) given.method = declared.method;
  const ruled: ConnectorDefinition = declared?.rule && c.key ? { ...c, key: { ...c.key, rule: declared.rule } } : c;
  const url = urlOf(c.baseUrl, given.path, at, errors);
  const key = c.key ? keyOf(ruled, given, at, errors, origins) : undefined;
  checkHeaders(c, given, key, at, errors);
  checkBody(given, key, at, errors);
  const { path: _path, keyFields: _fields, operation, ...rest } = given;
  const resolved: Record<string, unknown> = { ...rest, url };
  if (key) resolved.idempotencyKey = key;
  resolved.connector = { name: c.name, version: stored.version, ...(typeof operation === "string" ? { operation } : {}) };
  origins.push({ resolved: at("url"), author: at("path"), note: `the undo's URL is connector "${c.name}"'s base and \`path\`` });
  return resolved;
}

/** The base URL and the step's path: a literal path joined now, an expression joined when it runs. */
function urlOf(baseUrl: string, path: unknown, at: At, errors: ValidationError[]): string {
  const base = baseUrl.replace(/\/+$/, "");
  if (typeof path !== "string" || path === "") {
    errors.push({
      pointer: at("path"),
      code: "connector-path-invalid",
      message: "give the path under the connector's base URL, e.g. `/charges`",
    });
    return base;
  }
  if (path.startsWith("=")) return `= ${JSON.stringify(base)} & (${path.slice(1).trim()})`;
  if (!path.startsWith("/") || path.startsWith("//") || /^[a-z][a-z0-9+.-]*:/i.test(path) || path.includes("://")) {
    errors.push({
      pointer: at("path"),
      code: "connector-path-invalid",
      message:
        `"${path.slice(0, 80)}" is not a path under the connector's base URL: ` +
        "start it with `/` (an absolute URL would leave the connector)",
    });
  }
  return base + path;
}

/** The destination key declaration the connector's rule makes from the step's operation and business fields. */
function keyOf(
  c: ConnectorDefinition,
  step: Record<string, unknown>,
  at: At,
  errors: ValidationError[],
  origins: Origin[],
): DestinationKeyDeclaration | undefined {
  const { rule, ...where } = c.key!;
  let value: string;
  if ("expression" in rule) {
    value = rule.expression;
    // The step wrote none of it: an error about the key (one that ignores a MAP's item, say) is the connector's.
    origins.push({
      resolved: at("idempotencyKey", "value"),
      author: at("connector"),
      note: `connector "${c.name}"'s key rule is the fixed expression \`${value}\``,
    });
  } else {
    const operation = step.operation;
    if (typeof operation !== "string" || !OPERATION_PATTERN.test(operation)) {
      errors.push({
        pointer: at("operation"),
        code: "connector-operation-missing",
        message:
          `a write through connector "${c.name}" names its \`operation\` (e.g. "charge"): the key's prefix; ` +
          "lowercase letters, digits, `_` or `-`",
      });
      return undefined;
    }
    const fields = isJsonObject(step.keyFields) ? step.keyFields : {};
    const missing = rule.fields.filter((f) => !hasOwnMember(fields, f));
    if (missing.length > 0) {
      errors.push({
        pointer: at("keyFields"),
        code: "connector-key-field-missing",
        message:
          `connector "${c.name}" derives a write's key from ${rule.fields.map((f) => `\`${f}\``).join(", ")}; ` +
          `supply ${missing.map((f) => `\`${f}\``).join(", ")} in \`keyFields\` ` +
          '(an expression over the business data, e.g. "= payload.order.id")',
      });
      return undefined;
    }
    for (const name of Object.keys(fields)) {
      if (!rule.fields.includes(name) || !KEY_FIELD_PATTERN.test(name)) {
        errors.push({
          pointer: at("keyFields", name),
          code: "connector-key-field-unknown",
          message: `connector "${c.name}" derives its key from ${rule.fields.map((f) => `\`${f}\``).join(", ")} only; remove \`${name}\``,
        });
      }
    }
    const parts = rule.fields.map((f) => operand(ownMember(fields, f)));
    value =
      rule.format === "plain"
        ? `= ${[JSON.stringify(`${operation}-`), ...parts.flatMap((p, i) => (i === 0 ? [p] : ['"-"', p]))].join(" & ")}`
        : `= $idempotencyKey(${[JSON.stringify(operation), ...parts].join(", ")})`;
    origins.push({
      resolved: at("idempotencyKey", "value"),
      author: at("keyFields", ...keyFieldAt(rule.fields, fields)),
      note: `connector "${c.name}" makes this step's key from \`operation\` and \`keyFields\` as \`${value}\``,
    });
  }
  return { value, ...where } as DestinationKeyDeclaration;
}

/** A key field as a JSONata operand: an expression in parentheses, a literal as a string. */
function operand(value: unknown): string {
  if (typeof value === "string" && value.startsWith("=")) return `(${value.slice(1).trim()})`;
  return JSON.stringify(typeof value === "string" ? value : JSON.stringify(value ?? null));
}

/** A step adds headers: it never sets one the connector sets, nor the key's. */
function checkHeaders(
  c: ConnectorDefinition,
  step: Record<string, unknown>,
  key: DestinationKeyDeclaration | undefined,
  at: At,
  errors: ValidationError[],
): void {
  if (!isJsonObject(step.headers)) return;
  const owned = new Map(Object.keys(c.headers ?? {}).map((h) => [h.toLowerCase(), `the connector sets \`${h}\``]));
  const location = key ? keyLocationOf(key) : null;
  if (location && "header" in location) owned.set(location.header.toLowerCase(), `\`${location.header}\` carries the connector's key`);
  for (const name of Object.keys(step.headers)) {
    const why = owned.get(name.toLowerCase());
    if (why) {
      errors.push({
        pointer: at("headers", name),
        code: "connector-header-override",
        message: `a step through connector "${c.name}" adds headers, never replaces one: ${why}; remove \`${name}\``,
      });
    }
  }
}

/** A literal body never holds a member at the key's body pointer: the connector puts the key there. */
function checkBody(step: Record<string, unknown>, key: DestinationKeyDeclaration | undefined, at: At, errors: ValidationError[]): void {
  const location = key ? keyLocationOf(key) : null;
  if (!location || !("bodyField" in location) || !isJsonObject(step.body)) return;
  let current: unknown = step.body;
  for (const token of pointerTokens(location.bodyField)) {
    if (!isJsonObject(current) || !hasOwnMember(current, token)) return;
    current = ownMember(current, token);
  }
  errors.push({
    pointer: at("body", ...pointerTokens(location.bodyField)),
    code: "connector-key-in-body",
    message: `the connector puts the key at \`${location.bodyField}\` of the body; remove that member`,
  });
}

/** Where a key declaration sends the key (its header, or its body field), as validation resolves it. */
function keyLocationOf(key: DestinationKeyDeclaration): { header: string } | { bodyField: string } | null {
  const resolved = resolveDestinationKey({ idempotencyKey: key } as GatewayConfig);
  return "key" in resolved && resolved.key ? resolved.key.location : null;
}

function verifyOf(c: ConnectorDefinition): Record<string, unknown> {
  const v = c.verify!;
  const base = c.baseUrl.replace(/\/+$/, "");
  const url = v.path.startsWith("=") ? `= ${JSON.stringify(base)} & (${v.path.slice(1).trim()})` : base + v.path;
  return { url, ...(v.query ? { query: v.query } : {}), ...(c.headers ? { headers: c.headers } : {}), condition: v.condition };
}

function baseAllowed(baseUrl: string, allowlist: string): boolean {
  try {
    return isAllowed(new URL(baseUrl), allowlist);
  } catch {
    return false;
  }
}

/** Every Gateway config: the top-level ones and each MAP's step (src/definitions/step-configs.ts). */
function gatewaySteps(document: unknown): Array<{ config: Record<string, unknown> }> {
  return gatewayConfigs(document);
}

/** The one key field an error about the key is about: the only field, or the only literal one; else none (`keyFields` itself). */
function keyFieldAt(names: readonly string[], fields: Record<string, unknown>): string[] {
  if (names.length === 1) return [names[0]!];
  const literal = names.filter((f) => {
    const value = ownMember(fields, f);
    return !(typeof value === "string" && value.startsWith("="));
  });
  return literal.length === 1 ? [literal[0]!] : [];
}

const within = (pointer: string, prefix: string) => pointer === prefix || pointer.startsWith(`${prefix}/`);

/**
 * One mistake, one error, at what the author wrote: validation's errors on the resolved document
 * (`validation`) are taken back to the author's member each resolved member came from (a key the
 * connector made from `keyFields` → that field), and dropped where the resolution already refused
 * that member (a header override: not also a duplicate header or a second key header; an unknown
 * connector: not also an unresolved one). The resolution's errors come first.
 */
export function authorsErrors(resolution: Resolution, validation: readonly ValidationError[]): ValidationError[] {
  const refused = resolution.errors.map((e) => e.pointer);
  const seen = new Set<string>();
  const out: ValidationError[] = [...resolution.errors];
  for (const e of validation) {
    const origin = resolution.origins.find((o) => within(e.pointer, o.resolved));
    const error = origin ? { ...e, pointer: origin.author, message: `${origin.note}: ${e.message}` } : e;
    if (refused.some((p) => within(error.pointer, p) || within(e.pointer, p))) continue;
    const id = `${error.pointer}\u0000${error.code}\u0000${error.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(error);
  }
  return out;
}
