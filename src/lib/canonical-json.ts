/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * Used wherever bytes must not depend on key order or whitespace: workflow versions, execution
 * identities built from payloads, and the key helpers in expressions. ECMAScript's own
 * `JSON.stringify` already serialises numbers and strings the way RFC 8785 requires; what JCS
 * adds is the ordering of object members by their UTF-16 code units, which is what the default
 * `Array.prototype.sort` comparison does.
 */
export function canonicalJson(value: unknown): string {
  return serialize(value, "$");
}

function serialize(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${path}: ${value} cannot be represented in JSON`);
      return JSON.stringify(value);
    case "string":
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) {
        return `[${value.map((item, i) => serialize(item === undefined ? null : item, `${path}[${i}]`)).join(",")}]`;
      }
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      return `{${keys.map((key) => `${JSON.stringify(key)}:${serialize(record[key], `${path}.${key}`)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`${path}: a ${typeof value} cannot be represented in JSON`);
  }
}
