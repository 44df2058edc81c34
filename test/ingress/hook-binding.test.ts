/**
 * Signed hooks, scheme v1: the signature binds the target (workspace and workflow), the scheme is
 * versioned, and the signing secret is the hook workspace's own (SPEC section 3).
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { hmacSha256, timingSafeEqualStrings, toHex } from "../../src/lib/crypto";
import signatureSource from "../../src/ingress/signature.ts?raw";
import { BASE, countRows, seedWorkflow, sign, transformWorkflow, unique } from "./helpers";
import { shardBindingOf, withShardDatabase } from "../helpers/shards";
import { capturePublicRefusals } from "../helpers/public-refusals";

const SIGNED = { webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}" } } };

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());
/** The public route answers every refusal `delivery-rejected`; the reason is in the log (src/http/public-answer.ts). */
const refusals = capturePublicRefusals();

const now = () => Math.floor(Date.now() / 1000).toString();

function deliver(workspace: string, workflowId: string, raw: string, headers: Record<string, string>) {
  return SELF.fetch(
    new Request(`${BASE}/hooks/${workspace}/${workflowId}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: raw,
    }),
  );
}

async function putSecret(token: string, name: string, value: string): Promise<number> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`${BASE}/v1/secrets/${name}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ value }),
    }),
    env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res.status;
}

const executionsOf = (workflowId: string) => countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", workflowId);

describe("a v1 signature binds the delivery to its hook", () => {
  it(
    "a delivery signed for dev/A is accepted at dev/A and refused at dev/B and at other/B — even where they share the " + "secret",
    async () => {
      const a = unique("A");
      const b = unique("B");
      await seedWorkflow("dev", transformWorkflow(a, SIGNED));
      await seedWorkflow("dev", transformWorkflow(b, SIGNED));
      await seedWorkflow("other", transformWorkflow(b, SIGNED));
      // `other` stores the SAME secret value as its own: only the bound target can tell them apart.
      expect(await putSecret("other-token", "WEBHOOK_SECRET", env.WEBHOOK_SECRET)).toBe(200);

      const raw = '{"event":"paid","id":"evt_bind"}';
      const ts = now();
      const signedForDevA = {
        "x-idemflow-timestamp": ts,
        "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, ts, raw, { workspace: "dev", workflowId: a }),
      };
      for (const [workspace, workflowId] of [
        ["dev", b],
        ["other", b],
      ] as const) {
        const res = await deliver(workspace, workflowId, raw, signedForDevA);
        expect(res.status, `${workspace}/${workflowId}`).toBe(401);
        expect((await res.json<{ code: string }>()).code).toBe("delivery-rejected");
        expect(refusals.codes.at(-1)).toBe("webhook-signature-invalid");
      }
      expect(await executionsOf(b)).toBe(0);
      expect((await deliver("dev", a, raw, signedForDevA)).status).toBe(202);
      // other/B itself works when signed for other/B (its own D1 secret verifies it).
      const signedForOtherB = {
        "x-idemflow-timestamp": ts,
        "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, ts, raw, { workspace: "other", workflowId: b }),
      };
      expect((await deliver("other", b, raw, signedForOtherB)).status).toBe(202);
    },
  );

  it("binds the workflow id as written: two hooks whose ids differ only in case do not accept each other's deliveries", async () => {
    const suffix = unique("case").toLowerCase();
    const lower = `hook-${suffix}`;
    const mixed = `Hook-${suffix}`;
    await seedWorkflow("dev", transformWorkflow(lower, SIGNED));
    await seedWorkflow("dev", transformWorkflow(mixed, SIGNED));
    const ts = now();
    const signedFor = async (workflowId: string, raw: string) => ({
      "x-idemflow-timestamp": ts,
      "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, ts, raw, { workspace: "dev", workflowId }),
    });
    // A capture for one is refused at the other, both ways, before anything is recorded.
    for (const [signedAs, deliveredTo] of [
      [lower, mixed],
      [mixed, lower],
    ] as const) {
      const raw = JSON.stringify({ event: "paid", from: signedAs });
      const res = await deliver("dev", deliveredTo, raw, await signedFor(signedAs, raw));
      expect(res.status, `${signedAs} → ${deliveredTo}`).toBe(401);
      expect((await res.json<{ code: string }>()).code).toBe("delivery-rejected");
      expect(refusals.codes.at(-1)).toBe("webhook-signature-invalid");
    }
    expect(await executionsOf(lower)).toBe(0);
    expect(await executionsOf(mixed)).toBe(0);
    // Each verifies at its own hook, the all-lowercase id as well as the mixed-case one.
    for (const workflowId of [lower, mixed]) {
      const raw = JSON.stringify({ event: "paid", at: workflowId });
      expect((await deliver("dev", workflowId, raw, await signedFor(workflowId, raw))).status, workflowId).toBe(202);
      expect(await executionsOf(workflowId)).toBe(1);
    }
  });

  it("signs exactly `v1:<timestamp>:<workspaceId>:<workflowId>:<raw body>` (the documented bytes, computed here by hand)", async () => {
    const id = unique("bytes");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"x":1}';
    const ts = now();
    const hex = toHex(await hmacSha256(env.WEBHOOK_SECRET, `v1:${ts}:dev:${id}:${raw}`));
    expect((await deliver("dev", id, raw, { "x-idemflow-timestamp": ts, "x-idemflow-signature": `v1=${hex}` })).status).toBe(202);
    // Upper-case hex and surrounding whitespace are the same signature.
    const raw2 = '{"x":2}';
    const hex2 = toHex(await hmacSha256(env.WEBHOOK_SECRET, `v1:${ts}:dev:${id}:${raw2}`));
    expect(
      (await deliver("dev", id, raw2, { "x-idemflow-timestamp": ts, "x-idemflow-signature": ` v1=${hex2.toUpperCase()} ` })).status,
    ).toBe(202);
  });

  it("refuses an unversioned signature, an unknown version and the old unbound scheme with 401, recording nothing", async () => {
    const id = unique("versions");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    const raw = '{"event":"paid"}';
    const ts = now();
    const v1Hex = (await sign(env.WEBHOOK_SECRET, ts, raw, { workspace: "dev", workflowId: id })).slice(3);
    const oldUnbound = toHex(await hmacSha256(env.WEBHOOK_SECRET, `${ts}.${raw}`));
    // Every refusal names the signed bytes; a refused version also the header's form.
    const unsupported = /v1=<hex>.*v1:<timestamp>:<workspaceId>:<workflowId>:/;
    const invalid = /v1:<timestamp>:<workspaceId>:<workflowId>:/;
    const cases: Array<[string, string, RegExp]> = [
      [v1Hex, "webhook-signature-version-unsupported", unsupported], // bare hex
      [`sha256=${v1Hex}`, "webhook-signature-version-unsupported", unsupported],
      [`v2=${v1Hex}`, "webhook-signature-version-unsupported", unsupported],
      [`v0=${v1Hex}`, "webhook-signature-version-unsupported", unsupported],
      [oldUnbound, "webhook-signature-version-unsupported", unsupported],
      [`sha256=${oldUnbound}`, "webhook-signature-version-unsupported", unsupported],
      [`v1=${oldUnbound}`, "webhook-signature-invalid", invalid],
    ];
    for (const [header, code, detail] of cases) {
      const res = await deliver("dev", id, raw, { "x-idemflow-timestamp": ts, "x-idemflow-signature": header });
      expect(res.status, header).toBe(401);
      expect((await res.json<{ code: string }>()).code, header).toBe("delivery-rejected");
      // The reason, with the signed bytes spelt out, goes to the operator's log.
      expect(refusals.codes.at(-1), header).toBe(code);
      expect(refusals.details.at(-1), header).toMatch(detail);
    }
    expect(await executionsOf(id)).toBe(0);
  });

  it("keeps the constant-time comparison (hashes of both sides compared byte by byte)", async () => {
    expect(signatureSource).toMatch(/await timingSafeEqualStrings\(presented, expected\)/);
    expect(signatureSource).not.toMatch(/presented\s*[!=]==?\s*expected|expected\s*[!=]==?\s*presented/);
    expect(await timingSafeEqualStrings("v1", "v1")).toBe(true);
    expect(await timingSafeEqualStrings("ab", "abc")).toBe(false);
  });
});

