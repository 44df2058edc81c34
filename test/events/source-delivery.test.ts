/**
 * `POST /events/{workspace}/{source}` (src/http/routes/event-sources.ts): a provider's signed
 * webhook → the source's expressions → one event, delivered by `ingestEvent` with the source's
 * name. Real D1, the real app and delivery batch; the steps run through the harness (its clock,
 * which the route reads through `Date.now`, and its queue, which gets the resumed step's message).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { hmacSha256, toHex } from "../../src/lib/crypto";
import { dbOf } from "../helpers/shards";
import { executionStatus, harness, seedWorkflow, stepsOf, type Harness } from "../steps/helpers";
import { BASE, standardHeaders, unique, v1Headers, whsec } from "./helpers";
import { capturePublicRefusals, DELIVERY_REJECTED } from "../helpers/public-refusals";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());
/** The public route answers every refusal `delivery-rejected`; the reason is in the log (src/http/public-answer.ts). */
const refusals = capturePublicRefusals();

const TOKENS: Record<string, string> = { dev: "dev-token", other: "other-token" };
const SECRET = whsec("the payments provider's key, 32b");

/** The demo payments provider's shape (demo/src/confirmations.ts). */
const PAYMENTS = {
  scheme: "standard-webhooks",
  secret: "{{ secrets.PROVIDER_SECRET }}",
  name: "= body.type = 'charge.succeeded' ? 'payment.confirmed' : body.type",
  match: "= body.data.order",
  data: "= body.data",
};

/** A request to the app in this isolate, on the harness's clock and queue. */
async function call(h: Harness, method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const clock = vi.spyOn(Date, "now").mockImplementation(() => h.clock.now());
  try {
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`${BASE}${path}`, { method, headers: { "content-type": "application/json", ...init.headers }, body: init.body }),
      { ...env, QUEUE: h.queue },
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return res;
  } finally {
    clock.mockRestore();
  }
}

const put = (h: Harness, workspace: string, path: string, body: unknown) =>
  call(h, "PUT", path, { body: JSON.stringify(body), headers: { authorization: `Bearer ${TOKENS[workspace]}` } });

/** A source of `workspace` named `name`, and (when given) the workspace secret PROVIDER_SECRET. */
async function source(
  h: Harness,
  workspace: string,
  definition: Record<string, unknown>,
  secret: string | null = SECRET,
  name = unique("src"),
) {
  if (secret !== null) expect((await put(h, workspace, "/v1/secrets/PROVIDER_SECRET", { value: secret })).status).toBe(200);
  const res = await put(h, workspace, `/v1/event-sources/${name}`, definition);
  expect(res.status, await res.clone().text()).toBe(201);
  return name;
}

const nowS = (h: Harness) => Math.floor(h.clock.now() / 1000);

async function deliver(h: Harness, path: string, body: string, headers: Record<string, string>) {
  return call(h, "POST", path, { body, headers });
}

const webhook = (order: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ type: "charge.succeeded", data: { charge: `ch_${order}`, order, amount: 42 }, ...extra });

