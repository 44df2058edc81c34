/**
 * A member named `__proto__` anywhere in a definition is refused at save. JSON keeps it as an
 * ordinary member, but a JavaScript object reads it as the object's prototype: the schema's parse
 * drops it without a word, so a header, a query parameter, a body field or an output member of
 * that name would vanish from the saved version and never be sent. Refused, it is the author's
 * to rename; silently lost, nobody would know. (`constructor`, `toString` and the like stay: they
 * are kept as own members.) Judged on the raw document, as parsed from JSON.
 */
import type { ValidationError } from "./errors";
import { pointerOf, type PathSegment } from "./pointer";

const PROTO = "__proto__";

export function checkPrototypeMembers(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  const walk = (value: unknown, path: PathSegment[]) => {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, [...path, i]));
    else if (value !== null && typeof value === "object") {
      for (const key of Object.keys(value)) {
        const at = [...path, key];
        if (key === PROTO) {
          errors.push({
            pointer: pointerOf(...at),
            code: "prototype-member",
            message:
              "a member named `__proto__` cannot be kept: JavaScript reads it as an object's prototype, so it would silently " +
              "disappear from the saved version (a header, body field or output member never sent); rename it",
          });
        }
        walk((value as Record<string, unknown>)[key], at);
      }
    }
  };
  walk(document, []);
  return errors;
}
