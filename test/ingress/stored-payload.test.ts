/**
 * What a trigger's payload is once stored, and its bound (src/ingress/payload.ts).
 *
 * `maxPayloadBytes` bounds the body as sent, but the payload is stored as JSON — on the execution
 * and as the entry step's output — and that form can be several times larger: without the stored
 * bound, D1 refuses the start batch (the suite's D1 wrapper enforces its 2,000,000-byte values) and
 * the sender gets a 500 it retries for ever. A body that is not JSON is kept byte for byte, so a
 * start over runs on exactly what the identity was computed from.
 */
import { stepsWithEntry } from "../../src/ledger/entry-step";
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_STORED_PAYLOAD_BYTES } from "../../src/ingress/payload";
import { BASE, countRows, seedWorkflow, sign, transformWorkflow, unique } from "./helpers";

/** An entry whose only edge is never taken: the execution completes at the start (a start over may follow at once). */
const completesAtOnce = (id: string, entry: Record<string, unknown> = {}) =>
  transformWorkflow(id, entry, { edges: [{ from: "received", to: "shape", when: "= false" }] });

function trigger(workflowId: string, body: BodyInit, contentType: string): Promise<Response> {
  return SELF.fetch(
    new Request(`${BASE}/v1/workflows/${workflowId}/trigger`, {
      method: "POST",
      headers: { authorization: "Bearer dev-token", "content-type": contentType },
      body,
    }),
  );
}

/**
 * The stored payload, and the entry step's output as the steps' readers see it (src/ledger/entry-step.ts):
 * since migrations/0045 the entry has no row and the payload is stored once, on the execution.
 */
async function storedCopies(executionId: string): Promise<{ payload: string; entryOutput: string }> {
  // One read each: together they can be more than one D1 row may return.
  const payload = await env.DB.prepare("SELECT payload FROM executions WHERE id = ?").bind(executionId).first<string>("payload");
  const entryOutput = await env.DB.prepare(
    `SELECT s.output FROM ${stepsWithEntry("(?1)")} AS s
     JOIN executions e ON e.id = s.execution_id AND e.entry_vertex_id = s.vertex_id`,
  )
    .bind(executionId)
    .first<string>("output");
  if (payload === null || entryOutput === null) throw new Error(`execution ${executionId} not found`);
  const entryRows = await env.DB.prepare(
    `SELECT count(*) AS n FROM steps s JOIN executions e ON e.id = s.execution_id AND e.entry_vertex_id = s.vertex_id
     WHERE s.execution_id = ?`,
  )
    .bind(executionId)
    .first<number>("n");
  expect(entryRows).toBe(0);
  return { payload, entryOutput };
}

async function started(res: Response): Promise<string> {
  expect(res.status).toBe(202);
  return (await res.json<{ executionId: string }>()).executionId;
}

const executionsOf = (workflowId: string) => countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", workflowId);

const fromBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

