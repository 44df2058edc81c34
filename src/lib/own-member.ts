/**
 * Members named by user data. A JSON Pointer token, a header name, a vertex id or a field name
 * is a string a tenant chose, and `__proto__`, `constructor` and `toString` are valid ones. On a
 * plain object, `obj[name]` reads what the prototype has (a built-in function) and
 * `obj["__proto__"] = value` replaces the prototype — or, with an object value reached through
 * `__proto__`, writes into `Object.prototype` for every workspace the isolate serves.
 *
 * Every read, test and write of a member whose name comes from user data goes through here:
 * reads see own members only, writes define an own, enumerable data property (never a setter),
 * and a record built from user-named members starts without a prototype (`ownRecord`).
 * `test/lib/own-member.test.ts` is the one test pattern: each function with `__proto__`,
 * `constructor`, `prototype` and `toString`.
 */

/** Names that reach the prototype chain on a plain object; refused in pointers at save. */
export const PROTOTYPE_NAMES: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/** Whether `value` is a JSON object (not null, not an array). */
export const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** Whether `record` has its own member `name` (never one inherited from its prototype). */
export function hasOwnMember(record: unknown, name: string): boolean {
  return record !== null && typeof record === "object" && Object.hasOwn(record, name);
}

/** The own member `name` of `record`, or `undefined` (never a prototype's member). */
export function ownMember(record: unknown, name: string): unknown {
  return hasOwnMember(record, name) ? (record as Record<string, unknown>)[name] : undefined;
}

/** Sets `record[name] = value` as an own data property, whatever `name` is (`__proto__` included). */
export function setOwnMember<T>(record: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(record, name, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * An empty record without a prototype, for members named by user data (header names): plain
 * assignment then creates an own member whatever the name, nothing is inherited, and
 * `Object.entries`, `JSON.stringify`, spreading and `new Headers(…)` see every member.
 */
export function ownRecord<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}