/** entry → confirmed (WAIT_FOR_EVENT payment.confirmed on payload.order) → done. */
function waiting(id = unique("wf")): WorkflowDefinitionInput {
  return {
    id,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "confirmed", type: "WAIT_FOR_EVENT", config: { event: "payment.confirmed", match: "= payload.order", timeout: "10m" } },
      { id: "done", type: "TRANSFORM", config: { output: { charge: "= steps.confirmed.data.charge" } } },
    ],
    edges: [
      { from: "entry", to: "confirmed" },
      { from: "confirmed", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

async function parkedWait(h: Harness, order: string): Promise<string> {
  const wf = await seedWorkflow("dev", waiting());
  const id = await h.start(wf, { order });
  const first = h.queue.take().find((m) => m.body.executionId === id)!;
  await h.deliver([first.body]);
  const parked = await env.DB.prepare("SELECT parked_until FROM steps WHERE execution_id = ?1 AND vertex_id = 'confirmed'")
    .bind(id)
    .first<{ parked_until: number | null }>();
  expect(parked?.parked_until).not.toBeNull();
  return id;
}

async function eventsOf(workspace: string, sourceName: string) {
  const { results } = await dbOf(env, workspace)
    .prepare("SELECT event_id, name, match_value, data, duplicates, consumed_at FROM events WHERE workspace = ?1 AND source = ?2")
    .bind(workspace, sourceName)
    .all<{ event_id: string; name: string; match_value: string; data: string | null; duplicates: number; consumed_at: number | null }>();
  return results;
}

describe("a provider's webhook through an event source", () => {
  it("resumes the waiting execution once: its two deliveries (one webhook-id) are one event, the second counted", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    const order = unique("A");
    const id = await parkedWait(h, order);
    const body = webhook(order);

    const first = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, `msg_${order}`, nowS(h), body));
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({
      eventId: `msg_${order}`,
      name: "payment.confirmed",
      match: order,
      deduplicated: false,
      resumed: [id],
      buffered: false,
      duplicates: 0,
    });
    h.clock.t += 2_000; // the provider's retry: signed again, at its own time, over the same bytes
    const second = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, `msg_${order}`, nowS(h), body));
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ eventId: `msg_${order}`, deduplicated: true, resumed: [id], duplicates: 1 });
    // One message to run the resumed step (the other pending one is the park's wake-up at the timeout).
    expect(h.queue.pending.filter((m) => m.body.executionId === id && m.dueAt <= h.clock.now())).toHaveLength(1);

    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(JSON.parse(steps.confirmed!.output!)).toMatchObject({
      name: "payment.confirmed",
      id: `msg_${order}`,
      match: order,
      data: { charge: `ch_${order}`, order, amount: 42 },
    });
    expect(JSON.parse(steps.done!.output!)).toEqual({ charge: `ch_${order}` });
    expect(await eventsOf("dev", name)).toEqual([
      expect.objectContaining({ event_id: `msg_${order}`, name: "payment.confirmed", duplicates: 1, consumed_at: expect.any(Number) }),
    ]);
  });

  it("buffers an event no wait takes yet; a wait that starts later takes it", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    const order = unique("B");
    const body = webhook(order);
    const res = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, `msg_${order}`, nowS(h), body));
    expect(await res.json()).toMatchObject({ deduplicated: false, resumed: [], buffered: true });
    const wf = await seedWorkflow("dev", waiting());
    const id = await h.start(wf, { order });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("reads the signed headers only: `webhook-id` is there, an unsigned header is not", async () => {
    const h = harness();
    const name = await source(h, "dev", { ...PAYMENTS, data: "= { 'delivery': headers.`webhook-id`, 'kind': headers.`x-kind` }" });
    const order = unique("H");
    const body = webhook(order);
    const headers = { ...(await standardHeaders(SECRET, `msg_${order}`, nowS(h), body)), "x-kind": "forged" };
    expect((await deliver(h, `/events/dev/${name}`, body, headers)).status).toBe(202);
    expect(JSON.parse((await eventsOf("dev", name))[0]!.data!)).toEqual({ delivery: `msg_${order}` });

    // So an unsigned header cannot choose the event: an `id` read from one gives nothing, and is refused.
    const byHeader = await source(h, "dev", { ...PAYMENTS, id: "= headers.`x-event-id`" }, null);
    const refused = await deliver(h, `/events/dev/${byHeader}`, body, {
      ...(await standardHeaders(SECRET, `msg_${order}`, nowS(h), body)),
      "x-event-id": "evt_new",
    });
    expect(refused.status).toBe(422);
    expect(await refused.json()).toMatchObject({ code: "event-extract-failed", member: "id" });
  });
});