describe("the stored payload", () => {
  it("answers 413 naming the stored size when control characters under maxPayloadBytes would be stored over the bound", async () => {
    const id = unique("controls");
    await seedWorkflow("dev", completesAtOnce(id));
    // 1 MiB − 1 bytes: under the default maxPayloadBytes; stored as a JSON string, each is `\u0001`.
    const body = "\u0001".repeat(1024 * 1024 - 1);
    const res = await trigger(id, body, "text/plain");
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const storedBytes = 6 * body.length + 2;
    const problem = await res.json<{ code: string; detail: string }>();
    expect(problem).toMatchObject({
      code: "stored-payload-too-large",
      bodyBytes: body.length,
      storedBytes,
      limitBytes: MAX_STORED_PAYLOAD_BYTES,
    });
    expect(problem.detail).toContain(`${storedBytes} bytes`);
    expect(problem.detail).toContain(`${MAX_STORED_PAYLOAD_BYTES}-byte limit`);
    expect(await executionsOf(id)).toBe(0);
    expect(await countRows("SELECT count(*) AS n FROM execution_identities WHERE workflow_id = ?", id)).toBe(0);
  });

  it("stores a payload of exactly MAX_STORED_PAYLOAD_BYTES, measured in UTF-8 bytes, and refuses one byte more", async () => {
    const id = unique("edge");
    await seedWorkflow("dev", completesAtOnce(id));
    // 6 bytes per control character, 2 per `é` (one UTF-16 unit: `.length` would count 1), 2 quotes.
    const controls = "\u0001".repeat(200_000);
    const accents = "é".repeat((MAX_STORED_PAYLOAD_BYTES - 6 * 200_000 - 2) / 2);
    const fits = controls + accents;
    expect(new TextEncoder().encode(JSON.stringify(fits)).byteLength).toBe(MAX_STORED_PAYLOAD_BYTES);
    const executionId = await started(await trigger(id, fits, "text/plain"));
    const { payload, entryOutput } = await storedCopies(executionId);
    expect(JSON.parse(payload)).toBe(fits);
    expect(entryOutput).toBe(payload);

    const over = await trigger(id, `${fits}x`, "text/plain");
    expect(over.status).toBe(413);
    expect(await over.json()).toMatchObject({ code: "stored-payload-too-large", storedBytes: MAX_STORED_PAYLOAD_BYTES + 1 });
    expect(await executionsOf(id)).toBe(1);
  });

  it("measures a JSON payload as it is stored: numbers in full (`1e15` is stored as 16 digits)", async () => {
    const id = unique("numbers");
    await seedWorkflow("dev", completesAtOnce(id));
    // Under 1 MiB as sent, about 3.5 MB as stored.
    const items = Math.floor((1024 * 1024 - 2) / 5);
    const body = `[${Array.from({ length: items }, () => "1e15").join(",")}]`;
    expect(body.length).toBeLessThan(1024 * 1024);
    const res = await trigger(id, body, "application/json");
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: "stored-payload-too-large", bodyBytes: body.length, storedBytes: 17 * items + 1 });
    expect(await executionsOf(id)).toBe(0);
    // A small one is stored, with the number written out.
    const executionId = await started(await trigger(id, '{"n":1e15,"m":1E2}', "application/json"));
    expect((await storedCopies(executionId)).payload).toBe('{"n":1000000000000000,"m":100}');
  });

  it("keeps a body that is not UTF-8 byte for byte, as base64, and a start over runs on the same bytes", async () => {
    const id = unique("binary");
    await seedWorkflow("dev", completesAtOnce(id));
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x41, 0xc3, 0x28, 0x80, 0x22, 0x5c]);
    const other = new Uint8Array([0xfe, 0xff, 0x00, 0x41, 0xc3, 0x28, 0x80, 0x22, 0x5c]);
    const executionId = await started(await trigger(id, bytes, "application/octet-stream"));
    const { payload, entryOutput } = await storedCopies(executionId);
    expect(entryOutput).toBe(payload);
    const stored = JSON.parse(payload) as { kind: string; base64: string };
    expect(stored).toEqual({ kind: "bytes", base64: expect.any(String) });
    expect(fromBase64(stored.base64)).toEqual(bytes);
    // Another body that decodes to the same text with U+FFFD is another payload.
    const otherId = await started(await trigger(id, other, "application/octet-stream"));
    expect(fromBase64((JSON.parse((await storedCopies(otherId)).payload) as { base64: string }).base64)).toEqual(other);

    const over = await SELF.fetch(
      new Request(`${BASE}/v1/executions/${executionId}/start-over`, {
        method: "POST",
        headers: { authorization: "Bearer dev-token", "idempotency-key": unique("op") },
      }),
    );
    expect(over.status).toBe(202);
    const again = await storedCopies((await over.json<{ executionId: string }>()).executionId);
    expect(again.payload).toBe(payload);
    expect(fromBase64((JSON.parse(again.payload) as { base64: string }).base64)).toEqual(bytes);
  });

  it("keeps a UTF-8 text body as its text, byte order mark included", async () => {
    const id = unique("text");
    await seedWorkflow("dev", completesAtOnce(id));
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, 0x68, 0x69]);
    const executionId = await started(await trigger(id, withBom, "text/plain"));
    expect(JSON.parse((await storedCopies(executionId)).payload)).toBe("\uFEFFhi");
    // Without the mark it is another body, another identity, another payload.
    const plainId = await started(await trigger(id, "hi", "text/plain"));
    expect(plainId).not.toBe(executionId);
    expect(JSON.parse((await storedCopies(plainId)).payload)).toBe("hi");
  });

  it("is bounded on the signed hook too", async () => {
    const id = unique("hook");
    await seedWorkflow("dev", completesAtOnce(id, { webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}" } } }));
    const raw = "\u0001".repeat(300_000);
    const timestamp = Math.floor(Date.now() / 1000).toString();
    const res = await SELF.fetch(
      new Request(`${BASE}/hooks/dev/${id}`, {
        method: "POST",
        headers: {
          "content-type": "text/plain",
          "x-idemflow-timestamp": timestamp,
          "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, timestamp, raw, { workspace: "dev", workflowId: id }),
        },
        body: raw,
      }),
    );
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: "stored-payload-too-large", storedBytes: 6 * 300_000 + 2 });
    expect(await executionsOf(id)).toBe(0);
  });
});
