/**
 * GATEWAY at save: a key retention within the maximum, no body on GET/HEAD, a literal URL that is
 * http(s), headers not given twice in different letter cases, retry delays in order.
 */
import { asRecord, asString, type ValidationError } from "../errors";
import { durationProblem, literalUrlError, type VertexRules } from "../rule-helpers";

export const gatewayRules: VertexRules = (config, at, _options) => {
  const errors: ValidationError[] = [];
  // Connectors are resolved before validation (src/connectors/resolve.ts): a name left here was not.
  const connector = config.connector;
  if (typeof connector === "string") {
    errors.push({
      pointer: at("connector"),
      code: "connector-unresolved",
      message:
        `connector "${connector}" was not resolved: save the workflow with PUT /v1/workflows/{id}, or validate it with ` +
        "`npm run validate` (which reads connectors/*.json)",
    });
  }
  if (config.url === undefined && connector === undefined) {
    errors.push({ pointer: at("url"), code: "required", message: "a GATEWAY needs `url`, or `connector` with `path`" });
  }
  if (connector === undefined) {
    for (const member of ["operation", "path", "keyFields"]) {
      if (config[member] !== undefined) {
        errors.push({
          pointer: at(member),
          code: "connector-member-without-connector",
          message: `\`${member}\` belongs to a step through a connector; name the \`connector\`, or remove \`${member}\``,
        });
      }
    }
  }
  const retention = durationProblem(asRecord(config.idempotencyKey)?.retention, "idempotencyKey.retention");
  if (retention) errors.push({ pointer: at("idempotencyKey", "retention"), ...retention });
  const method = asString(config.method);
  if ((method === "GET" || method === "HEAD") && config.body !== undefined) {
    errors.push({
      pointer: at("body"),
      code: "body-not-allowed",
      message: `a ${method} request cannot carry a body; remove \`body\` or use POST/PUT/PATCH`,
    });
  }
  const urlError = literalUrlError(config.url, at("url"), "http://localhost:8788/payments/charges");
  if (urlError) errors.push(urlError);
  const seen = new Map<string, string>();
  for (const name of Object.keys(asRecord(config.headers) ?? {})) {
    const first = seen.get(name.toLowerCase());
    if (first !== undefined) {
      errors.push({
        pointer: at("headers", name),
        code: "duplicate-header",
        message: `header names are case-insensitive and "${first}" is already set; keep one of them`,
      });
    } else seen.set(name.toLowerCase(), name);
  }
  const retry = asRecord(config.retry);
  if (
    retry &&
    typeof retry.initialDelayMs === "number" &&
    typeof retry.maxDelayMs === "number" &&
    retry.maxDelayMs < retry.initialDelayMs
  ) {
    errors.push({
      pointer: at("retry", "maxDelayMs"),
      code: "retry-delay-order",
      message:
        `maxDelayMs (${retry.maxDelayMs}) is below initialDelayMs (${retry.initialDelayMs}); raise maxDelayMs or lower ` + `initialDelayMs`,
    });
  }
  return errors;
};
