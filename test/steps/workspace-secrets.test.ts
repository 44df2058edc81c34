/**
 * Workspace-scoped secrets (SPEC section 3): a workflow resolves only its own workspace's secrets —
 * its sealed D1 secret first, then a Worker secret the deployment granted it — and nothing of
 * another workspace. Real D1, real step consumer, a real destination that records what it got.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { keyringFrom, openSecret, sealSecret, importMasterKey, SecretUnreadableError } from "../../src/secrets/crypto";
import { countingD1 } from "../helpers/counting-d1";
import { dbOf } from "../helpers/shards";
import { DEST, dumpEveryTable, harness, seedWorkflow, stepsOf, unique } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const TOKENS = { dev: "dev-token", other: "other-token" } as const;

async function api(method: string, path: string, workspace: keyof typeof TOKENS, body?: unknown, bindings: Partial<Env> = {}) {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { authorization: `Bearer ${TOKENS[workspace]}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await app.fetch(
    new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
    { ...env, ...bindings },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, text: await res.text() };
}

/** The test env with extra Worker bindings (another grant list, an extra Worker secret). */
const envWith = (extra: Record<string, string>): Env => ({ ...env, ...extra }) as unknown as Env;

const putSecret = (workspace: keyof typeof TOKENS, name: string, value: string) => api("PUT", `/v1/secrets/${name}`, workspace, { value });

/** entry → one Gateway call to the echo destination with `Authorization: Bearer {{ secrets.NAME }}`. */
function callWith(secretName: string): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      {
        id: "call",
        type: "GATEWAY",
        config: { method: "POST", url: `${DEST}/echo`, headers: { Authorization: `Bearer {{ secrets.${secretName} }}` } },
      },
    ],
    edges: [{ from: "entry", to: "call" }],
  } as WorkflowDefinitionInput;
}

/** Run `callWith(name)` in `workspace`; the step and what the destination received. */
async function runIn(workspace: string, secretName: string, rt: Parameters<typeof harness>[0] = {}) {
  const h = harness(rt, { workspace });
  const wf = await seedWorkflow(workspace, callWith(secretName));
  const id = await h.start(wf, {});
  await h.drain();
  return {
    step: (await stepsOf(id, dbOf(env, workspace))).call!,
    received: h.dest.requests.map((r) => r.headers.authorization ?? null),
    h,
  };
}

