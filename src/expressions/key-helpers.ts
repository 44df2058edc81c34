/**
 * Functions for building destination keys inside expressions.
 *
 * `$idempotencyKey(prefix, part1, part2, …)` → `prefix-<base64url(SHA-256(JCS([part1, part2, …])))>`:
 * stable across runs and deployments (it depends only on the business values), scoped per
 * operation by its prefix, and bounded in length (prefix + 44 characters). Inside the key
 * expression of a step that declares its destination's constraints (`idempotencyKey` with a
 * profile, `maxLength` or `alphabet`), the digest is shaped to fit them (./key-shape.ts); a key
 * that already fits is unchanged, and everywhere else the helper is exactly the above.
 * `$sha256(value)` → lowercase hex SHA-256 of a string (or of the canonical JSON of any other value).
 *
 * Both refuse a number a 64-bit float cannot carry exactly (src/lib/json-numbers.ts: beyond
 * ±(2^53 − 1), or not finite) — the same rule as trigger payloads. Payloads are checked on the
 * way in, but keys are also built from destination answers and computed values: a charge id
 * `12345678901234567891` in a response body reads as `…567000`, and its neighbours would get the
 * same key (one charge deduplicating another).
 */
import type jsonata from "jsonata";
import { canonicalJson } from "../lib/canonical-json";
import { sha256, sha256Hex, toBase64Url } from "../lib/crypto";
import { findUnsafeNumber, MAX_EXACT_NUMBER } from "../lib/json-numbers";
import type { KeyConstraints } from "../lib/key-constraints";
import { keyShape, shapedKey } from "./key-shape";
import { declareParameters } from "./native-function";

export const KEY_PREFIX_MAX = 64;

export async function idempotencyKey(prefix: unknown, ...parts: unknown[]): Promise<string> {
  return `${checkPrefix(prefix)}-${toBase64Url(await digestOf(parts))}`;
}

/** `$idempotencyKey` inside a key expression whose destination declares `constraints`. */
export async function shapedIdempotencyKey(constraints: KeyConstraints, prefix: unknown, ...parts: unknown[]): Promise<string> {
  const checked = checkPrefix(prefix);
  const shaped = keyShape(checked, constraints);
  if ("error" in shaped) throw new Error(`$idempotencyKey: ${shaped.error}`);
  return shapedKey(checked, await digestOf(parts), shaped.shape);
}

function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== "string" || !/^[A-Za-z0-9._:-]{1,64}$/.test(prefix)) {
    throw new Error("$idempotencyKey: the prefix must be 1-64 characters of letters, digits, '.', '_', ':' or '-'");
  }
  return prefix;
}

function digestOf(parts: unknown[]): Promise<Uint8Array> {
  if (parts.length === 0) throw new Error("$idempotencyKey: pass at least one business value after the prefix");
  parts.forEach((part, i) => {
    // Null and an empty string are values here (the recorded keys hold them); a destination key's
    // expression refuses them as its parts (src/definitions/key-parts.ts, checked before the key).
    if (part === undefined)
      throw new Error(`$idempotencyKey: value ${i + 1} is missing (undefined); keys must not collapse on absent data`);
    assertExactNumbers("$idempotencyKey", `value ${i + 1}`, part);
  });
  return sha256(canonicalJson(parts));
}

/**
 * Binding name under which `evaluate()` passes a key expression's destination constraints; read
 * from the evaluation's base frame, where an expression's own variables cannot shadow it.
 */
export const KEY_CONSTRAINTS_BINDING = "__idemflow_key_constraints";

type Frame = jsonata.Environment & { base?: jsonata.Environment };

function constraintsOf(focus: { environment?: Frame } | undefined): KeyConstraints | undefined {
  const environment = focus?.environment;
  return (environment?.base ?? environment)?.lookup(KEY_CONSTRAINTS_BINDING) as KeyConstraints | undefined;
}

export async function sha256Of(value: unknown): Promise<string> {
  if (value === undefined) throw new Error("$sha256: the value is missing (undefined)");
  if (typeof value !== "string") assertExactNumbers("$sha256", "the value", value);
  return sha256Hex(typeof value === "string" ? value : canonicalJson(value));
}

function assertExactNumbers(helper: string, what: string, value: unknown): void {
  const found = findUnsafeNumber(value);
  if (!found) return;
  const at = found.pointer === "" ? "" : ` at ${found.pointer}`;
  const why = Number.isFinite(Number(found.literal))
    ? `an integer beyond ±${MAX_EXACT_NUMBER} (2^53 − 1), which a 64-bit float cannot tell from its neighbours`
    : "not a finite number";
  throw new Error(
    `${helper}: ${what} holds the number ${found.literal}${at}, ${why}, so different values could get the same key; pass such an ` +
      `id as a string`,
  );
}

/** The functions idemflow adds to every expression (validation treats them as known). */
export const KEY_HELPER_NAMES: ReadonlySet<string> = new Set(["idempotencyKey", "sha256"]);

/**
 * How the helpers present themselves to JSONata, like any of its functions: a signature (checked
 * on every call, JSONata's own T0410 error when an argument has the wrong type), an arity (what
 * higher-order functions pass them) and a parameter list (what partial application binds).
 *
 * `$idempotencyKey` is variadic, but JSONata's partial application binds a fixed parameter list,
 * so it declares two: the prefix and one value. `$idempotencyKey('line', ?)` is a function of one
 * value; to key on more values, write a lambda (definitions validation refuses a partial
 * application with more arguments, which JSONata would otherwise drop without a word).
 */
export const KEY_HELPERS = {
  idempotencyKey: { signature: "<sx+:s>", parameters: "prefix, value" },
  sha256: { signature: "<x:s>", parameters: "value" },
} as const;

export function registerKeyHelpers(expression: jsonata.Expression): void {
  expression.registerFunction(
    "idempotencyKey",
    declareParameters(
      function (this: { environment?: Frame } | undefined, prefix: unknown, ...parts: unknown[]) {
        const constraints = constraintsOf(this);
        return constraints ? shapedIdempotencyKey(constraints, prefix, ...parts) : idempotencyKey(prefix, ...parts);
      },
      "idempotencyKey",
      KEY_HELPERS.idempotencyKey.parameters,
    ),
    KEY_HELPERS.idempotencyKey.signature,
  );
  expression.registerFunction(
    "sha256",
    declareParameters((value: unknown) => sha256Of(value), "sha256", KEY_HELPERS.sha256.parameters),
    KEY_HELPERS.sha256.signature,
  );
}
