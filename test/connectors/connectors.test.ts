/**
 * Connectors (SPEC section 15, docs/connectors.md): a reusable destination whose key a step cannot
 * forget. Saved and versioned per workspace; resolved into a workflow when the workflow is saved,
 * so the saved version is self-contained and editing the connector never changes a running or
 * retried step's key; a step cannot drop or override the key; the retention guard counts sends per
 * connector, not per base URL. Real D1, the real app and consumer, the harness's destination.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import committedSchema from "../../schema/connector.schema.json";
import { connectorJsonSchema } from "../../src/connectors/json-schema";
import { validateConnector } from "../../src/connectors/validate";
import { validateFiles } from "../../src/cli/validate";
import { getWorkflow } from "../../src/definitions/store";
import { callApp, executionStatus, harness, stepsOf, unique, type Harness } from "../steps/helpers";
import { charging } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";
const examples = import.meta.glob<{ default: Record<string, unknown> }>("../../connectors/*.json", { eager: true });
const exampleTexts = import.meta.glob<string>("../../connectors/*.json", { eager: true, query: "?raw", import: "default" });

/** The harness's destination's payments API as a connector (Stripe's key facts, `charge-<order>` keys). */
function payments(name: string, more: Record<string, unknown> = {}) {
  return {
    name,
    baseUrl: "http://localhost:8788/payments",
    headers: { "Content-Type": "application/json" },
    key: { profile: "stripe", rule: { fields: ["order"], format: "plain" } },
    ...more,
  };
}

const put = (h: Harness, path: string, body: unknown) => callApp(h, "PUT", path, { body });
const json = async (response: Response) =>
  (await response.json()) as Record<string, unknown> & { errors?: Array<{ pointer: string; code: string }> };
const codes = async (response: Response) => ((await json(response)).errors ?? []).map((e) => [e.pointer, e.code]);

describe("saving a connector", () => {
  it("is versioned like a workflow: 201 new, 200 the same document again, a new version when it changes", async () => {
    const h = harness();
    const name = unique("pay");
    const first = await put(h, `/v1/connectors/${name}`, payments(name));
    expect(first.status).toBe(201);
    const again = await put(h, `/v1/connectors/${name}`, payments(name));
    expect(again.status).toBe(200);
    const edited = await put(h, `/v1/connectors/${name}`, payments(name, { timeoutMs: 5000 }));
    expect(edited.status).toBe(201);
    expect((await json(edited)).version).not.toBe((await json(first)).version);
    const read = await callApp(h, "GET", `/v1/connectors/${name}`);
    expect(await json(read)).toMatchObject({ name, definition: { timeoutMs: 5000 } });
    expect((await callApp(h, "GET", `/v1/connectors/${name}`, { token: "other-token" })).status).toBe(404);
  });

  it("refuses with every pointer: a host off the allowlist, a computed header, keyless writes, a profile's missing facts", async () => {
    const h = harness();
    const name = unique("bad");
    const refused = await put(h, `/v1/connectors/${name}`, {
      name,
      baseUrl: "https://api.elsewhere.example",
      headers: { "X-Tenant": "= payload.tenant" },
    });
    expect(refused.status).toBe(422);
    expect(await codes(refused)).toEqual(
      expect.arrayContaining([
        ["/baseUrl", "host-not-allowed"],
        ["/headers/X-Tenant", "connector-header-expression"],
        ["", "connector-without-key"],
      ]),
    );
    // PayPal's profile needs the API's own limits; validated as a step through it would be.
    const paypal = await put(h, `/v1/connectors/${name}`, payments(name, { key: { profile: "paypal", rule: { fields: ["order"] } } }));
    expect(await codes(paypal)).toEqual(expect.arrayContaining([["/key/maxLength", expect.any(String)]]));
    const mismatch = await put(h, `/v1/connectors/${name}`, payments("other-name"));
    expect(await codes(mismatch)).toContainEqual(["/name", "name-mismatch"]);
  });

  it("ships the demo connectors and, as examples, Stripe, PayPal, Square and Adyen: each valid, each with the schema's $schema", () => {
    expect(
      Object.keys(examples)
        .map((p) => p.split("/").pop())
        .sort(),
    ).toEqual([
      "adyen.json",
      "demo-limited.json",
      "demo-payments.json",
      "demo-refunds.json",
      "demo-shipping.json",
      "paypal.json",
      "square.json",
      "stripe.json",
    ]);
    for (const [path, mod] of Object.entries(examples)) {
      const result = validateConnector(mod.default);
      expect([path, result.ok ? [] : result.errors]).toEqual([path, []]);
      expect(mod.default.$schema).toBe("../schema/connector.schema.json");
      expect(`${String(mod.default.name)}.json`).toBe(path.split("/").pop());
    }
    expect(committedSchema).toEqual(connectorJsonSchema());
  });
});

