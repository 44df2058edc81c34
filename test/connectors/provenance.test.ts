/**
 * A step's `connector` provenance object (`{ name, version, operation }`) is set only by the
 * connector resolution at save (src/connectors/resolve.ts): the retention guard trusts it — a step
 * with it records its key's sends under `connector:<name>`, not the URL's origin — so a plain step
 * that carried one could blind the guard to the sends of its real destination, or count its own
 * sends against another connector's. A definition that gives one is refused at save.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { callApp, chargeWorkflow, DEST, harness, unique } from "../steps/helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

type Problem = { errors?: Array<{ pointer: string; code: string }> };

describe("the connector provenance object", () => {
  it("a plain Gateway step that carries one is refused at save, with its pointer", async () => {
    const h = harness();
    const wf = chargeWorkflow(unique("wf"), {
      url: `${DEST}/payments/charges`,
      connector: { name: "demo-payments", version: "0".repeat(64), operation: "charge" },
    });
    const response = await callApp(h, "PUT", `/v1/workflows/${wf.id}`, { body: wf });
    expect(response.status).toBe(422);
    expect(((await response.json()) as Problem).errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ pointer: "/vertices/1/config/connector", code: "connector-provenance-given" })]),
    );
  });

  it("a resolved definition read back with GET is refused when PUT again as it is; its authoring form saves", async () => {
    const h = harness();
    const name = unique("pay");
    const connector = {
      name,
      baseUrl: `${DEST}/payments`,
      headers: { "Content-Type": "application/json" },
      key: { profile: "stripe", rule: { fields: ["order"], format: "hashed" } },
    };
    expect((await callApp(h, "PUT", `/v1/connectors/${name}`, { body: connector })).status).toBe(201);
    const authored = {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "charge",
          type: "GATEWAY",
          config: { connector: name, operation: "charge", method: "POST", path: "/charges", keyFields: { order: "= payload.order.id" } },
        },
      ],
      edges: [{ from: "received", to: "charge" }],
    };
    expect((await callApp(h, "PUT", `/v1/workflows/${authored.id}`, { body: authored })).status).toBe(201);
    const read = (await (await callApp(h, "GET", `/v1/workflows/${authored.id}`)).json()) as { definition: Record<string, unknown> };
    expect(read.definition).toMatchObject({ vertices: [{}, { config: { connector: { name } } }] });
    const again = await callApp(h, "PUT", `/v1/workflows/${authored.id}`, { body: read.definition });
    expect(again.status).toBe(422);
    expect(((await again.json()) as Problem).errors?.map((e) => e.code)).toContain("connector-provenance-given");
    expect((await callApp(h, "PUT", `/v1/workflows/${authored.id}`, { body: authored })).status).toBe(200);
  });
});