describe("a delivery that is refused writes nothing", () => {
  it("standard-webhooks: a stale or future timestamp, another secret, a tampered body, a missing header: 401", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    const order = unique("R");
    const id = await parkedWait(h, order);
    const body = webhook(order);
    const signed = (overrides: { secret?: string; at?: number; body?: string } = {}) =>
      standardHeaders(overrides.secret ?? SECRET, `msg_${order}`, overrides.at ?? nowS(h), overrides.body ?? body);
    const missing = async (header: string) => {
      const all = await signed();
      delete all[header];
      return all;
    };
    const cases: Array<[string, Record<string, string>]> = [
      ["event-signature-stale", await signed({ at: nowS(h) - 301 })],
      ["event-signature-stale", await signed({ at: nowS(h) + 301 })],
      ["event-signature-invalid", await signed({ secret: whsec("somebody else's secret, 32 bytes") })],
      ["event-signature-invalid", await signed({ body: webhook(order, { amount: 1 }) })],
      ["event-signature-missing", await missing("webhook-id")],
      ["event-signature-missing", await missing("webhook-timestamp")],
      ["event-signature-missing", await missing("webhook-signature")],
      ["event-signature-missing", await v1Headers("x", "dev", name, nowS(h), body)],
    ];
    for (const [code, headers] of cases) {
      const res = await deliver(h, `/events/dev/${name}`, body, headers);
      expect([code, res.status]).toEqual([code, 401]);
      expect(await res.json()).toMatchObject(DELIVERY_REJECTED);
      expect(refusals.codes.at(-1)).toBe(code);
      expect(refusals.details.at(-1)).toContain("webhook-");
    }
    expect(await eventsOf("dev", name)).toEqual([]);
    expect(
      (await env.DB.prepare("SELECT parked_until FROM steps WHERE execution_id = ?1 AND vertex_id = 'confirmed'").bind(id).first())
        ?.parked_until,
    ).not.toBeNull();
  });

  it("an expression that fails or gives no usable value: 422 event-extract-failed naming the member", async () => {
    const h = harness();
    const order = unique("X");
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...PAYMENTS, match: "= body.data.missing" }, "match"],
      [{ ...PAYMENTS, match: "= body.data" }, "match"],
      [{ ...PAYMENTS, match: "= $number('not a number')" }, "match"],
      [{ ...PAYMENTS, name: "= body.data.amount" }, "name"],
      [{ ...PAYMENTS, name: "= 'has a space'" }, "name"],
      [{ ...PAYMENTS, id: "= body.data" }, "id"],
      [{ ...PAYMENTS, data: "= $pad('', 300000, 'x')" }, "data"],
    ];
    let first = true;
    for (const [definition, member] of cases) {
      const name = await source(h, "dev", definition, first ? SECRET : null);
      first = false;
      const body = webhook(order);
      const res = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, `msg_${order}`, nowS(h), body));
      expect([member, res.status]).toEqual([member, 422]);
      const problem = await res.json<{ code: string; member: string; detail: string }>();
      expect(problem).toMatchObject({ code: "event-extract-failed", member });
      expect(problem.detail).toContain(`event source "${name}"`);
      expect(await eventsOf("dev", name)).toEqual([]);
    }
  });

  it("JSON that is not, or a number a double cannot carry: 400 / 422, after the signature", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    for (const [body, status, code] of [
      ["{not json", 400, "malformed-json"],
      ['{"type":"charge.succeeded","data":{"order":12345678901234567891}}', 422, "json-number-out-of-range"],
    ] as const) {
      const res = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, "msg_bad", nowS(h), body));
      expect([res.status, (await res.json<{ code: string }>()).code]).toEqual([status, code]);
    }
    expect(await eventsOf("dev", name)).toEqual([]);
  });

  it("over 1 MiB: 413 before the signature is checked", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    const body = JSON.stringify({ pad: "x".repeat(1024 * 1024) });
    const res = await deliver(h, `/events/dev/${name}`, body, {});
    expect([res.status, (await res.json<{ code: string }>()).code]).toEqual([413, "payload-too-large"]);
  });

  it("no such source, no such workspace, a name no source can have, a bad signature: the same 401, the same body", async () => {
    const h = harness();
    const name = await source(h, "dev", PAYMENTS);
    const body = webhook("A");
    const headers = await standardHeaders(SECRET, "msg_1", nowS(h), body);
    const answers: string[] = [];
    for (const path of ["/events/dev/no-such-source", `/events/${unique("nobody")}/payments`, "/events/dev/not.a.name"]) {
      const res = await deliver(h, path, body, headers);
      expect([path, res.status]).toEqual([path, 401]);
      answers.push(await res.text());
    }
    const forged = await deliver(
      h,
      `/events/dev/${name}`,
      body,
      await standardHeaders(whsec("a forger's secret, 32 bytes long"), "msg_1", nowS(h), body),
    );
    expect(forged.status).toBe(401);
    answers.push(await forged.text());
    expect(new Set(answers).size).toBe(1);
    expect(JSON.parse(answers[0]!)).toMatchObject(DELIVERY_REJECTED);
    expect(refusals.codes).toEqual([
      "event-source-not-found",
      "event-source-not-found",
      "event-source-not-found",
      "event-signature-invalid",
    ]);
    // Nothing was placed for the unknown workspace: the public route records no placement.
    const placed = await env.DB.prepare("SELECT count(*) AS n FROM workspace_placements WHERE workspace LIKE 'nobody-%'").first<{
      n: number;
    }>();
    expect(placed?.n).toBe(0);
  });
});

