/**
 * `{{ secrets.NAME }}` templates (SPEC section 2): replaced at call time by the workflow's
 * workspace's secret NAME (src/secrets/resolve.ts), never stored, logged or returned.
 *
 * They are allowed in exactly two places:
 * - a literal (non-expression) GATEWAY header value other than Idempotency-Key — the one place a
 *   request carries credentials, and the one place the recorded request redacts (the step's own
 *   headers and its verify probe's);
 * - an ENTRY_POINT's `webhook.signature.secret`, which must be exactly one template.
 * Anywhere else a secret would end up in a URL, a body or a step output, all of which are stored
 * and shown in traces. Inside an expression, the secret's value would become data the expression
 * can copy anywhere; in an Idempotency-Key it would be persisted on the step.
 */
import { asArray, asRecord, type ValidationError } from "./errors";
import { isIdempotencyKeyHeader } from "./expression-sites";
import { pointerOf, type PathSegment } from "./pointer";
import { isExpression } from "./schema";
import { SECRET_NAME_PATTERN, SECRET_TEMPLATE_SOURCE } from "./secret-template";
import { gatewayConfigs } from "./step-configs";

// The patterns live in a leaf module the definition schema and the OpenAPI document also read.
export { SECRET_NAME_PATTERN, SECRET_TEMPLATE_SOURCE };

/** The secret names a string references (well-formed templates only). */
export function secretNamesIn(value: string): string[] {
  return [...value.matchAll(new RegExp(SECRET_TEMPLATE_SOURCE, "g"))].map((m) => m[1]!);
}

type TemplateProblem = { code: string; message: string };

/** Every `{{ … }}` that mentions secrets, well-formed or not, with the problem if any. */
function scanTemplates(value: string): Array<{ name?: string; problem?: TemplateProblem }> {
  const found: Array<{ name?: string; problem?: TemplateProblem }> = [];
  let from = 0;
  for (;;) {
    const open = value.indexOf("{{", from);
    if (open < 0) break;
    const close = value.indexOf("}}", open + 2);
    const inner = close < 0 ? value.slice(open + 2) : value.slice(open + 2, close);
    from = close < 0 ? value.length : close + 2;
    if (!/secret/i.test(inner)) continue;
    const match = /^\s*secrets\.(\S*?)\s*$/.exec(inner);
    if (close < 0 || !match) {
      found.push({
        problem: {
          code: "secret-template-malformed",
          message: `"{{${inner}${close < 0 ? "" : "}}"}" is not a secret template; write exactly \`{{ secrets.NAME }}\``,
        },
      });
    } else if (!SECRET_NAME_PATTERN.test(match[1]!)) {
      found.push({
        name: match[1]!,
        problem: {
          code: "secret-name-invalid",
          message:
            `"${match[1]}" is not a valid secret name; use letters, digits and \`_\`, not starting with a digit (as set ` +
            `with \`wrangler secret put NAME\`)`,
        },
      });
    } else {
      found.push({ name: match[1]! });
    }
  }
  return found;
}

/** A key wherever it travels: the declared one, or the `Idempotency-Key` header. */
const SECRET_IN_KEY = {
  code: "secret-in-idempotency-key",
  message:
    "a secret cannot be part of an Idempotency-Key: the key is stored on the step and shown in traces; derive it from " + "business data",
};

export function checkSecrets(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  const root = asRecord(document);
  if (!root) return errors;

  /** Pointers where a template is allowed, with a checker for that place. */
  const allowed = new Map<string, (value: string, pointer: string) => void>();
  // Every Gateway: a top-level one and a MAP's step (src/definitions/step-configs.ts).
  for (const { config, base } of gatewayConfigs(root)) {
    // The verify probe's headers follow the same rules as the step's own (a probe also needs credentials).
    const headerSites = [
      ...Object.keys(asRecord(config.headers) ?? {}).map((name) => ({ name, at: ["headers", name] })),
      ...Object.keys(asRecord(asRecord(config.verify)?.headers) ?? {}).map((name) => ({ name, at: ["verify", "headers", name] })),
    ];
    for (const { name, at } of headerSites) {
      allowed.set(pointerOf(...base, ...at), (value, pointer) => {
        const templates = scanTemplates(value);
        if (templates.length === 0) return;
        if (isIdempotencyKeyHeader(name)) {
          errors.push({ pointer, ...SECRET_IN_KEY });
        } else if (isExpression(value)) {
          errors.push({
            pointer,
            code: "secret-in-expression",
            message:
              "secrets are substituted into literal header values only; remove the leading `=` and write the value as a literal " +
              "such as `Bearer {{ secrets.NAME }}`",
          });
        } else {
          for (const t of templates) if (t.problem) errors.push({ pointer, ...t.problem });
        }
      });
    }
    allowed.set(pointerOf(...base, "idempotencyKey", "value"), (value, pointer) => {
      if (scanTemplates(value).length > 0) errors.push({ pointer, ...SECRET_IN_KEY });
    });
  }
  asArray(root.vertices).forEach((raw, i) => {
    const vertex = asRecord(raw);
    if (vertex?.type === "ENTRY_POINT") {
      allowed.set(pointerOf("vertices", i, "config", "webhook", "signature", "secret"), (value, pointer) => {
        const templates = scanTemplates(value);
        const whole = new RegExp(`^\\s*${SECRET_TEMPLATE_SOURCE}\\s*$`).test(value);
        for (const t of templates) if (t.problem) errors.push({ pointer, ...t.problem });
        if (!whole && templates.every((t) => !t.problem)) {
          errors.push({
            pointer,
            code: "webhook-secret-not-template",
            message:
              "the signing secret must be exactly `{{ secrets.NAME }}` naming a secret of the workspace; never write the secret " +
              "itself into a definition",
          });
        }
      });
    }
  });

  const walk = (value: unknown, path: PathSegment[]) => {
    const pointer = pointerOf(...path);
    if (typeof value === "string") {
      const check = allowed.get(pointer);
      if (check) return check(value, pointer);
      const templates = scanTemplates(value);
      if (templates.length > 0) {
        errors.push({
          pointer,
          code: "secret-not-allowed-here",
          message:
            "`{{ secrets.NAME }}` is only substituted in GATEWAY header values (and an ENTRY_POINT's webhook.signature.secret); " +
            "anywhere else it would be stored and shown in traces. Move the credential into a header",
        });
      }
      return;
    }
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, [...path, i]));
    else if (asRecord(value)) for (const [key, item] of Object.entries(value as object)) walk(item, [...path, key]);
  };
  walk(root, []);
  return errors;
}
