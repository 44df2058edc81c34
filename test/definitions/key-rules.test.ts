import { describe, expect, it } from "vitest";
import { WorkflowDefinition } from "../../src/definitions/schema";
import { stepInputsOf } from "../../src/definitions/step-inputs";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

function errorsOf(input: unknown): ValidationError[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors;
}

/** entry → pay, a Gateway step whose config is the default charge with `config` merged in. */
const workflow = (config: Record<string, unknown>) => ({
  id: "key-rules",
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: {} },
    {
      id: "pay",
      type: "GATEWAY",
      config: {
        method: "POST",
        url: "http://localhost:8788/checkout/payments",
        body: { order: "= payload.order.id" },
        ...config,
      },
    },
  ],
  edges: [{ from: "received", to: "pay" }],
});

const key = (declaration: Record<string, unknown>, config: Record<string, unknown> = {}) =>
  workflow({ idempotencyKey: { value: "= $idempotencyKey('pay', payload.order.id)", ...declaration }, ...config });

const at = (pointer: string) => `/vertices/1/config${pointer}`;
const brief = (errors: ValidationError[]) => errors.map((e) => [e.pointer, e.code]);

describe("a destination key declaration that does not resolve", () => {
  it("names the fact its profile leaves to the step", () => {
    const errors = errorsOf(key({ profile: "square" }));
    expect(brief(errors)).toEqual([
      [at("/idempotencyKey/maxLength"), "key-fact-required"],
      [at("/idempotencyKey/retention"), "key-fact-required"],
    ]);
    expect(errors[0]!.message).toMatch(/the Square profile does not know the destination's longest key; set `maxLength`/);
  });

  it("refuses two places for the key, and a key declared twice", () => {
    expect(brief(errorsOf(key({ header: "X-Key", bodyField: "/key" })))).toEqual([[at("/idempotencyKey/bodyField"), "key-location-twice"]]);
    expect(brief(errorsOf(key({ header: "X-Key" }, { headers: { "x-key": "= payload.order.id" } })))).toEqual([
      [at("/headers/x-key"), "key-header-twice"],
    ]);
    expect(
      brief(errorsOf(key({ header: "X-Key" }, { headers: { "Idempotency-Key": "= $idempotencyKey('a', payload.order.id)" } }))),
    ).toEqual([[at("/headers/Idempotency-Key"), "key-declared-twice"]]);
  });
});

describe("what is proven not to fit is refused at save time", () => {
  it("a literal prefix too long for maxLength (given the shortest safe digest)", () => {
    const errors = errorsOf(key({ value: "= $idempotencyKey('a-much-longer-prefix-here', payload.order.id)", maxLength: 40 }));
    expect(brief(errors)).toEqual([[at("/idempotencyKey/value"), "key-prefix-does-not-fit"]]);
    expect(errors[0]!.message).toBe(
      '$idempotencyKey: the prefix "a-much-longer-prefix-here" is too long for keys of at most 40 characters: the digest needs at least ' +
        "16 base64url characters (96 bits); use a prefix of at most 23. " +
        "Every key this step builds would be refused; shorten or change the prefix",
    );
    expect(errorsOf(key({ value: "= $idempotencyKey('a-long-prefix-that-fits', payload.order.id)", maxLength: 40 }))).toEqual([]);
  });

  it("a literal prefix with a character the alphabet refuses", () => {
    const errors = errorsOf(key({ value: "= $idempotencyKey('pay-v2', payload.order.id)", alphabet: "alphanumeric", maxLength: 40 }));
    expect(brief(errors)).toEqual([[at("/idempotencyKey/value"), "key-prefix-does-not-fit"]]);
    expect(errors[0]!.message).toMatch(
      /the prefix "pay-v2" holds characters the destination refuses \(it accepts letters and digits only\)/,
    );
    expect(errorsOf(key({ value: "= $idempotencyKey('payv2', payload.order.id)", alphabet: "alphanumeric", maxLength: 40 }))).toEqual([]);
  });

  it("a body field in a literal body that is not an object, a field the body already sets, a GET with no body", () => {
    expect(brief(errorsOf(key({ bodyField: "/idempotency_key", maxLength: 45 }, { body: ["a"] })))).toEqual([
      [at("/body"), "key-body-not-object"],
    ]);
    expect(brief(errorsOf(key({ bodyField: "/payment/key", maxLength: 45 }, { body: { payment: "card" } })))).toEqual([
      [at("/body/payment"), "key-body-not-object"],
    ]);
    expect(brief(errorsOf(key({ bodyField: "/idempotency_key", maxLength: 45 }, { body: { idempotency_key: "= payload.k" } })))).toEqual([
      [at("/body/idempotency_key"), "key-body-field-set"],
    ]);
    expect(brief(errorsOf(key({ bodyField: "/k", maxLength: 45 }, { method: "GET", body: undefined })))).toEqual([
      [at("/idempotencyKey/bodyField"), "key-body-field-without-body"],
    ]);
  });

  it("what depends on data is left to the run: a body expression, a key built with &", () => {
    expect(errorsOf(key({ bodyField: "/idempotency_key", maxLength: 45 }, { body: "= payload.order" }))).toEqual([]);
    expect(errorsOf(key({ bodyField: "/payment/key", maxLength: 45 }, { body: { payment: "= payload.payment" } }))).toEqual([]);
    expect(errorsOf(key({ value: "= 'pay-' & payload.order.id", maxLength: 10 }))).toEqual([]);
    expect(errorsOf(key({ profile: "square", maxLength: 45, retention: "24h" }))).toEqual([]);
  });
});

describe("the key lint and the secrets rule apply to the declared key wherever it travels", () => {
  it.each([
    ["a header of another name", { header: "PayPal-Request-Id" }],
    ["a body field", { bodyField: "/idempotency_key", maxLength: 45 }],
  ])("in %s", (_where, declaration) => {
    expect(brief(errorsOf(key({ ...declaration, value: "= $idempotencyKey('pay', $now())" })))).toEqual([
      [at("/idempotencyKey/value"), "idempotency-key-unstable"],
    ]);
    expect(brief(errorsOf(key({ ...declaration, value: "= 'pay-' & execution.id" })))).toEqual([
      [at("/idempotencyKey/value"), "idempotency-key-unstable"],
    ]);
    expect(brief(errorsOf(key({ ...declaration, value: "= 'always-the-same'" })))).toEqual([
      [at("/idempotencyKey/value"), "idempotency-key-constant"],
    ]);
    expect(brief(errorsOf(key({ ...declaration, value: "= '{{ secrets.PAYMENTS_KEY }}' & payload.order.id" })))).toEqual([
      [at("/idempotencyKey/value"), "secret-in-idempotency-key"],
    ]);
  });

  it("a key expression that does not compile is reported at its pointer", () => {
    expect(brief(errorsOf(key({ value: "= $idempotencyKey('pay', payload.order.id" })))).toEqual([
      [at("/idempotencyKey/value"), "expression-syntax"],
    ]);
  });
});

describe("a declared key's reads are inputs of its step", () => {
  it("the claim loads the outputs the key expression reads (it is evaluated at the first attempt)", () => {
    const definition = WorkflowDefinition.parse({
      id: "key-reads",
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "lookup", type: "TRANSFORM", config: { output: { id: "= payload.order.id" } } },
        {
          id: "pay",
          type: "GATEWAY",
          config: {
            method: "POST",
            url: "http://localhost:8788/checkout/payments",
            idempotencyKey: { value: "= $idempotencyKey('pay', steps.lookup.id)", bodyField: "/idempotency_key", maxLength: 45 },
          },
        },
      ],
      edges: [
        { from: "received", to: "lookup" },
        { from: "lookup", to: "pay" },
      ],
    });
    expect(stepInputsOf(definition).vertices.pay).toEqual({ all: false, payload: false, steps: ["lookup"] });
  });
});