describe("scheme v1: the hooks' recipe, signed for this source", () => {
  it("accepts `v1:<ts>:<workspace>:events/<source>:<body>`; the same content twice is one event", async () => {
    const h = harness();
    // A literal event name this time, and no `id`: the content deduplicates.
    const v1 = { ...PAYMENTS, scheme: "v1", secret: "{{ secrets.WEBHOOK_SECRET }}", name: "payment.confirmed" };
    const name = await source(h, "dev", v1, null);
    const order = unique("V");
    const id = await parkedWait(h, order);
    const body = webhook(order);
    const first = await deliver(h, `/events/dev/${name}`, body, await v1Headers(env.WEBHOOK_SECRET, "dev", name, nowS(h), body));
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ resumed: [id], deduplicated: false });
    const again = await deliver(h, `/events/dev/${name}`, body, await v1Headers(env.WEBHOOK_SECRET, "dev", name, nowS(h), body));
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ resumed: [id], deduplicated: true, duplicates: 1 });
  });

  it("refuses a signature for a workflow's hook of the same name, for another source, another workspace, a stale time", async () => {
    const h = harness();
    const name = await source(h, "dev", { ...PAYMENTS, scheme: "v1", secret: "{{ secrets.WEBHOOK_SECRET }}" }, null);
    const body = webhook(unique("W"));
    // What /hooks/dev/<name> would accept: the target <workspace>:<workflowId>, without `events/`.
    const asHook = {
      "x-idemflow-timestamp": String(nowS(h)),
      "x-idemflow-signature": `v1=${toHex(await hmacSha256(env.WEBHOOK_SECRET, `v1:${nowS(h)}:dev:${name}:${body}`))}`,
    };
    const cases: Array<[string, Record<string, string>, string]> = [
      ["a hook's target", asHook, "event-signature-invalid"],
      ["another source", await v1Headers(env.WEBHOOK_SECRET, "dev", "another", nowS(h), body), "event-signature-invalid"],
      ["another workspace", await v1Headers(env.WEBHOOK_SECRET, "other", name, nowS(h), body), "event-signature-invalid"],
      ["a stale time", await v1Headers(env.WEBHOOK_SECRET, "dev", name, nowS(h) - 600, body), "event-signature-stale"],
      ["standard-webhooks headers", await standardHeaders(SECRET, "msg_1", nowS(h), body), "event-signature-missing"],
    ];
    for (const [what, headers, code] of cases) {
      const res = await deliver(h, `/events/dev/${name}`, body, headers);
      expect([what, res.status, (await res.json<{ code: string }>()).code, refusals.codes.at(-1)]).toEqual([
        what,
        401,
        "delivery-rejected",
        code,
      ]);
    }
    expect(await eventsOf("dev", name)).toEqual([]);
  });
});

describe("workspaces never share a source or a secret", () => {
  it("another workspace's source is refused here like any unknown name, and is verified with its own workspace's secret only", async () => {
    const h = harness();
    const theirSecret = whsec("other's provider secret, 32 byte");
    const name = await source(h, "other", PAYMENTS, theirSecret);
    const order = unique("O");
    const body = webhook(order);
    // dev has no source of that name: refused, whatever the signature.
    const here = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(theirSecret, `msg_${order}`, nowS(h), body));
    expect(here.status).toBe(401);
    expect(refusals.codes.at(-1)).toBe("event-source-not-found");
    // dev's secret of the same name does not verify other's deliveries.
    expect((await put(h, "dev", "/v1/secrets/PROVIDER_SECRET", { value: SECRET })).status).toBe(200);
    const devSigned = await deliver(h, `/events/other/${name}`, body, await standardHeaders(SECRET, `msg_${order}`, nowS(h), body));
    expect(devSigned.status).toBe(401);
    const theirs = await deliver(h, `/events/other/${name}`, body, await standardHeaders(theirSecret, `msg_${order}`, nowS(h), body));
    expect(theirs.status).toBe(202);
    expect(await eventsOf("other", name)).toHaveLength(1);
    expect(await eventsOf("dev", name)).toEqual([]);
  });

  it("a source whose secret its workspace lacks answers 503 (generic), even when another workspace has it", async () => {
    const h = harness();
    const lonely = { ...PAYMENTS, secret: "{{ secrets.ONLY_OTHER_HAS_IT }}" };
    expect((await put(h, "other", "/v1/secrets/ONLY_OTHER_HAS_IT", { value: SECRET })).status).toBe(200);
    const name = await source(h, "dev", lonely, null);
    const body = webhook(unique("S"));
    const res = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, "msg_s", nowS(h), body));
    expect(res.status).toBe(503);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ code: "delivery-unavailable" });
    expect(refusals.codes.at(-1)).toBe("event-source-unavailable");
    expect(text).not.toContain("ONLY_OTHER_HAS_IT");
    expect(res.headers.get("retry-after")).toBe("60");
  });

  it("a granted Worker secret that is no `whsec_` base64 secret answers 503, and its value is never shown", async () => {
    const h = harness();
    const name = await source(h, "dev", { ...PAYMENTS, secret: "{{ secrets.WEBHOOK_SECRET }}" }, null);
    const body = webhook(unique("T"));
    const res = await deliver(h, `/events/dev/${name}`, body, await standardHeaders(SECRET, "msg_t", nowS(h), body));
    expect(res.status).toBe(503);
    expect(await res.text()).not.toContain(env.WEBHOOK_SECRET);
  });
});