describe("a workspace resolves only its own secrets", () => {
  it("`other` cannot resolve the Worker secret granted to `dev`: missing-secret, not retried, dev's value never sent", async () => {
    const dev = await runIn("dev", "PAYMENTS_KEY");
    expect(dev.step.state).toBe("COMPLETED");
    expect(dev.received).toEqual([`Bearer ${env.PAYMENTS_KEY}`]);

    const other = await runIn("other", "PAYMENTS_KEY");
    expect(other.step.state).toBe("FAILED");
    expect(other.step.attempt).toBe(1);
    expect(other.step.error).toMatch(/PAYMENTS_KEY .*not set for this workspace.*PUT \/v1\/secrets\/PAYMENTS_KEY/);
    // The error names no other workspace and does not reveal that an ungranted Worker secret exists.
    expect(other.step.error).not.toMatch(/\bdev\b/);
    expect(other.received).toHaveLength(0);
  });

  it("`other` cannot resolve dev's own (D1) secret either", async () => {
    const name = `DEV_ONLY_${unique("k").replace(/\W/g, "_")}`;
    expect((await putSecret("dev", name, "sk_dev_only_canary_1")).status).toBe(200);
    expect((await runIn("dev", name)).received).toEqual(["Bearer sk_dev_only_canary_1"]);
    const other = await runIn("other", name);
    expect(other.step.state).toBe("FAILED");
    expect(other.step.error).toMatch(/not set for this workspace/);
    expect(other.received).toHaveLength(0);
  });

  it("a secret PUT by `other` is used by `other` only; a workspace's own secret wins over a grant", async () => {
    expect((await putSecret("other", "PAYMENTS_KEY", "sk_other_only_canary_2")).status).toBe(200);
    const other = await runIn("other", "PAYMENTS_KEY");
    expect(other.step.state).toBe("COMPLETED");
    expect(other.received).toEqual(["Bearer sk_other_only_canary_2"]);
    // dev still gets its granted Worker secret, never other's value.
    const dev = await runIn("dev", "PAYMENTS_KEY");
    expect(dev.received).toEqual([`Bearer ${env.PAYMENTS_KEY}`]);
    // dev's own secret of the same name overrides the grant for dev.
    expect((await putSecret("dev", "PAYMENTS_KEY", "sk_dev_own_canary_3")).status).toBe(200);
    expect((await runIn("dev", "PAYMENTS_KEY")).received).toEqual(["Bearer sk_dev_own_canary_3"]);
    expect((await runIn("other", "PAYMENTS_KEY")).received).toEqual(["Bearer sk_other_only_canary_2"]);
  });

  it("an ungranted Worker secret is not visible to a workspace; granting it makes it visible", async () => {
    const hidden = await runIn("dev", "UNGRANTED_KEY", { env: envWith({ UNGRANTED_KEY: "sk_ungranted_canary_4" }) });
    expect(hidden.step.state).toBe("FAILED");
    expect(hidden.step.error).toMatch(/UNGRANTED_KEY .*not set for this workspace/);
    expect(hidden.received).toHaveLength(0);
    const granted = await runIn("dev", "UNGRANTED_KEY", {
      env: envWith({ UNGRANTED_KEY: "sk_ungranted_canary_4", SECRET_GRANTS: "dev:UNGRANTED_KEY" }),
    });
    expect(granted.received).toEqual(["Bearer sk_ungranted_canary_4"]);
    // A grant names a workspace exactly: `dev` is not `dev2`, nor a prefix match.
    const elsewhere = await runIn("dev2", "UNGRANTED_KEY", {
      env: envWith({ UNGRANTED_KEY: "sk_ungranted_canary_4", SECRET_GRANTS: "dev:UNGRANTED_KEY" }),
    });
    expect(elsewhere.received).toHaveLength(0);
  });

  it("a ciphertext copied into another workspace's row fails to decrypt (AAD binds workspace and name): nothing is sent", async () => {
    const name = `MOVED_${unique("k").replace(/\W/g, "_")}`;
    expect((await putSecret("dev", name, "sk_moved_canary_5")).status).toBe(200);
    // Copied across shards when the two workspaces live on two (test/helpers/shards.ts).
    const row = await dbOf(env, "dev")
      .prepare("SELECT name, key_id, iv, ciphertext, created_at, updated_at FROM workspace_secrets WHERE workspace = 'dev' AND name = ?1")
      .bind(name)
      .first<Record<string, unknown>>();
    await dbOf(env, "other")
      .prepare(
        `INSERT INTO workspace_secrets (workspace, name, key_id, iv, ciphertext, created_at, updated_at)
         VALUES ('other', ?1, ?2, ?3, ?4, ?5, ?6)`,
      )
      .bind(row!.name, row!.key_id, row!.iv, row!.ciphertext, row!.created_at, row!.updated_at)
      .run();
    const other = await runIn("other", name, { env: envWith({ SECRET_GRANTS: `other:${name}`, [name]: "sk_worker_fallback" }) });
    expect(other.step.state).toBe("FAILED");
    expect(other.step.error).toMatch(/cannot be decrypted: the stored row fails authentication/);
    // Fail closed: an unreadable row never falls back to a granted Worker secret.
    expect(other.received).toHaveLength(0);
  });

  it("a Gateway step with a workspace secret costs the same round trips: the sealed rows ride in the claim", async () => {
    const name = `BUDGET_${unique("k").replace(/\W/g, "_")}`;
    expect((await putSecret("dev", name, "sk_budget_canary_6")).status).toBe(200);
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow("dev", callWith(name));
    await h.start(wf, {});
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]); // claim (+ secrets), settle
    expect(h.dest.requests[0]!.headers.authorization).toBe("Bearer sk_budget_canary_6");
  });
});