describe("a retry schedule that outlasts the destination's retention", () => {
  const quick = { maxAttempts: 3, maxDelayMs: 10_000, inProgressBudgetMs: 1_000 };

  it("is refused at save time, with the numbers and what to lower", () => {
    // 3 × 10 s timeouts + 2 × 5 min waits + 15 min in progress = 1,530 s; Qonto-like 30 min keeps a minute's margin.
    expect(errorsOf(key({ retention: "30m" }))).toEqual([]);
    const errors = errorsOf(key({ retention: "25m" }));
    expect(brief(errors)).toEqual([[at("/idempotencyKey"), "retry-outlasts-retention"]]);
    expect(errors[0]!.message).toBe(
      "the retry schedule can keep re-sending the key for 1530 s (attempts × timeoutMs + waits at maxDelayMs, which also bounds " +
        "Retry-After, + the in-progress budget), but the destination remembers keys for 1500 s and the retention guard stops at " +
        "1440 s: the last retries would be refused. Lower retry.maxAttempts, retry.maxDelayMs or retry.inProgressBudgetMs, " +
        "or correct idempotencyKey.retention",
    );
    // With a retry policy of its own, the pointer names it.
    expect(brief(errorsOf(key({ retention: "30s" }, { retry: { ...quick, maxAttempts: 4 } })))).toEqual([
      [at("/retry"), "retry-outlasts-retention"],
    ]);
    expect(errorsOf(key({ retention: "2m" }, { retry: quick, timeoutMs: 5_000 }))).toEqual([]);
  });

  it("is not judged without a retention (the original header form, or none declared)", () => {
    expect(errorsOf(key({}, { retry: { maxAttempts: 100, maxDelayMs: 86_400_000 } }))).toEqual([]);
  });
});
