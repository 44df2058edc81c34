/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * Used wherever bytes must not depend on key order or whitespace: workflow versions, execution
 * identities built from payloads, and the key helpers in expressions. ECMAScript's own
 * `JSON.stringify` already serialises numbers and strings the way RFC 8785 requires; what JCS
 * adds is the ordering of object members by their UTF-16 code units, which is what the default
 * `Array.prototype.sort` comparison does.
 *
 * Iterative, with an explicit stack: bodies are bounded in depth where they are parsed
 * (src/lib/json-depth.ts), but the key helpers also canonicalise destination answers and computed
 * values, and a deep one must not overflow the call stack.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  // Work to do, last first: a literal piece of output, or a value to serialise.
  const work: Array<string | Pending> = [{ value, parent: undefined, token: "$" }];
  while (work.length > 0) {
    const item = work.pop()!;
    if (typeof item === "string") {
      out.push(item);
      continue;
    }
    const v = item.value;
    if (v === null) {
      out.push("null");
      continue;
    }
    switch (typeof v) {
      case "boolean":
        out.push(v ? "true" : "false");
        break;
      case "number":
        if (!Number.isFinite(v)) throw new TypeError(`${pathOf(item)}: ${v} cannot be represented in JSON`);
        out.push(JSON.stringify(v));
        break;
      case "string":
        out.push(JSON.stringify(v));
        break;
      case "object":
        if (Array.isArray(v)) {
          out.push("[");
          work.push("]");
          for (let i = v.length - 1; i >= 0; i--) {
            const element: unknown = v[i];
            work.push({ value: element === undefined ? null : element, parent: item, token: `[${i}]` });
            if (i > 0) work.push(",");
          }
        } else {
          const record = v as Record<string, unknown>;
          const keys = Object.keys(record)
            .filter((key) => record[key] !== undefined)
            .sort();
          out.push("{");
          work.push("}");
          for (let i = keys.length - 1; i >= 0; i--) {
            const key = keys[i]!;
            work.push({ value: record[key], parent: item, token: `.${key}` });
            work.push(`${JSON.stringify(key)}:`);
            if (i > 0) work.push(",");
          }
        }
        break;
      default:
        throw new TypeError(`${pathOf(item)}: a ${typeof v} cannot be represented in JSON`);
    }
  }
  return out.join("");
}

/** A value still to serialise, linked to its parent so an error can name where it is (`$.a[0]`). */
interface Pending {
  value: unknown;
  parent: Pending | undefined;
  token: string;
}

function pathOf(item: Pending): string {
  const tokens: string[] = [];
  for (let p: Pending | undefined = item; p !== undefined; p = p.parent) tokens.push(p.token);
  return tokens.reverse().join("");
}
