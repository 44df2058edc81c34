/**
 * migrations/0025 rebuilds `events` with an AUTOINCREMENT id (never given twice) and
 * `event_consumptions` referencing it ON DELETE CASCADE, carrying the event's workspace. This
 * file's database (storage is per test file) is taken back to the schema of 0024 — every table
 * dropped, 0001–0024 applied — and populated with what the erasure bug of issue 41 (finding 3) left:
 * a consumption that outlived its event, whose rowid the next event — another workspace's — reused,
 * so that event was born taken. Then 0025 runs in one batch, as `wrangler d1 migrations apply` runs it.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { deliverEvent } from "../../src/ledger";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const migration = migrationSql(25);
const H = (c: string) => c.repeat(64);

beforeAll(async () => {
  await schemaBefore(25);
  const event = (rowid: number, workspace: string, key: string, receivedAt: number, consumedAt: number | null, data: string | null) =>
    env.DB.prepare(
      `INSERT INTO events (rowid, workspace, event_key, event_id, name, match_hash, match_value, data, source, received_at,
                           buffered_until, nonce, consumed_at, duplicates)
       VALUES (?1, ?2, ?3, ?3, 'order.paid', ?4, '"A-1"', ?5, NULL, ?6, ?6 + 1000, 'n', ?7, 2)`,
    ).bind(rowid, workspace, key, H(workspace === "ws-a" ? "a" : "b"), data, receivedAt, consumedAt);
  const wait = (key: string, workspace: string) =>
    env.DB.prepare(
      `INSERT INTO event_waits (execution_id, vertex_id, wait_key, retry_base, workspace, name, match_hash, match_value, consume,
                                registered_at, timeout_at)
       VALUES (?1, 'confirm', ?1 || '/confirm/0', 0, ?2, 'order.paid', ?3, '"A-1"', 'all', 5, 100000)`,
    ).bind(key, workspace, H(workspace === "ws-a" ? "a" : "b"));
  const consumption = (execution: string, rowid: number, at: number) =>
    env.DB.prepare(
      `INSERT INTO event_consumptions (wait_key, event_rowid, execution_id, vertex_id, consumed_at)
       VALUES (?1 || '/confirm/0', ?2, ?1, 'confirm', ?3)`,
    ).bind(execution, rowid, at);
  await env.DB.batch([
    // ws-a's event 1, taken by x-1: kept as it is.
    event(1, "ws-a", "id::e1", 10, 10, '{"paid":1}'),
    wait("x-1", "ws-a"),
    consumption("x-1", 1, 10),
    // ws-a's broadcast (rowid 2) was taken by x-2 and x-3; x-2's erasure deleted it and x-2's consumption,
    // x-3's stayed. Then ws-b's event reused rowid 2 and was born taken (consumed_at at its receipt).
    wait("x-3", "ws-a"),
    consumption("x-3", 2, 20),
    event(2, "ws-b", "id::e-b", 30, 30, '{"other":true}'),
    // A consumption whose event is simply gone.
    consumption("x-4", 99, 40),
  ]);
  await run(migration);
});

describe("migration 0025 on a populated database", () => {
  it("keeps every event (its id: its rowid); drops the consumptions that outlived their event; un-takes the one born taken", async () => {
    const events = await env.DB.prepare(
      "SELECT id, workspace, event_key, data, consumed_at, duplicates, erased_at FROM events ORDER BY id",
    ).all();
    expect(events.results).toEqual([
      { id: 1, workspace: "ws-a", event_key: "id::e1", data: '{"paid":1}', consumed_at: 10, duplicates: 2, erased_at: null },
      { id: 2, workspace: "ws-b", event_key: "id::e-b", data: '{"other":true}', consumed_at: null, duplicates: 2, erased_at: null },
    ]);
    const consumptions = await env.DB.prepare(
      "SELECT wait_key, event_rowid, workspace, execution_id, consumed_at FROM event_consumptions",
    ).all();
    expect(consumptions.results).toEqual([
      { wait_key: "x-1/confirm/0", event_rowid: 1, workspace: "ws-a", execution_id: "x-1", consumed_at: 10 },
    ]);
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
  });

  it("names the rebuild in its header; keeps the indexes; the old tables are gone", async () => {
    expect(migration.split("\n").slice(0, 5).join("\n")).toMatch(/REBUILDS two tables: `events` and `event_consumptions`/);
    const indexes = await env.DB.prepare(
      `SELECT name FROM sqlite_master
       WHERE type = 'index' AND tbl_name IN ('events', 'event_consumptions') AND sql IS NOT NULL ORDER BY name`,
    ).all<{ name: string }>();
    expect(indexes.results.map((r) => r.name)).toEqual([
      "event_consumptions_event",
      "event_consumptions_execution",
      "events_match",
      "events_received",
    ]);
    const old = await env.DB.prepare("SELECT name FROM sqlite_master WHERE name LIKE '%_0024'").all();
    expect(old.results).toEqual([]);
  });

  it("never gives an id twice: the newest event deleted, the next gets a new id; a consumption goes with its event", async () => {
    await env.DB.prepare("DELETE FROM events WHERE id = 2").run();
    const delivered = await deliverEvent(env.DB, {
      workspace: "ws-c",
      eventKey: "id::fresh",
      contentWindowMs: null,
      eventId: "fresh",
      name: "order.paid",
      matchHash: H("c"),
      matchValue: '"C-1"',
      data: null,
      source: null,
      now: 50,
      bufferedUntil: 5000,
      nonce: "fresh-nonce",
    });
    expect(delivered).toMatchObject({ duplicate: false, resumed: [], consumedBy: [] });
    const fresh = await env.DB.prepare("SELECT id, consumed_at FROM events WHERE event_key = 'id::fresh'").first<{
      id: number;
      consumed_at: number | null;
    }>();
    expect(fresh).toEqual({ id: 3, consumed_at: null });
    // The dedupe key is still unique per workspace.
    await expect(
      env.DB.prepare(
        `INSERT INTO events (workspace, event_key, event_id, name, match_hash, match_value, received_at, buffered_until, nonce)
         VALUES ('ws-c', 'id::fresh', 'fresh', 'order.paid', ?1, '"C-1"', 1, 2, 'x')`,
      )
        .bind(H("c"))
        .run(),
    ).rejects.toThrow(/UNIQUE/);
    await env.DB.prepare("DELETE FROM events WHERE id = 1").run();
    expect((await env.DB.prepare("SELECT count(*) AS n FROM event_consumptions").first<{ n: number }>())!.n).toBe(0);
  });
});
