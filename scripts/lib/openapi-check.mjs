/**
 * The e2e's guard against drift between the OpenAPI document (GET /v1/openapi.json) and what the
 * engine answers. `openApiChecker(doc)` validates the document itself against the OpenAPI 3.1
 * schema (@seriousme/openapi-schema-validator), then `check(...)` validates one answer — its
 * status, content type and body — against the response the document declares for that route and
 * status, with ajv's 2020-12 dialect (the document's). An undocumented route, status or content
 * type, or a body that does not match, throws: the story that made the request fails.
 *
 * `checkRequest(...)` validates one request the same way, before it is sent: its path parameters,
 * query parameters (no undocumented one, each value against its schema), documented headers and
 * JSON body against the operation's. A request the document does not accept throws — unless the
 * caller marks it expected-invalid (`invalid: "why"`, a deliberate negative test), and then it must
 * be invalid: a marked request the document accepts throws too, so the marks stay honest. This is
 * how the e2e holds that a schema-valid request is never refused for a reason the document omits.
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

  let requests = 0;
  let expectedInvalid = 0;

  /** A query or path value (text) for a schema: a number where the schema wants one. */
  function typed(schema, text) {
    const type = schema?.type;
    if ((type === "integer" || type === "number") && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text)) return Number(text);
    return text;
  }

  function violationsOf(validate, value, where) {
    if (validate(value)) return [];
    return validate.errors
      .slice(0, 4)
      .map((e) => `${where}${e.instancePath} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`);
  }

  /** Every way the request breaks the document (empty when it is valid). */
  function requestViolations(method, path, { headers = {}, body } = {}) {
    const url = new URL(path, "http://engine");
    const route = routes.find((r) => r.pattern.test(url.pathname));
    const operation = route?.item[method.toLowerCase()];
    if (!route || !operation) return [`${method} ${url.pathname} is not in the document`];
    const base = `/paths/${escape(route.template)}/${method.toLowerCase()}`;
    const parameters = (operation.parameters ?? []).map((p, index) => ({ ...p, pointer: `${base}/parameters/${index}/schema` }));
    const violations = [];
    // Path parameters, segment by segment.
    const templateSegments = route.template.split("/");
    const segments = url.pathname.split("/");
    templateSegments.forEach((t, i) => {
      const name = /^\{(\w+)\}$/.exec(t)?.[1];
      if (!name) return;
      const parameter = parameters.find((p) => p.in === "path" && p.name === name);
      if (!parameter) return violations.push(`path parameter ${name} is not documented`);
      const value = decodeURIComponent(segments[i]);
      violations.push(...violationsOf(validatorFor(parameter.pointer), typed(parameter.schema, value), `path {${name}}`));
    });
    // Query parameters: each documented, each value valid, the required ones present.
    const query = parameters.filter((p) => p.in === "query");
    for (const name of new Set(url.searchParams.keys())) {
      const parameter = query.find((p) => p.name === name);
      if (!parameter) {
        violations.push(
          `query parameter ${JSON.stringify(name)} is not documented (documented: ${query.map((p) => p.name).join(", ") || "none"})`,
        );
        continue;
      }
      for (const value of url.searchParams.getAll(name)) {
        violations.push(...violationsOf(validatorFor(parameter.pointer), typed(parameter.schema, value), `query ${name}`));
      }
    }
    for (const p of query) if (p.required && !url.searchParams.has(p.name)) violations.push(`query parameter ${p.name} is required`);
    // Headers the document states (others — authorization, content-type, Prefer… — are not its business here).
    const sent = new Map(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), String(value)]));
    for (const p of parameters.filter((p) => p.in === "header")) {
      const value = sent.get(p.name.toLowerCase());
      if (value === undefined) {
        if (p.required) violations.push(`header ${p.name} is required`);
        continue;
      }
      violations.push(...violationsOf(validatorFor(p.pointer), value, `header ${p.name}`));
    }
    // The body.
    const content = operation.requestBody?.content ?? {};
    if (body === undefined || body === null || body === "") {
      if (operation.requestBody?.required) violations.push("a body is required");
    } else if (!operation.requestBody) {
      violations.push("the operation takes no body");
    } else {
      const type = (sent.get("content-type") ?? "application/json").split(";")[0].trim().toLowerCase();
      if (!content[type]) violations.push(`a ${type} body is not documented (documented: ${Object.keys(content).join(", ")})`);
      else if (type === "application/json" || type.endsWith("+json")) {
        let parsed;
        try {
          parsed = JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(body));
        } catch {
          violations.push("the body is not JSON");
        }
        if (parsed !== undefined) {
          const pointer = `${base}/requestBody/content/${escape(type)}/schema`;
          violations.push(...violationsOf(validatorFor(pointer), parsed, "body"));
        }
      }
    }
    return violations;
  }

  /**
   * One request, before it is sent: `headers` as sent, `body` the text (or bytes) sent; `invalid`
   * the reason it is deliberately outside the document (a negative test), else undefined.
   */
  function checkRequest(method, path, { headers, body, invalid } = {}) {
    const violations = requestViolations(method, path, { headers, body });
    const what = `${method} ${new URL(path, "http://engine").pathname}`;
    requests += 1;
    if (invalid) {
      if (violations.length === 0) {
        throw new Error(`openapi: the request ${what} is marked expected-invalid (${invalid}), but the document accepts it`);
      }
      expectedInvalid += 1;
      return;
    }
    if (violations.length > 0) {
      throw new Error(`openapi: the request ${what} does not match the document:\n  ${violations.slice(0, 8).join("\n  ")}`);
    }
  }

  return {
    check,
    checkRequest,
    /** How many answers were validated. */
    count: () => checked,
    /** How many requests were validated, and how many of them were marked expected-invalid. */
    requestCount: () => ({ requests, expectedInvalid }),
  };
}
