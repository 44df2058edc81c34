/**
 * `PUT/GET/DELETE /v1/event-sources/{name}` and `GET /v1/event-sources` (src/http/routes/event-sources.ts):
 * saved in the bearer's workspace, versioned by content, checked at save with every error's pointer,
 * and never holding a secret's value.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, unique } from "./helpers";
import { dbOf } from "../helpers/shards";

const SOURCE = {
  scheme: "standard-webhooks",
  secret: "{{ secrets.PAYMENTS_WEBHOOK_SECRET }}",
  name: "= body.type = 'charge.succeeded' ? 'payment.confirmed' : body.type",
  match: "= body.data.order",
};

interface Saved {
  name: string;
  version: string;
  url: string;
  definition: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

interface Invalid {
  code: string;
  status: number;
  detail: string;
  errors: Array<{ pointer: string; code: string; message: string }>;
}

async function errorsOf(definition: unknown, name = unique("src")): Promise<Array<[string, string]>> {
  const res = await api("PUT", `/v1/event-sources/${name}`, definition);
  expect(res.status).toBe(422);
  const body = await res.json<Invalid>();
  expect(body.code).toBe("event-source-invalid");
  return body.errors.map((e) => [e.pointer, e.code]);
}

describe("saving an event source", () => {
  it("creates (201) and answers it with its defaults, version and delivery path; the same PUT again: 200, unchanged", async () => {
    const name = unique("payments");
    const res = await api("PUT", `/v1/event-sources/${name}`, SOURCE);
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/v1/event-sources/${name}`);
    const saved = await res.json<Saved>();
    expect(saved).toMatchObject({ name, url: `/events/dev/${name}`, definition: { ...SOURCE, toleranceSeconds: 300 } });
    expect(saved.version).toMatch(/^[0-9a-f]{64}$/);

    // Key order and a spelled-out default are the same definition: the same version, updatedAt kept.
    const reordered = Object.fromEntries(Object.entries({ ...SOURCE, toleranceSeconds: 300 }).reverse());
    const again = await api("PUT", `/v1/event-sources/${name}`, reordered);
    expect(again.status).toBe(200);
    expect(await again.json<Saved>()).toEqual(saved);

    const changed = await api("PUT", `/v1/event-sources/${name}`, { ...SOURCE, toleranceSeconds: 60 });
    expect(changed.status).toBe(200);
    const replaced = await changed.json<Saved>();
    expect(replaced.version).not.toBe(saved.version);
    expect(replaced.createdAt).toBe(saved.createdAt);
    expect((await (await api("GET", `/v1/event-sources/${name}`)).json<Saved>()).definition.toleranceSeconds).toBe(60);
  });

  it("lists the workspace's sources by name, reads one, deletes it (204, then 404)", async () => {
    const a = unique("a-src");
    const b = unique("b-src");
    for (const name of [b, a]) expect((await api("PUT", `/v1/event-sources/${name}`, SOURCE)).status).toBe(201);
    const list = await (await api("GET", "/v1/event-sources")).json<{ items: Saved[] }>();
    const names = list.items.map((s) => s.name).filter((n) => n === a || n === b);
    expect(names).toEqual([a, b]);
    expect((await api("GET", `/v1/event-sources/${a}`)).status).toBe(200);

    expect((await api("DELETE", `/v1/event-sources/${a}`)).status).toBe(204);
    const gone = await api("GET", `/v1/event-sources/${a}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ code: "event-source-not-found" });
    expect((await api("DELETE", `/v1/event-sources/${a}`)).status).toBe(404);
  });

  it("is scoped to the token's workspace: another workspace neither lists, reads nor deletes it", async () => {
    const name = unique("mine");
    expect((await api("PUT", `/v1/event-sources/${name}`, SOURCE)).status).toBe(201);
    const theirs = await (await api("GET", "/v1/event-sources", undefined, "other-token")).json<{ items: Saved[] }>();
    expect(theirs.items.map((s) => s.name)).not.toContain(name);
    expect((await api("GET", `/v1/event-sources/${name}`, undefined, "other-token")).status).toBe(404);
    expect((await api("DELETE", `/v1/event-sources/${name}`, undefined, "other-token")).status).toBe(404);
    expect((await api("GET", `/v1/event-sources/${name}`)).status).toBe(200);
    // Stored on the workspace's own shard only.
    const row = await dbOf(env, "dev").prepare("SELECT workspace FROM event_sources WHERE name = ?1").bind(name).first();
    expect(row).toEqual({ workspace: "dev" });
    expect(await dbOf(env, "other").prepare("SELECT 1 FROM event_sources WHERE name = ?1").bind(name).first()).toBeNull();
  });

  it("needs a bearer token", async () => {
    const res = await api("GET", "/v1/event-sources", undefined, "not-a-token");
    expect(res.status).toBe(401);
  });
});

describe("an invalid event source is refused with every error's pointer, and nothing is saved", () => {
  it("points at an expression that does not compile, and at a function that does not exist", async () => {
    const name = unique("bad");
    expect(await errorsOf({ ...SOURCE, match: "= body.data.(order" }, name)).toEqual([["/match", "expression-syntax"]]);
    expect(await errorsOf({ ...SOURCE, id: "= $uuid()" })).toEqual([["/id", "unknown-function"]]);
    expect(await errorsOf({ ...SOURCE, name: "= body.(", data: "=" })).toEqual([
      ["/name", "expression-syntax"],
      ["/data", "expression-empty"],
    ]);
    expect((await api("GET", `/v1/event-sources/${name}`)).status).toBe(404);
  });

  it("refuses a secret's value where its template belongs — and says to store it as a secret", async () => {
    const res = await api("PUT", `/v1/event-sources/${unique("leak")}`, {
      ...SOURCE,
      secret: "whsec_aWRlbWZsb3ctbG9jYWwtZGVtby1wYXltZW50cy1rZXk=",
    });
    expect(res.status).toBe(422);
    const body = await res.json<Invalid>();
    expect(body.errors).toEqual([
      { pointer: "/secret", code: "secret-not-template", message: expect.stringContaining("PUT /v1/secrets/NAME") },
    ]);
    expect(JSON.stringify(body)).not.toContain("aWRlbWZsb3ct");
    expect(await errorsOf({ ...SOURCE, secret: "Bearer {{ secrets.X }}" })).toEqual([["/secret", "secret-not-template"]]);
    expect(await errorsOf({ ...SOURCE, secret: "{{ secrets.API_TOKENS }}" })).toEqual([["/secret", "secret-name-reserved"]]);
    expect(await errorsOf({ ...SOURCE, data: "= '{{ secrets.X }}'" })).toEqual([["/data", "secret-not-allowed-here"]]);
  });

  it("points at missing, unknown and mistyped members, a literal that is no event name, and a bad path name", async () => {
    expect(await errorsOf({ scheme: "hmac", secret: SOURCE.secret, name: "payment confirmed", colour: "red" })).toEqual([
      ["/scheme", "invalid-value"],
      ["/match", "required"],
      ["/colour", "unknown-key"],
      ["/name", "event-name-invalid"],
    ]);
    expect(await errorsOf({ ...SOURCE, match: "body.data.order", toleranceSeconds: 7200 })).toEqual([
      ["/match", "invalid-format"],
      ["/toleranceSeconds", "invalid-too-big"],
    ]);
    expect(await errorsOf([SOURCE])).toEqual([["", "invalid-type"]]);
    expect(await errorsOf(SOURCE, "has.a.dot")).toEqual([["", "source-name-invalid"]]);
  });

  it("refuses a member named __proto__ (it would vanish in a parse)", async () => {
    expect(await errorsOf(`{"scheme":"v1","secret":"{{ secrets.S }}","name":"x","match":"= body.x","__proto__":{"id":"= 1"}}`)).toEqual([
      ["/__proto__", "unknown-key"],
    ]);
  });
});