describe("stored encrypted, write-only", () => {
  it("the stored row never contains the plaintext (nor its base64); no table does", async () => {
    const value = "sk_plaintext_canary_7_ü";
    expect((await putSecret("other", "SCAN_ME", value)).status).toBe(200);
    const rows = JSON.stringify((await dbOf(env, "other").prepare("SELECT * FROM workspace_secrets").all()).results);
    expect(rows).toContain("SCAN_ME");
    const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(value)));
    for (const leak of [value, "plaintext_canary_7", b64, b64.slice(0, 12)]) expect(rows).not.toContain(leak);
    const dump = await dumpEveryTable();
    expect(dump).not.toContain("plaintext_canary_7");
    // A second write of the same value draws a new IV: the ciphertext changes.
    const before = await dbOf(env, "other")
      .prepare("SELECT iv, ciphertext FROM workspace_secrets WHERE workspace = 'other' AND name = 'SCAN_ME'")
      .first();
    await putSecret("other", "SCAN_ME", value);
    const after = await dbOf(env, "other")
      .prepare("SELECT iv, ciphertext FROM workspace_secrets WHERE workspace = 'other' AND name = 'SCAN_ME'")
      .first();
    expect(after).not.toEqual(before);
  });

  it("PUT answers name and times, GET lists names and times only, never a value or a ciphertext; DELETE removes", async () => {
    const put = await putSecret("other", "LISTED", "sk_listed_canary_8");
    expect(put.status).toBe(200);
    expect(put.text).not.toContain("sk_listed_canary_8");
    const { ciphertext } = (await dbOf(env, "other")
      .prepare("SELECT ciphertext FROM workspace_secrets WHERE workspace = 'other' AND name = 'LISTED'")
      .first<{ ciphertext: string }>())!;
    const list = await api("GET", "/v1/secrets", "other");
    expect(list.status).toBe(200);
    expect(list.text).not.toContain("sk_listed_canary_8");
    expect(list.text).not.toContain(ciphertext);
    const items = (JSON.parse(list.text) as { items: Array<Record<string, unknown>> }).items;
    const listed = items.find((i) => i.name === "LISTED")!;
    expect(Object.keys(listed).sort()).toEqual(["createdAt", "keyId", "name", "updatedAt"]);
    // Another workspace's list does not show it.
    expect((await api("GET", "/v1/secrets", "dev")).text).not.toContain("LISTED");
    // There is no route that reads one back: the path serves PUT and DELETE only (405, no value in the answer).
    const read = await api("GET", "/v1/secrets/LISTED", "other");
    expect(read.status).toBe(405);
    expect(read.text).not.toContain("sk_listed_canary_8");
    expect((await api("DELETE", "/v1/secrets/LISTED", "dev")).status).toBe(404);
    expect((await api("DELETE", "/v1/secrets/LISTED", "other")).status).toBe(204);
    expect((await api("DELETE", "/v1/secrets/LISTED", "other")).status).toBe(404);
  });

  it("refuses bad names, reserved names, bad bodies and unauthenticated calls; 503 without a master key, storing nothing", async () => {
    const cases: Array<[string, unknown, number, string]> = [
      ["1BAD", { value: "x" }, 422, "secret-name-invalid"],
      ["API_TOKENS", { value: "x" }, 422, "secret-name-reserved"],
      ["SECRETS_MASTER_KEY", { value: "x" }, 422, "secret-name-reserved"],
      ["OPERATOR_TOKENS", { value: "x" }, 422, "secret-name-reserved"],
      ["OK_NAME", { value: "" }, 422, "secret-value-invalid"],
      ["OK_NAME", { value: "a\r\nX-Injected: 1" }, 422, "secret-value-invalid"],
      ["OK_NAME", { value: "x".repeat(4097) }, 422, "secret-value-invalid"],
      ["OK_NAME", { value: 1 }, 422, "secret-value-invalid"],
      ["OK_NAME", { value: "x", extra: true }, 422, "secret-value-invalid"],
    ];
    for (const [name, body, status, code] of cases) {
      const res = await api("PUT", `/v1/secrets/${name}`, "other", body);
      expect(res.status, `${name} ${JSON.stringify(body).slice(0, 40)}`).toBe(status);
      expect(JSON.parse(res.text).code).toBe(code);
    }
    const ctx = createExecutionContext();
    const anonymous = await app.fetch(new Request("http://idemflow.test/v1/secrets", { headers: {} }), env, ctx);
    expect(anonymous.status).toBe(401);
    const noKey = await api("PUT", "/v1/secrets/OK_NAME", "other", { value: "x" }, { SECRETS_MASTER_KEY: "" });
    expect(noKey.status).toBe(503);
    expect(JSON.parse(noKey.text).code).toBe("secrets-master-key-missing");
    const shortKey = await api("PUT", "/v1/secrets/OK_NAME", "other", { value: "x" }, { SECRETS_MASTER_KEY: btoa("too short") });
    expect(shortKey.status).toBe(503);
    expect(await dbOf(env, "other").prepare("SELECT count(*) AS n FROM workspace_secrets WHERE name = 'OK_NAME'").first("n")).toBe(0);
  });
});

describe("sealing (src/secrets/crypto.ts)", () => {
  const keyA = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
  const keyB = btoa(String.fromCharCode(...new Uint8Array(32).fill(9)));

  it("binds workspace and name as AAD: another workspace or name does not open it", async () => {
    const ring = await keyringFrom({ SECRETS_MASTER_KEY: keyA });
    const sealed = await sealSecret(ring, "dev", "PAYMENTS_KEY", "sk_aad_canary");
    expect(atob(sealed.iv)).toHaveLength(12);
    expect(await openSecret(ring, "dev", "PAYMENTS_KEY", sealed)).toBe("sk_aad_canary");
    await expect(openSecret(ring, "other", "PAYMENTS_KEY", sealed)).rejects.toThrow(SecretUnreadableError);
    await expect(openSecret(ring, "dev", "OTHER_NAME", sealed)).rejects.toThrow(SecretUnreadableError);
  });

  it("rotation: rows sealed under the previous key still open while SECRETS_MASTER_KEY_PREVIOUS is set, and only then", async () => {
    const old = await keyringFrom({ SECRETS_MASTER_KEY: keyA });
    const sealed = await sealSecret(old, "dev", "ROTATED", "sk_rotated_canary");
    const rotating = await keyringFrom({ SECRETS_MASTER_KEY: keyB, SECRETS_MASTER_KEY_PREVIOUS: keyA });
    expect(await openSecret(rotating, "dev", "ROTATED", sealed)).toBe("sk_rotated_canary");
    // New writes use the new key.
    expect((await sealSecret(rotating, "dev", "ROTATED", "v")).keyId).toBe((await importMasterKey("K", keyB)).id);
    const rotated = await keyringFrom({ SECRETS_MASTER_KEY: keyB });
    await expect(openSecret(rotated, "dev", "ROTATED", sealed)).rejects.toThrow(
      /sealed under master key [0-9a-f]{16}.*SECRETS_MASTER_KEY_PREVIOUS/,
    );
  });
});
