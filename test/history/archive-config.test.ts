/**
 * The archive's configuration (docs/history-archive.md): `HISTORY_ARCHIVE` is "on" or "off" — any
 * other value is logged as `config.invalid_var` and taken as on (a trace swept unarchived is gone
 * for good), never silently off; and an erasure on a deployment without an `ARCHIVE` bucket says
 * that no archive object was looked for, instead of a bare `archiveObjectsDeleted: 0`.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { archiverFor } from "../../src/history/archive";
import { archiveSetting } from "../../src/history/archive-var";
import { captureLogLines } from "../helpers/log-lines";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, unique } from "../steps/helpers";
import { rowsOf, GONE } from "./helpers";

const lines = captureLogLines();

describe("HISTORY_ARCHIVE", () => {
  it('"on" and "off" in any case are themselves; unset or empty is off', () => {
    expect(["on", "ON", " On ", "off", "OFF", "", undefined].map(archiveSetting)).toEqual(["on", "on", "on", "off", "off", "off", "off"]);
    expect(lines.filter((l) => l.event === "config.invalid_var")).toEqual([]);
  });

  it("any other value is logged once as config.invalid_var and archives (the safe side), never silently off", () => {
    const value = `yes-${crypto.randomUUID().slice(0, 8)}`;
    expect(archiveSetting(value)).toBe("on");
    expect(archiveSetting(value)).toBe("on");
    const logged = lines.filter((l) => l.event === "config.invalid_var");
    expect(logged).toEqual([expect.objectContaining({ level: "warn", variable: "HISTORY_ARCHIVE", value, fallback: "on" })]);
    // The sweep's archiver follows it (a bucket is bound in the tests).
    for (const setting of ["true", "1", "enabled"]) expect(archiverFor({ ...env, HISTORY_ARCHIVE: setting } as Env, env.DB)).not.toBeNull();
    expect(archiverFor({ ...env, HISTORY_ARCHIVE: "off" } as unknown as Env, env.DB)).toBeNull();
    expect(archiverFor({ ...env, HISTORY_ARCHIVE: "on", ARCHIVE: undefined } as unknown as Env, env.DB)).toBeNull();
  });
});

describe("erasure without an ARCHIVE bucket", () => {
  it("erases the rows and says that no archive object was looked for", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request(`http://idemflow.test/v1/executions/${id}`, {
        method: "DELETE",
        headers: { authorization: "Bearer dev-token", "idempotency-key": unique("erase") },
      }),
      { ...env, QUEUE: h.queue, ARCHIVE: undefined } as unknown as Env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      erased: [id],
      archiveObjectsDeleted: 0,
      archive: "unbound",
      archiveDetail: expect.stringMatching(/No ARCHIVE bucket is bound.*erase again/),
    });
    expect(await rowsOf(id)).toEqual(GONE);
  });
});
