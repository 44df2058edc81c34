/**
 * One mistake, one error, pointing at what the author wrote (issue 42 §4): a workflow step through a
 * connector is resolved before it is validated (src/connectors/resolve.ts), and validation's errors on
 * the resolved step are taken back to the author's member or dropped where the resolution already
 * refused it (`authorsErrors`). Through the API (PUT /v1/workflows) and `npm run validate` alike.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { validateFiles } from "../../src/cli/validate";
import { callApp, harness, unique, type Harness } from "../steps/helpers";
import { charging } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const exampleTexts = import.meta.glob<string>("../../connectors/*.json", { eager: true, query: "?raw", import: "default" });
const connectorFiles = Object.entries(exampleTexts).map(([path, text]) => ({ path: path.replace("../../", ""), text }));

/** The harness's payments API as a connector that sets `Authorization`, keyed `charge-<order>` in `Idempotency-Key`. */
function payments(name: string) {
  return {
    name,
    baseUrl: "http://localhost:8788/payments",
    headers: { "Content-Type": "application/json", Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
    key: { profile: "stripe", rule: { fields: ["order"], format: "plain" } },
  };
}

type Refusal = { pointer: string; code: string; message: string };
const at = (member: string) => `/vertices/1/config/${member}`;

describe("a step through a connector: one mistake, one error at the author's pointer", () => {
  let h: Harness;
  let name: string;
  const refusals = async (wf: ReturnType<typeof charging>): Promise<Refusal[]> => {
    const res = await callApp(h, "PUT", `/v1/workflows/${wf.id}`, { body: wf });
    expect(res.status).toBe(422);
    return ((await res.json()) as { errors: Refusal[] }).errors;
  };
  beforeEach(async () => {
    h = harness();
    name = unique("pay");
    expect((await callApp(h, "PUT", `/v1/connectors/${name}`, { body: payments(name) })).status).toBe(201);
  });

  it("a header the connector owns (its key's header, or one it sets) is one connector-header-override", async () => {
    const key = await refusals(charging(name, { headers: { "idempotency-key": "= 'mine'" } }));
    expect(key.map((e) => [e.pointer, e.code])).toEqual([[at("headers/idempotency-key"), "connector-header-override"]]);
    const auth = await refusals(charging(name, { headers: { authorization: "Bearer other" } }));
    expect(auth.map((e) => [e.pointer, e.code])).toEqual([[at("headers/authorization"), "connector-header-override"]]);
  });

  it("a constant key field is one idempotency-key-constant at that key field, not in the resolved idempotencyKey", async () => {
    const errors = await refusals(charging(name, { keyFields: { order: "always-the-same" } }));
    expect(errors.map((e) => [e.pointer, e.code])).toEqual([[at("keyFields/order"), "idempotency-key-constant"]]);
    expect(errors[0]!.message).toContain(`connector "${name}" makes this step's key from \`operation\` and \`keyFields\``);
  });

  it("an unknown connector is one connector-not-found, with no connector-unresolved beside it", async () => {
    const errors = await refusals(charging(unique("nope")));
    expect(errors.map((e) => [e.pointer, e.code])).toEqual([[at("connector"), "connector-not-found"]]);
  });

  it("npm run validate answers the same single errors", () => {
    const lines = (wf: ReturnType<typeof charging>) =>
      validateFiles([{ path: "wf.json", text: JSON.stringify(wf) }], { connectors: connectorFiles }).lines;
    const unknown = lines(charging("nowhere"));
    expect(unknown).toHaveLength(1);
    expect(unknown[0]).toContain(`${at("connector")}`);
    expect(unknown[0]).toContain("[connector-not-found]");
    const constant = lines(charging("demo-payments", { keyFields: { order: "always-the-same" } }));
    expect(constant).toHaveLength(1);
    expect(constant[0]).toContain(`${at("keyFields/order")}`);
    expect(constant[0]).toContain("[idempotency-key-constant]");
  });
});
