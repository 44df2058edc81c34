/**
 * Event sources where they meet the rest (issue 41, docs/waits.md "Event sources"): a Standard
 * Webhooks message replayed to another source that shares its secret is the same event; a
 * `webhook-id` over 255 characters is accepted (its SHA-256 stands in), not refused for ever; a
 * secret a Standard Webhooks source signs with cannot be overwritten with a value that is not a
 * `whsec_` secret; an event id sent again with other content is answered with the stored event;
 * the v1 signature is compared in constant time (`timingSafeEqualStrings`, pinned here). Real
 * Worker (SELF), real D1, the wall clock.
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { verifySourceDelivery } from "../../src/events/source-signature";
import SIGNATURE_MODULE from "../../src/events/source-signature.ts?raw";
import { api, BASE, nowSeconds, standardHeaders, unique, v1Headers, whsec } from "./helpers";

const SOURCE = (secretName: string) => ({
  scheme: "standard-webhooks",
  secret: `{{ secrets.${secretName} }}`,
  name: "payment.confirmed",
  match: "= body.data.order",
  data: "= body.data",
});

async function sourceWithSecret(secretName: string, secret: string | null, name = unique("src")): Promise<string> {
  if (secret !== null) expect((await api("PUT", `/v1/secrets/${secretName}`, { value: secret })).status).toBe(200);
  const res = await api("PUT", `/v1/event-sources/${name}`, SOURCE(secretName));
  expect(res.status, await res.clone().text()).toBe(201);
  return name;
}

const deliver = (source: string, body: string, headers: Record<string, string>) =>
  SELF.fetch(`${BASE}/events/dev/${source}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

const secretName = () => unique("SEC").replaceAll("-", "_").toUpperCase();

describe("Standard Webhooks deliveries", () => {
  it("one message replayed to another source that shares the secret is the same event (deduplicated), not a new one", async () => {
    const secret = whsec("a provider's key, 32 bytes long!");
    const name = secretName();
    const first = await sourceWithSecret(name, secret);
    const second = await sourceWithSecret(name, null);
    const order = unique("A");
    const body = JSON.stringify({ data: { order, amount: 1 } });
    const headers = await standardHeaders(secret, `msg_${order}`, nowSeconds(), body);
    const a = await deliver(first, body, headers);
    expect(a.status).toBe(202);
    const b = await deliver(second, body, headers);
    expect(b.status).toBe(200);
    expect(await b.json()).toMatchObject({ eventId: `msg_${order}`, deduplicated: true, duplicates: 1 });
    // Another secret's message with the same id is another provider's: a new event.
    const otherSecret = whsec("another provider's key, 32 bytes");
    const third = await sourceWithSecret(secretName(), otherSecret);
    const c = await deliver(third, body, await standardHeaders(otherSecret, `msg_${order}`, nowSeconds(), body));
    expect(c.status).toBe(202);
  });

  it("a signed `webhook-id` over 255 characters is accepted under its SHA-256, and its retry is a duplicate", async () => {
    const secret = whsec("a provider's key, 32 bytes long!");
    const source = await sourceWithSecret(secretName(), secret);
    const order = unique("L");
    const id = `msg_${"x".repeat(300)}_${order}`;
    const body = JSON.stringify({ data: { order } });
    const first = await deliver(source, body, await standardHeaders(secret, id, nowSeconds(), body));
    expect(first.status, await first.clone().text()).toBe(202);
    const answer = (await first.json()) as { eventId: string };
    expect(answer.eventId).toMatch(/^webhook-id-sha256:[0-9a-f]{64}$/);
    const retry = await deliver(source, body, await standardHeaders(secret, id, nowSeconds(), body));
    expect(retry.status).toBe(200);
    expect(await retry.json()).toMatchObject({ eventId: answer.eventId, deduplicated: true });
  });
});

describe("the secret a Standard Webhooks source signs with", () => {
  it("cannot be overwritten with a value that is not a `whsec_` secret: 422 naming the source, nothing stored", async () => {
    const name = secretName();
    const secret = whsec("a provider's key, 32 bytes long!");
    const source = await sourceWithSecret(name, secret);
    const refused = await api("PUT", `/v1/secrets/${name}`, { value: "not-a-webhook-secret" });
    expect(refused.status).toBe(422);
    const problem = (await refused.json()) as { code: string; detail: string };
    expect(problem.code).toBe("secret-value-invalid");
    expect(problem.detail).toContain(`"${source}"`);
    expect(problem.detail).not.toContain("not-a-webhook-secret");
    // Nothing stored: deliveries still verify with the old value.
    const body = JSON.stringify({ data: { order: unique("K") } });
    expect((await deliver(source, body, await standardHeaders(secret, unique("msg"), nowSeconds(), body))).status).toBe(202);
    // A new `whsec_` value is fine; a secret no such source uses may hold anything.
    expect((await api("PUT", `/v1/secrets/${name}`, { value: whsec("a rotated key, 32 bytes long!!!!") })).status).toBe(200);
    expect((await api("PUT", `/v1/secrets/${secretName()}`, { value: "anything at all" })).status).toBe(200);
  });
});

describe("an event id sent again with other content", () => {
  it("is answered with the stored event (its name and value), never echoing the new content", async () => {
    const id = unique("evt");
    const order = unique("O");
    const first = await api("POST", "/v1/events", { name: "payment.confirmed", match: order, id });
    expect(first.status).toBe(202);
    const again = await api("POST", "/v1/events", { name: "payment.refunded", match: unique("other"), id, data: { x: 1 } });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ eventId: id, deduplicated: true, name: "payment.confirmed", match: order });
  });
});

describe("the v1 signature of an event source", () => {
  // Timing cannot be measured reliably here; what is pinned is that the verdict comes from the
  // constant-time comparison and from nothing else (the module's source, read as text).
  it("is compared in constant time: the verdict is timingSafeEqualStrings', never `===` / `!==`", () => {
    const code = SIGNATURE_MODULE.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
    expect(code).toMatch(/if \(!\(await timingSafeEqualStrings\(presented, expected\)\)\) throw eventProblems\.signatureInvalid\("v1"\)/);
    expect(code).not.toMatch(/(presented|expected)\s*[!=]==?|[!=]==?\s*(presented|expected)\b/);
    const v1 = code.slice(code.indexOf("const given = headers.get(V1_SIGNATURE_HEADER)"));
    expect(v1.match(/timingSafeEqualStrings\(/g)).toHaveLength(1);
  });

  it("verifies a good signature and refuses another secret's", async () => {
    const secret = "a v1 secret for the test";
    const target = { workspace: "dev", source: "src-v1" };
    const definition = { scheme: "v1", secret: "{{ secrets.V1 }}", name: "x", match: "= body.o", toleranceSeconds: 300 } as never;
    const body = '{"o":"1"}';
    const raw = new TextEncoder().encode(body);
    const good = new Headers(await v1Headers(secret, "dev", "src-v1", nowSeconds(), body));
    await expect(verifySourceDelivery({ definition, secret, target, headers: good, raw, nowMs: Date.now() })).resolves.toBeDefined();
    const bad = new Headers(await v1Headers("another secret", "dev", "src-v1", nowSeconds(), body));
    await expect(verifySourceDelivery({ definition, secret, target, headers: bad, raw, nowMs: Date.now() })).rejects.toThrow();
  });
});