describe("the signing secret is the hook workspace's own", () => {
  it("a hook in `other` naming a Worker secret granted only to `dev` is not configured (503), records nothing", async () => {
    const id = unique("nogrant");
    await seedWorkflow("other", transformWorkflow(id, { webhook: { signature: { secret: "{{ secrets.PAYMENTS_KEY }}" } } }));
    const raw = "{}";
    const ts = now();
    // Even signed with dev's granted value, `other` cannot use it.
    const res = await deliver("other", id, raw, {
      "x-idemflow-timestamp": ts,
      "x-idemflow-signature": await sign(env.PAYMENTS_KEY, ts, raw, { workspace: "other", workflowId: id }),
    });
    expect(res.status).toBe(503);
    const text = await res.text();
    expect(JSON.parse(text).code).toBe("delivery-unavailable");
    expect(refusals.codes.at(-1)).toBe("webhook-secret-missing");
    expect(text).not.toContain("PAYMENTS_KEY");
    expect(await executionsOf(id)).toBe(0);
  });

  it("costs two round trips with a D1 signing secret too (the secret rides in the workflow read)", async () => {
    const { countingD1 } = await import("../helpers/counting-d1");
    const id = unique("budget");
    await seedWorkflow("other", transformWorkflow(id, { webhook: { signature: { secret: "{{ secrets.HOOK_KEY }}" } } }));
    expect(await putSecret("other-token", "HOOK_KEY", "whsec_other_hook_canary")).toBe(200);
    // `other`'s shard (src/shards): the round trips are counted where the engine sends them.
    const counting = countingD1(env[shardBindingOf(env, "other")]);
    const raw = '{"n":1}';
    const ts = now();
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`${BASE}/hooks/other/${id}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-idemflow-timestamp": ts,
          "x-idemflow-signature": await sign("whsec_other_hook_canary", ts, raw, { workspace: "other", workflowId: id }),
        },
        body: raw,
      }),
      withShardDatabase(env, "other", counting.db),
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(res.status).toBe(202);
    expect(counting.calls.map((c) => c.kind)).toEqual(["statement", "batch"]);
  });
});
