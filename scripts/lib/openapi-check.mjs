/**
 * The e2e's guard against drift between the OpenAPI document (GET /v1/openapi.json) and what the
 * engine answers. `openApiChecker(doc)` validates the document itself against the OpenAPI 3.1
 * schema (@seriousme/openapi-schema-validator), then `check(...)` validates one answer — its
 * status, content type and body — against the response the document declares for that route and
 * status, with ajv's 2020-12 dialect (the document's). An undocumented route, status or content
 * type, or a body that does not match, throws: the story that made the request fails.
 */
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const DOCUMENT_ID = "urn:idemflow:openapi";

/** JSON Pointer escaping of one segment (RFC 6901). */
const escape = (segment) => String(segment).replaceAll("~", "~0").replaceAll("/", "~1");

export async function openApiChecker(doc) {
  const result = await new Validator().validate(doc);
  if (!result.valid) throw new Error(`the OpenAPI document is not valid OpenAPI 3.1: ${JSON.stringify(result.errors).slice(0, 2000)}`);

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // zod writes `z.string().startsWith(…)` (and endsWith, includes) as a format of its own beside a
  // `pattern` that states the same rule: the pattern is what is checked.
  for (const format of ["starts_with", "ends_with", "includes"]) ajv.addFormat(format, true);
  ajv.addSchema(doc, DOCUMENT_ID);

  const routes = Object.entries(doc.paths).map(([template, item]) => ({
    template,
    item,
    pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^/}]+\}/g, "[^/]+")}$`),
  }));
  const validators = new Map();
  let checked = 0;

  function validatorFor(pointer) {
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: `${DOCUMENT_ID}#${pointer}` });
      validators.set(pointer, validate);
    }
    return validate;
  }

  /**
   * One answer: `path` may carry a query; `contentType` null when the caller no longer knows it;
   * `text` the body as received.
   */
  function check(method, path, status, contentType, text) {
    const pathname = new URL(path, "http://engine").pathname;
    const what = `${method} ${pathname} → ${status}`;
    const route = routes.find((r) => r.pattern.test(pathname));
    const operation = route?.item[method.toLowerCase()];
    if (!route || !operation) throw new Error(`openapi: ${method} ${pathname} is not in the document`);
    const response = operation.responses[String(status)];
    if (!response) {
      throw new Error(
        `openapi: ${what} is not documented (documented: ${Object.keys(operation.responses).join(", ")}): ${text.slice(0, 300)}`,
      );
    }
    const content = response.content ?? {};
    if (Object.keys(content).length === 0) {
      if (text.length > 0) throw new Error(`openapi: ${what} is documented without a body, and has one: ${text.slice(0, 300)}`);
      checked += 1;
      return;
    }
    const type = contentType === null ? Object.keys(content)[0] : contentType.split(";")[0].trim().toLowerCase();
    if (!content[type]) throw new Error(`openapi: ${what} answered ${type}; documented: ${Object.keys(content).join(", ")}`);
    if (type === "application/json" || type.endsWith("+json")) {
      let body;
      try {
        body = JSON.parse(text);
      } catch {
        throw new Error(`openapi: ${what} (${type}) is not JSON: ${text.slice(0, 300)}`);
      }
      const pointer = `/paths/${escape(route.template)}/${method.toLowerCase()}/responses/${status}/content/${escape(type)}/schema`;
      const validate = validatorFor(pointer);
      if (!validate(body)) {
        const errors = validate.errors
          .slice(0, 8)
          .map((e) => `${e.instancePath || "/"} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`);
        throw new Error(
          `openapi: the body of ${what} does not match the document:\n  ${errors.join("\n  ")}\n  body: ${text.slice(0, 500)}`,
        );
      }
    }
    checked += 1;
  }

  return {
    check,
    /** How many answers were validated. */
    count: () => checked,
  };
}
