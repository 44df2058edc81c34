import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { countingD1 } from "../helpers/counting-d1";
import type { ProblemError } from "../../src/lib/problem";
import { verifyWebhookSignature, type SignatureSettings } from "../../src/ingress/signature";
import { cachedWorkflow } from "../../src/ingress/workflow-cache";
import { dumpEveryTable } from "../steps/helpers";
import { BASE, countRows, seedWorkflow, sign, transformWorkflow, unique } from "./helpers";
import { placeWorkspace } from "../../src/shards/placement";
import { withShardDatabase } from "../helpers/shards";
import { capturePublicRefusals, DELIVERY_REJECTED } from "../helpers/public-refusals";

/** The specific reason of each anonymous refusal, from the log (the answer is one `delivery-rejected`). */
const refusals = capturePublicRefusals();

const SIGNED = { webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}", toleranceSeconds: 300 } } };

function hook(workflowId: string, raw: string, headers: Record<string, string>, workspace = "dev") {
  return SELF.fetch(
    new Request(`${BASE}/hooks/${workspace}/${workflowId}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: raw,
    }),
  );
}

async function signedHeaders(
  workflowId: string,
  raw: string,
  timestamp = Math.floor(Date.now() / 1000).toString(),
  secret = env.WEBHOOK_SECRET,
) {
  return {
    "x-idemflow-timestamp": timestamp,
    "x-idemflow-signature": await sign(secret, timestamp, raw, { workspace: "dev", workflowId }),
  };
}

/** A request through the app in THIS isolate: the test shares its module state (the workflow cache). */
async function inThisIsolate(path: string, raw: string, headers: Record<string, string>) {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`${BASE}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: raw }),
    env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

/** The hook with `Date.now()` pinned: the route reads its clock from it. */
async function hookWithClock(nowMs: number, workflowId: string, raw: string, headers: Record<string, string>) {
  const clock = vi.spyOn(Date, "now").mockReturnValue(nowMs);
  try {
    return await inThisIsolate(`/hooks/dev/${workflowId}`, raw, headers);
  } finally {
    clock.mockRestore();
  }
}

const rowsOf = async (workflowId: string) =>
  (await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", workflowId)) +
  (await countRows("SELECT count(*) AS n FROM execution_identities WHERE workflow_id = ?", workflowId));

describe("POST /hooks/:workspaceId/:workflowId", () => {
  it("accepts a valid signature with 202, and dedupes a resend with 200", async () => {
    const id = unique("hook");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"event":"paid","id":"evt_1"}';
    const res = await hook(id, raw, await signedHeaders(id, raw));
    expect(res.status).toBe(202);
    const body = await res.json<{ executionId: string; identity: string; deduplicated: boolean }>();
    expect(body).toMatchObject({ identity: "content", deduplicated: false });
    const again = await hook(id, raw, await signedHeaders(id, raw));
    expect(again.status).toBe(200);
    expect((await again.json<{ executionId: string }>()).executionId).toBe(body.executionId);
  });

  it("costs two round trips: a fresh read of the workflow (its signature settings) and the start batch", async () => {
    const id = unique("hookbudget");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    // The workspace's placement is checked once per isolate, not per request (src/shards/placement.ts):
    // recorded by the workspace's first authenticated request (an unrecorded one is read per delivery).
    await placeWorkspace(env, "dev");
    const counting = countingD1(env.DB);
    const raw = '{"event":"paid","id":"evt_budget"}';
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`${BASE}/hooks/dev/${id}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(await signedHeaders(id, raw)) },
        body: raw,
      }),
      withShardDatabase(env, "dev", counting.db),
      ctx,
    );
    expect(res.status).toBe(202);
    expect(counting.calls.map((c) => c.kind)).toEqual(["statement", "batch"]);
    await waitOnExecutionContext(ctx);
  });

  it("accepts custom header names", async () => {
    const id = unique("hookcustom");
    await seedWorkflow(
      "dev",
      transformWorkflow(id, {
        webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}", header: "x-sig", timestampHeader: "x-ts" } },
      }),
    );
    const raw = '{"a":1}';
    const ts = Math.floor(Date.now() / 1000).toString();
    const res = await hook(id, raw, { "x-ts": ts, "x-sig": await sign(env.WEBHOOK_SECRET, ts, raw, { workspace: "dev", workflowId: id }) });
    expect(res.status).toBe(202);
  });

  it("rejects a wrong signature, a replayed old timestamp and a missing header with 401, recording nothing", async () => {
    const id = unique("hookbad");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"event":"paid"}';
    const cases: Array<[string, Record<string, string>]> = [
      ["webhook-signature-invalid", await signedHeaders(id, raw, undefined, "whsec_wrong")],
      ["webhook-signature-invalid", await signedHeaders(id, '{"event":"tampered"}')],
      // Well clear of the 300 s tolerance on both sides, so the test never depends on how long it
      // ran; the exact boundary is tested below with a fixed clock.
      ["webhook-signature-stale", await signedHeaders(id, raw, Math.floor(Date.now() / 1000 - 1000).toString())],
      ["webhook-signature-stale", await signedHeaders(id, raw, Math.floor(Date.now() / 1000 + 1000).toString())],
      ["webhook-signature-missing", { "x-idemflow-timestamp": Math.floor(Date.now() / 1000).toString() }],
      ["webhook-signature-missing", { "x-idemflow-signature": (await signedHeaders(id, raw))["x-idemflow-signature"] }],
    ];
    for (const [code, headers] of cases) {
      const res = await hook(id, raw, headers);
      expect(res.status, code).toBe(401);
      // One answer for every refusal; the reason is in the log only.
      expect(await res.json(), code).toMatchObject(DELIVERY_REJECTED);
      expect(refusals.codes.at(-1), code).toBe(code);
    }
    // A captured delivery re-sent with a fresh timestamp but the old signature does not verify.
    const old = Math.floor(Date.now() / 1000 - 1000).toString();
    const replayed = await hook(id, raw, {
      "x-idemflow-timestamp": Math.floor(Date.now() / 1000).toString(),
      "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, old, raw, { workspace: "dev", workflowId: id }),
    });
    expect(replayed.status).toBe(401);
    expect(await rowsOf(id)).toBe(0);
  });

  it(
    "accepts a timestamp exactly toleranceSeconds behind or ahead of the clock, and refuses one a second beyond (fixed " + "clock)",
    async () => {
      const id = unique("hookedge");
      await seedWorkflow("dev", transformWorkflow(id, SIGNED));
      const T = 1_900_000_000; // a whole second: the boundary does not depend on when the test runs
      const at = async (offsetSeconds: number) => {
        const raw = JSON.stringify({ offset: offsetSeconds });
        return hookWithClock(T * 1000, id, raw, await signedHeaders(id, raw, String(T + offsetSeconds)));
      };
      expect((await at(-300)).status).toBe(202);
      expect((await at(300)).status).toBe(202);
      for (const offset of [-301, 301]) {
        const res = await at(offset);
        expect(res.status, `offset ${offset}`).toBe(401);
        expect((await res.json<{ code: string }>()).code).toBe("delivery-rejected");
        expect(refusals.codes.at(-1)).toBe("webhook-signature-stale");
      }
      expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(2);
    },
  );

  it("answers 413 problem+json over the entry point's maxPayloadBytes, signed or not, before any signature check; no record", async () => {
    const id = unique("hooksize");
    await seedWorkflow("dev", transformWorkflow(id, { ...SIGNED, maxPayloadBytes: 64 }));
    const ofBytes = (n: number) => JSON.stringify({ pad: "x".repeat(n - '{"pad":""}'.length) });
    expect(ofBytes(65)).toHaveLength(65);
    for (const [label, raw, headers] of [
      ["one byte over, signed", ofBytes(65), await signedHeaders(id, ofBytes(65))],
      ["far over, signed", ofBytes(100_000), await signedHeaders(id, ofBytes(100_000))],
      ["over and unsigned", ofBytes(65), {}],
    ] as const) {
      const res = await hook(id, raw, headers);
      expect(res.status, label).toBe(413);
      expect(res.headers.get("content-type"), label).toBe("application/problem+json");
      expect(await res.json(), label).toMatchObject({
        status: 413,
        code: "payload-too-large",
        detail: expect.stringContaining("64 bytes"),
      });
    }
    expect(await rowsOf(id)).toBe(0);
    // The limit itself is allowed: the 413s were the limit, not some other refusal.
    expect((await hook(id, ofBytes(64), await signedHeaders(id, ofBytes(64)))).status).toBe(202);
  });

  it("applies a newly saved LOWER maxPayloadBytes at once, though the older one is cached (via trigger): 413, no record", async () => {
    const id = unique("hooklowered");
    const v1 = await seedWorkflow("dev", transformWorkflow(id, { ...SIGNED, maxPayloadBytes: 256 }));
    const ofBytes = (n: number, fill: string) => JSON.stringify({ pad: fill.repeat(n - '{"pad":""}'.length) });
    const warm = ofBytes(100, "w");
    expect((await inThisIsolate(`/v1/workflows/${id}/trigger`, warm, { authorization: "Bearer dev-token" })).status).toBe(202);
    expect((await inThisIsolate(`/hooks/dev/${id}`, ofBytes(100, "h"), await signedHeaders(id, ofBytes(100, "h")))).status).toBe(202);
    expect(cachedWorkflow("dev", id)?.version).toBe(v1.version);
    const v2 = await seedWorkflow("dev", transformWorkflow(id, { ...SIGNED, maxPayloadBytes: 64 }));
    expect(v2.version).not.toBe(v1.version);

    const between = ofBytes(100, "b");
    const res = await inThisIsolate(`/hooks/dev/${id}`, between, await signedHeaders(id, between));
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ code: "payload-too-large", detail: expect.stringContaining("64 bytes") });
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(2); // the two warm-ups
  });

  it("checks the signature before parsing: a signed malformed body is 400, an unsigned one 401", async () => {
    const id = unique("hookparse");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"a":';
    expect((await hook(id, raw, { "x-idemflow-timestamp": "1", "x-idemflow-signature": "00" })).status).toBe(401);
    expect((await hook(id, raw, await signedHeaders(id, raw))).status).toBe(400);
    expect(await rowsOf(id)).toBe(0);
  });

  it("has no public hook for an entry point without a signature config, nor for another workspace's workflow", async () => {
    const id = unique("nohook");
    await seedWorkflow("dev", transformWorkflow(id));
    const raw = "{}";
    const res = await hook(id, raw, await signedHeaders(id, raw));
    expect(res.status).toBe(401);
    const unconfigured = await res.json();
    expect(unconfigured).toMatchObject(DELIVERY_REJECTED);
    expect(refusals.codes.at(-1)).toBe("hook-not-found");
    const signedId = unique("hookws");
    await seedWorkflow("dev", transformWorkflow(signedId, SIGNED));
    const elsewhere = await hook(signedId, raw, await signedHeaders(signedId, raw), "other");
    expect(elsewhere.status).toBe(401);
    expect(refusals.codes.at(-1)).toBe("hook-not-found");
    expect(await rowsOf(id)).toBe(0);
  });

  it("answers an anonymous caller the same for an unknown workspace, an unknown workflow and a bad signature", async () => {
    const id = unique("uniform");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"event":"paid"}';
    const answers = [
      await hook(id, raw, await signedHeaders(id, raw), `nobody-${unique("ws")}`), // no such workspace
      await hook(unique("nowf"), raw, await signedHeaders(id, raw)), // no such workflow
      await hook(id, raw, await signedHeaders(id, raw, undefined, "whsec_wrong")), // a bad signature
      await hook(id, raw, {}), // no signature
    ];
    const bodies = await Promise.all(answers.map(async (r) => [r.status, await r.text()]));
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    expect(bodies[0]![0]).toBe(401);
    expect(refusals.codes).toEqual(["hook-not-found", "hook-not-found", "webhook-signature-invalid", "webhook-signature-missing"]);
  });

  it("cannot be made to start a second execution by replaying a delivery in tolerance with unsigned query or content-type", async () => {
    const id = unique("hookreplay");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"event":"paid","id":"evt_9"}';
    const headers = await signedHeaders(id, raw);
    const send = (query: string, contentType: string) =>
      SELF.fetch(
        new Request(`${BASE}/hooks/dev/${id}${query}`, {
          method: "POST",
          headers: { ...headers, "content-type": contentType },
          body: raw,
        }),
      );

    const original = await send("", "application/json");
    expect(original.status).toBe(202);
    const { executionId } = await original.json<{ executionId: string }>();

    // The query string is not signed: it may not pick the identity.
    for (const q of ["?clientIdempotencyId=r1", "?clientIdempotencyId=r2"]) {
      const res = await send(q, "application/json");
      expect(res.status).toBe(400);
      expect((await res.json<{ code: string }>()).code).toBe("client-idempotency-id-not-signed");
    }
    // Nor is content-type: the same signed bytes are the same delivery whatever the header says.
    for (const contentType of ["text/plain", "application/octet-stream"]) {
      const res = await send("", contentType);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ executionId, deduplicated: true });
    }
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(1);
  });

  it("still treats signed bytes that are not JSON as raw bytes, and a JSON content-type on them as malformed", async () => {
    const id = unique("hookbytes");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = "event=paid&id=evt_10";
    const send = async (contentType: string) =>
      SELF.fetch(
        new Request(`${BASE}/hooks/dev/${id}`, {
          method: "POST",
          headers: { ...(await signedHeaders(id, raw)), "content-type": contentType },
          body: raw,
        }),
      );
    expect((await send("application/x-www-form-urlencoded")).status).toBe(202);
    expect((await send("text/plain")).status).toBe(200);
    expect((await send("application/json")).status).toBe(400);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(1);
  });

  it("refuses a signed number a float cannot carry with the same 422 as /trigger, whatever the content-type says", async () => {
    for (const [label, entry] of [
      ["content", SIGNED],
      ["fields", { ...SIGNED, idempotencyFields: "order.id" }],
    ] as const) {
      const id = unique(`hooknum-${label}`);
      await seedWorkflow("dev", transformWorkflow(id, entry));
      for (const [raw, pointer] of [
        ['{"order":{"id":12345678901234567891}}', "/order/id"],
        ['{"order":{"id":"A"},"x":[1e400]}', "/x/0"],
      ] as const) {
        for (const contentType of ["application/json", "text/plain"]) {
          const res = await SELF.fetch(
            new Request(`${BASE}/hooks/dev/${id}`, {
              method: "POST",
              headers: { ...(await signedHeaders(id, raw)), "content-type": contentType },
              body: raw,
            }),
          );
          expect(res.status, `${label} ${contentType} ${raw}`).toBe(422);
          expect(await res.json()).toMatchObject({ code: "json-number-out-of-range", pointer });
        }
      }
      expect(await rowsOf(id)).toBe(0);
    }
  });

  it("never echoes the signing secret, even if sent: not in an answer (202, 200, 400, 401, 413, 422, 503), not stored", async () => {
    const secret = env.WEBHOOK_SECRET;
    const id = unique("hooksecret");
    await seedWorkflow("dev", transformWorkflow(id, { ...SIGNED, idempotencyFields: "order.id", maxPayloadBytes: 256 }));
    const unconfigured = unique("hooksecretunset");
    await seedWorkflow(
      "dev",
      transformWorkflow(unconfigured, { webhook: { signature: { secret: "{{ secrets.HOOK_SECRET_NEVER_SET }}" } } }),
    );
    // The secret travels in the request itself (a header, the body, the query), so a bug that
    // echoes request data into an answer or a row is caught, not only one that echoes the config.
    const leak = { "x-leak": secret };
    const accepted = '{"order":{"id":"o-accepted"}}';
    const withSecret = JSON.stringify({ order: { id: "o-refused" }, token: secret });
    const cases: Array<[number, () => Promise<Response>]> = [
      [202, async () => hook(id, accepted, { ...leak, ...(await signedHeaders(id, accepted)) })],
      [200, async () => hook(id, accepted, { ...leak, ...(await signedHeaders(id, accepted)) })],
      [400, async () => hook(id, `{"token":"${secret}"`, { ...leak, ...(await signedHeaders(id, `{"token":"${secret}"`)) })],
      [
        400,
        async () =>
          SELF.fetch(
            new Request(`${BASE}/hooks/dev/${id}?clientIdempotencyId=${secret}`, {
              method: "POST",
              headers: { ...leak, ...(await signedHeaders(id, accepted)) },
              body: accepted,
            }),
          ),
      ],
      [401, async () => hook(id, withSecret, { ...leak, ...(await signedHeaders(id, withSecret, undefined, "whsec_wrong")) })],
      [401, async () => hook(id, withSecret, { ...leak, ...(await signedHeaders(id, withSecret, "1")) })],
      [401, async () => hook(id, withSecret, { ...leak, "x-idemflow-timestamp": secret })],
      [401, async () => hook(id, withSecret, { ...leak, ...(await signedHeaders(id, withSecret)) }, "other")],
      [
        413,
        async () =>
          hook(id, JSON.stringify({ token: secret, pad: "x".repeat(300) }), {
            ...leak,
            ...(await signedHeaders(id, JSON.stringify({ token: secret, pad: "x".repeat(300) }))),
          }),
      ],
      [
        422,
        async () =>
          hook(id, JSON.stringify({ token: secret }), { ...leak, ...(await signedHeaders(id, JSON.stringify({ token: secret }))) }),
      ],
      [503, async () => hook(unconfigured, withSecret, { ...leak, ...(await signedHeaders(id, withSecret)) })],
    ];
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      for (const [status, send] of cases) {
        const res = await send();
        const answer = `${JSON.stringify([...res.headers])}\n${await res.text()}`;
        expect(res.status, answer).toBe(status);
        expect(answer).not.toContain(secret);
      }
      expect(errors.mock.calls.map((args) => args.map(String).join(" ")).join("\n")).not.toContain(secret);
    } finally {
      errors.mockRestore();
    }
    const stored = await dumpEveryTable();
    // The dump does hold this test's rows (the accepted delivery), so its silence means something.
    expect(stored).toContain("o-accepted");
    expect(stored).not.toContain(secret);
  });

  it("answers 503 delivery-unavailable with a generic detail, naming the unset secret only in the operator's log", async () => {
    const id = unique("hooknosecret");
    await seedWorkflow("dev", transformWorkflow(id, { webhook: { signature: { secret: "{{ secrets.HOOK_SECRET_NEVER_SET }}" } } }));
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const raw = '{"a":1}';
      const res = await hook(id, raw, await signedHeaders(id, raw));
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(JSON.parse(text)).toMatchObject({
        code: "delivery-unavailable",
        detail: expect.stringContaining("the operator is told"),
      });
      expect(res.headers.get("retry-after")).toBe("30");
      expect(refusals.codes.at(-1)).toBe("webhook-secret-missing");
      // The caller is unauthenticated: no deployment detail in the answer.
      expect(text).not.toContain("HOOK_SECRET_NEVER_SET");
      const logged = errors.mock.calls.map((args) => args.map(String).join(" ")).join("\n");
      expect(logged).toContain("HOOK_SECRET_NEVER_SET");
      expect(logged).toContain(id);
    } finally {
      errors.mockRestore();
    }
    expect(await rowsOf(id)).toBe(0);
  });
});

describe("verifyWebhookSignature's tolerance, with an exact injected now", () => {
  const settings: SignatureSettings = {
    secret: "{{ secrets.WEBHOOK_SECRET }}",
    header: "x-idemflow-signature",
    timestampHeader: "x-idemflow-timestamp",
    toleranceSeconds: 300,
  };
  const T = 1_900_000_000;
  const raw = '{"event":"paid"}';
  const verifyAt = async (nowMs: number) =>
    verifyWebhookSignature({
      settings,
      secret: env.WEBHOOK_SECRET,
      target: { workspace: "dev", workflowId: "tolerance" },
      headers: new Headers(await signedHeaders("tolerance", raw, String(T))),
      raw: new TextEncoder().encode(raw),
      nowMs,
    });
  const refusal = (nowMs: number) =>
    verifyAt(nowMs).then(
      () => "accepted",
      (error: ProblemError) => `${error.status} ${error.code}`,
    );

  it.each([
    ["exactly toleranceSeconds old", (T + 300) * 1000],
    ["exactly toleranceSeconds ahead", (T - 300) * 1000],
    ["signed this very millisecond", T * 1000],
  ])("accepts a timestamp %s", async (_when, nowMs) => {
    await expect(verifyAt(nowMs)).resolves.toBeUndefined();
  });

  it.each([
    ["1 ms more than toleranceSeconds old", (T + 300) * 1000 + 1],
    ["1 s more than toleranceSeconds old", (T + 301) * 1000],
    ["1 ms more than toleranceSeconds ahead", (T - 300) * 1000 - 1],
    ["1 s more than toleranceSeconds ahead", (T - 301) * 1000],
  ])("refuses a timestamp %s with 401 webhook-signature-stale", async (_when, nowMs) => {
    expect(await refusal(nowMs)).toBe("401 webhook-signature-stale");
  });
});