describe("a workflow through a connector", () => {
  it("is saved resolved: URL, headers, the key the rule makes, the provenance — and it runs with that key", async () => {
    const h = harness();
    const name = unique("pay");
    const { version } = await json(await put(h, `/v1/connectors/${name}`, payments(name)));
    const wf = charging(name);
    const saved = await put(h, `/v1/workflows/${wf.id}`, wf);
    expect(saved.status).toBe(201);
    expect((await json(saved)).warnings).toBeUndefined();
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    expect(stored.definition.vertices[1]).toMatchObject({
      config: {
        url: "http://localhost:8788/payments/charges",
        headers: { "Content-Type": "application/json" },
        idempotencyKey: { value: '= "charge-" & (payload.order.id)', profile: "stripe" },
        connector: { name, version, operation: "charge" },
      },
    });
    const id = await h.start(stored, { order: { id: "A-77" } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.keysSent("/payments/charges")).toEqual(["charge-A-77"]);
    // The retention guard's record names the connector, not the base URL's origin.
    const send = await env.DB.prepare("SELECT destination FROM destination_key_sends WHERE execution_id = ?1").bind(id).first();
    expect(send).toEqual({ destination: `connector:${name}` });
  });

  it("cannot drop or override the key, leave the base URL, or miss a business field — each refused with its pointer", async () => {
    const h = harness();
    const name = unique("pay");
    await put(h, `/v1/connectors/${name}`, payments(name, { headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" } }));
    const square = unique("sq");
    await put(h, `/v1/connectors/${square}`, {
      name: square,
      baseUrl: "http://localhost:8788/payments",
      key: { profile: "square", maxLength: 45, retention: "24h", rule: { fields: ["order"] } },
    });
    const refusals = async (wf: ReturnType<typeof charging>) => codes(await put(h, `/v1/workflows/${wf.id}`, wf));
    const at = (member: string) => `/vertices/1/config/${member}`;
    expect(await refusals(charging(unique("nope")))).toContainEqual([at("connector"), "connector-not-found"]);
    expect(await refusals(charging(name, { url: "https://evil.example/charges" }))).toContainEqual([at("url"), "connector-owns-member"]);
    expect(await refusals(charging(name, { idempotencyKey: { value: "= 'x'" } }))).toContainEqual([
      at("idempotencyKey"),
      "connector-owns-member",
    ]);
    expect(await refusals(charging(name, { headers: { "idempotency-key": "= 'mine'" } }))).toContainEqual([
      at("headers/idempotency-key"),
      "connector-header-override",
    ]);
    expect(await refusals(charging(name, { headers: { authorization: "Bearer other" } }))).toContainEqual([
      at("headers/authorization"),
      "connector-header-override",
    ]);
    expect(await refusals(charging(name, { path: "https://evil.example/charges" }))).toContainEqual([at("path"), "connector-path-invalid"]);
    expect(await refusals(charging(name, { keyFields: {} }))).toContainEqual([at("keyFields"), "connector-key-field-missing"]);
    expect(await refusals(charging(name, { keyFields: { order: "= payload.order.id", extra: "x" } }))).toContainEqual([
      at("keyFields/extra"),
      "connector-key-field-unknown",
    ]);
    expect(await refusals(charging(name, { operation: undefined }))).toContainEqual([at("operation"), "connector-operation-missing"]);
    // A constant key field makes a constant key: the key lint refuses it, as for any declared key.
    expect((await refusals(charging(name, { keyFields: { order: "always-the-same" } }))).map(([, code]) => code)).toContain(
      "idempotency-key-constant",
    );
    expect(await refusals(charging(square, { body: { order: "= payload.order.id", idempotency_key: "mine" } }))).toContainEqual([
      at("body/idempotency_key"),
      "connector-key-in-body",
    ]);
    // A read (GET is not among the writes) needs no key fields.
    const read = charging(name, { method: "GET", keyFields: undefined, operation: undefined, body: undefined });
    expect((await put(h, `/v1/workflows/${read.id}`, read)).status).toBe(201);
  });

  it("editing the connector never changes the key of a running or retried step; a re-save is a new version", async () => {
    const h = harness();
    const name = unique("pay");
    await put(h, `/v1/connectors/${name}`, payments(name));
    const wf = charging(name);
    const v1 = (await json(await put(h, `/v1/workflows/${wf.id}`, wf))).version as string;
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    h.dest.fault("/payments/charges", 500, 3);
    const id = await h.start(stored, { order: { id: "B-1" } });
    await h.drain();
    expect(await executionStatus(id)).toBe("FAILED");
    // The connector's key rule changes (plain → hashed), and the workflow is saved again.
    await put(h, `/v1/connectors/${name}`, payments(name, { key: { profile: "stripe", rule: { fields: ["order"] } } }));
    const v2 = (await json(await put(h, `/v1/workflows/${wf.id}`, wf))).version as string;
    expect(v2).not.toBe(v1);
    // The failed execution, pinned to v1, retries with the key it persisted.
    const retried = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("retry") });
    expect(retried.status).toBe(202);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(new Set(h.dest.keysSent("/payments/charges"))).toEqual(new Set(["charge-B-1"]));
    expect((await stepsOf(id)).charge?.idempotency_key).toBe("charge-B-1");
  });

  it("a write outside a connector with neither a key nor a probe saves with a warning, refused where the deployment says so", async () => {
    const h = harness();
    const wf = {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "charge", type: "GATEWAY", config: { method: "POST", url: "http://localhost:8788/payments/charges" } },
      ],
      edges: [{ from: "received", to: "charge" }],
    };
    const saved = await put(h, `/v1/workflows/${wf.id}`, wf);
    expect(saved.status).toBe(201);
    expect((await json(saved)).warnings).toEqual([expect.objectContaining({ pointer: "/vertices/1/config", code: "write-without-key" })]);
    const { app } = await import("../../src/app");
    const strict = await app.fetch(
      new Request(`http://idemflow.test/v1/workflows/${wf.id}`, {
        method: "PUT",
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: JSON.stringify({ ...wf, description: "again" }),
      }),
      { ...env, QUEUE: h.queue, KEYLESS_WRITES_REFUSED: "dev" },
    );
    expect(strict.status).toBe(422);
    expect(await strict.json()).toMatchObject({ code: "keyless-write-refused" });
  });
});

describe("npm run validate", () => {
  it("resolves a workflow's connectors against the connector files, and reports warnings apart from errors", () => {
    const connectorFiles = Object.entries(exampleTexts).map(([path, text]) => ({ path: path.replace("../../", ""), text }));
    const wf = charging("demo-payments", {}, "through-demo");
    const report = validateFiles([{ path: "wf.json", text: JSON.stringify(wf) }], { connectors: connectorFiles });
    expect(report).toMatchObject({ errorCount: 0, warningCount: 0 });
    const unknown = validateFiles([{ path: "wf.json", text: JSON.stringify(charging("nowhere")) }], { connectors: connectorFiles });
    expect(unknown.lines.join("\n")).toContain("[connector-not-found]");
  });
});
