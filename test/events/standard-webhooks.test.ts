/**
 * Standard Webhooks (src/events/standard-webhooks.ts): the signing recipe against a vector computed
 * outside this code, and every verdict of the verifier.
 */
import { describe, expect, it } from "vitest";
import {
  presentedSignatures,
  signStandardWebhook,
  standardWebhookSignature,
  verifyStandardWebhook,
  webhookSecretKey,
} from "../../src/events/standard-webhooks";
import { utf8 } from "../../src/lib/crypto";

/**
 * The Svix libraries' test vector, re-derived with Node's own crypto before it was written here:
 *   node -e 'const c=require("crypto"); console.log(c.createHmac("sha256", Buffer.from(
 *     "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","base64")).update("msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}")
 *     .digest("base64"))'
 */
const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: "1614265330",
  body: '{"test": 2432232314}',
  signature: "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const AT_VECTOR_MS = Number(VECTOR.timestamp) * 1000;

function headers(entries: Record<string, string>): Headers {
  return new Headers(entries);
}

const vectorHeaders = (signature = `v1,${VECTOR.signature}`, extra: Record<string, string> = {}) =>
  headers({ "webhook-id": VECTOR.id, "webhook-timestamp": VECTOR.timestamp, "webhook-signature": signature, ...extra });

const verify = (h: Headers, nowMs = AT_VECTOR_MS, body = VECTOR.body, secret = VECTOR.secret) =>
  verifyStandardWebhook({ key: webhookSecretKey(secret)!, headers: h, raw: utf8(body), nowMs, toleranceSeconds: 300 });

describe("the signature", () => {
  it("is the known vector: base64(HMAC-SHA256(base64-decoded secret, id.timestamp.body))", async () => {
    const key = webhookSecretKey(VECTOR.secret)!;
    expect(key.byteLength).toBe(24);
    expect(await standardWebhookSignature(key, VECTOR.id, VECTOR.timestamp, utf8(VECTOR.body))).toBe(VECTOR.signature);
    expect(await signStandardWebhook(VECTOR.secret, VECTOR.id, Number(VECTOR.timestamp), utf8(VECTOR.body))).toEqual({
      "webhook-id": VECTOR.id,
      "webhook-timestamp": VECTOR.timestamp,
      "webhook-signature": `v1,${VECTOR.signature}`,
    });
  });

  it("agrees with a signature computed here with WebCrypto from the recipe", async () => {
    const secret = "whsec_" + btoa("a 32-byte key for the test only!");
    const raw = '{"type":"charge.succeeded","data":{"order":"A-1"}}';
    const bytes = Uint8Array.from(atob(secret.slice(6)), (c) => c.charCodeAt(0));
    const key = await crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`msg_1.1700000000.${raw}`)));
    const expected = btoa(String.fromCharCode(...mac));
    expect((await signStandardWebhook(secret, "msg_1", 1700000000, utf8(raw)))["webhook-signature"]).toBe(`v1,${expected}`);
  });

  it("takes the secret with or without `whsec_`, and refuses one that is not base64", () => {
    expect(webhookSecretKey("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).toEqual(webhookSecretKey(VECTOR.secret));
    for (const bad of ["whsec_local_demo", "whsec_", "", "whsec_abc", "whsec_ab!d"])
      expect([bad, webhookSecretKey(bad)]).toEqual([bad, null]);
  });

  it("reads every `v1,` entry of the header and skips other versions", () => {
    expect(presentedSignatures("v1,abc= v1a,xyz  v2,q v1,def=")).toEqual(["abc=", "def="]);
    expect(presentedSignatures("abc")).toEqual([]);
  });
});

describe("verifying a delivery", () => {
  it("accepts the vector within the tolerance, either side of the timestamp", async () => {
    expect(await verify(vectorHeaders())).toEqual({ ok: true, id: VECTOR.id, timestamp: VECTOR.timestamp });
    expect((await verify(vectorHeaders(), AT_VECTOR_MS + 299_000)).ok).toBe(true);
    expect((await verify(vectorHeaders(), AT_VECTOR_MS - 299_000)).ok).toBe(true);
  });

  it("accepts any matching entry of a rotated header", async () => {
    expect((await verify(vectorHeaders(`v1,${btoa("old secret's mac")} v1,${VECTOR.signature}`))).ok).toBe(true);
  });

  it("reads every entry, past the sixteenth, as the reference library does", async () => {
    const others = Array.from({ length: 20 }, (_, i) => `v1,${btoa(`another mac ${i}`)}`).join(" ");
    expect((await verify(vectorHeaders(`${others} v1,${VECTOR.signature}`))).ok).toBe(true);
  });

  it('gives one answer for two `webhook-signature` lines, in either order (Fetch joins them with ", ")', async () => {
    const other = `v1,${btoa("old secret's mac")}`;
    const good = `v1,${VECTOR.signature}`;
    for (const lines of [
      [good, other],
      [other, good],
    ]) {
      const h = headers({ "webhook-id": VECTOR.id, "webhook-timestamp": VECTOR.timestamp });
      for (const line of lines) h.append("webhook-signature", line);
      expect([lines, (await verify(h)).ok]).toEqual([lines, true]);
    }
    expect(presentedSignatures("v1,abc=, v1,def=")).toEqual(["abc=", "def="]);
  });

  it("refuses a stale or future timestamp, or one that is not Unix seconds", async () => {
    expect(await verify(vectorHeaders(), AT_VECTOR_MS + 301_000)).toEqual({ ok: false, reason: "stale", timestamp: VECTOR.timestamp });
    expect((await verify(vectorHeaders(), AT_VECTOR_MS - 301_000)).ok).toBe(false);
    const ms = headers({ "webhook-id": VECTOR.id, "webhook-timestamp": "1614265330000", "webhook-signature": `v1,${VECTOR.signature}` });
    expect(await verify(ms)).toMatchObject({ ok: false, reason: "stale" });
  });

  it("refuses another secret, another body, another id, and a signature of another version only", async () => {
    expect(await verify(vectorHeaders(), AT_VECTOR_MS, VECTOR.body, "whsec_" + btoa("another secret entirely"))).toEqual({
      ok: false,
      reason: "invalid",
    });
    expect(await verify(vectorHeaders(), AT_VECTOR_MS, '{"test": 2432232315}')).toEqual({ ok: false, reason: "invalid" });
    expect(await verify(vectorHeaders(undefined, { "webhook-id": "msg_other" }))).toEqual({ ok: false, reason: "invalid" });
    expect(await verify(vectorHeaders(`v1a,${VECTOR.signature}`))).toEqual({ ok: false, reason: "invalid" });
    expect(await verify(vectorHeaders(VECTOR.signature))).toEqual({ ok: false, reason: "invalid" });
  });

  it("names a missing header as missing, before anything else", async () => {
    for (const drop of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const h = vectorHeaders();
      h.delete(drop);
      expect([drop, await verify(h, 0)]).toEqual([drop, { ok: false, reason: "missing" }]);
    }
  });
});
