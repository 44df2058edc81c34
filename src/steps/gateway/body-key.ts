/**
 * A destination key that travels in the JSON body (Square's `idempotency_key`): the persisted key
 * set at the declared JSON Pointer of the evaluated body. Pure.
 *
 * The body must be a JSON object there. A missing member on the way is created as an empty object
 * (`/payment/idempotency_key` on `{ "amount": 5 }` gives `{ "amount": 5, "payment": { … } }`), and
 * a step without a body sends `{}` with the key: the key has one place, and nothing else is
 * guessed. A member that exists and is not an object (a string, an array, null) — or a body that
 * is not an object at all — fails the step, not retried: the same definition builds the same body
 * again. A value the body already has at the pointer is replaced: the declared key is the one the
 * destination must see (validation refuses a literal body that sets it, src/definitions/key-rules.ts).
 *
 * The pointer's tokens are the tenant's, and a version saved before validation refused `__proto__`,
 * `constructor` and `prototype` tokens still runs: the walk reads own members only and creates
 * own members (src/lib/own-member.ts), so `/__proto__/x` sets the body's own `__proto__` member —
 * the key goes where the definition says — and never reaches `Object.prototype`.
 */
import { pointerTokens } from "../../lib/json-pointer";
import { isJsonObject as isObject, ownMember, setOwnMember } from "../../lib/own-member";

const kindOf = (value: unknown): string => (value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`);

/** A copy of `body` with `key` at `pointer`, or why the key cannot go there. */
export function placeKeyInBody(body: unknown, pointer: string, key: string): { body: Record<string, unknown> } | { error: string } {
  const root = body === undefined ? {} : body;
  if (!isObject(root)) {
    return { error: `the key travels in body field ${pointer}, but the body evaluated to ${kindOf(root)}, not a JSON object` };
  }
  const copy = structuredClone(root);
  const tokens = pointerTokens(pointer);
  let at: Record<string, unknown> = copy;
  for (let i = 0; i < tokens.length - 1; i++) {
    const token = tokens[i]!;
    let next = ownMember(at, token);
    if (next === undefined) {
      next = {};
      setOwnMember(at, token, next);
    } else if (!isObject(next)) {
      const where = `/${tokens
        .slice(0, i + 1)
        .map((t) => t.replace(/~/g, "~0").replace(/\//g, "~1"))
        .join("/")}`;
      return { error: `the key travels in body field ${pointer}, but the body's ${where} is ${kindOf(next)}, not a JSON object` };
    }
    at = next as Record<string, unknown>;
  }
  setOwnMember(at, tokens[tokens.length - 1]!, key);
  return { body: copy };
}
