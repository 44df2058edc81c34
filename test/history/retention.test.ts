/**
 * The retention policy (SPEC section 12, src/history/retention.ts): the deployment's default from
 * the HISTORY_* vars (an invalid one falls back to the default and is logged once per isolate and
 * value), a workflow's `history` overriding it per status, and the dedupe window as the floor of
 * every effective retention.
 */
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import wranglerToml from "../../wrangler.toml?raw";
import { MAX_DURATION_MS, MIN_HISTORY_MS, type WorkflowDefinition } from "../../src/definitions/schema";
import { validateDefinition } from "../../src/definitions/validate";
import {
  DEFAULT_RETENTION,
  dedupeWindowMsOf,
  deploymentRetention,
  effectiveRetention,
  retentionOf,
  type Retention,
} from "../../src/history/retention";

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

afterEach(() => vi.restoreAllMocks());

/** The `config.invalid_var` lines written while `run` runs. */
function warnings(run: () => void): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  const spy = vi
    .spyOn(console, "warn")
    .mockImplementation((line: unknown) => void lines.push(JSON.parse(String(line)) as Record<string, unknown>));
  try {
    run();
  } finally {
    spy.mockRestore();
  }
  return lines;
}

describe("DEFAULT_RETENTION", () => {
  it("is SPEC section 12's: completed 7 days, failed and cancelled 30 days; frozen", () => {
    expect(DEFAULT_RETENTION).toEqual({ completedMs: 7 * DAY, failedMs: 30 * DAY, cancelledMs: 30 * DAY });
    expect(Object.isFrozen(DEFAULT_RETENTION)).toBe(true);
  });
});

describe("deploymentRetention", () => {
  it("parses the HISTORY_* vars of wrangler.toml, as the Worker gets them, without a warning", () => {
    const inToml = Object.fromEntries(
      [...wranglerToml.matchAll(/^(HISTORY_(?:COMPLETED|FAILED|CANCELLED))\s*=\s*"([^"]*)"/gm)].map((m) => [m[1]!, m[2]!]),
    );
    expect(Object.keys(inToml).sort()).toEqual(["HISTORY_CANCELLED", "HISTORY_COMPLETED", "HISTORY_FAILED"]);
    let fromToml: Retention | undefined;
    let fromEnv: Retention | undefined;
    expect(
      warnings(() => {
        fromToml = deploymentRetention(inToml);
        fromEnv = deploymentRetention(env);
      }),
    ).toEqual([]);
    expect(fromToml).toEqual({ completedMs: 7 * DAY, failedMs: 30 * DAY, cancelledMs: 30 * DAY });
    expect(fromEnv).toEqual(fromToml);
  });

  it("takes the default for an unset or empty var, silently", () => {
    expect(warnings(() => expect(deploymentRetention({})).toEqual(DEFAULT_RETENTION))).toEqual([]);
    expect(warnings(() => expect(deploymentRetention({ HISTORY_FAILED: "" })).toEqual(DEFAULT_RETENTION))).toEqual([]);
  });

  it("sets each status from its own var, in every duration unit, from one minute to 365 days", () => {
    expect(deploymentRetention({ HISTORY_COMPLETED: "90s", HISTORY_FAILED: "12h", HISTORY_CANCELLED: "365d" })).toEqual({
      completedMs: 90_000,
      failedMs: 12 * HOUR,
      cancelledMs: 365 * DAY,
    });
    expect(deploymentRetention({ HISTORY_COMPLETED: "1m", HISTORY_CANCELLED: "60000ms" })).toEqual({
      ...DEFAULT_RETENTION,
      completedMs: MIN_HISTORY_MS,
      cancelledMs: MIN_HISTORY_MS,
    });
  });

  it("returns a new object each time, never DEFAULT_RETENTION itself", () => {
    const retention = deploymentRetention({});
    expect(retention).not.toBe(DEFAULT_RETENTION);
    retention.completedMs = 1;
    expect(deploymentRetention({}).completedMs).toBe(7 * DAY);
  });

  it.each([
    ["7 days", "is not a duration"],
    ["604800000", "is not a duration"],
    [" 7d", "is not a duration"],
    ["-7d", "is not a duration"],
    ["0d", "is shorter than one minute"],
    ["59s", "is shorter than one minute"],
    ["366d", "is longer than 365 days"],
    ["99999999999999999999999d", "is longer than 365 days"],
  ])("an invalid value %j falls back to the default and logs config.invalid_var once", (value, why) => {
    const first = warnings(() =>
      expect(deploymentRetention({ HISTORY_COMPLETED: value, HISTORY_FAILED: "2d" })).toEqual({
        ...DEFAULT_RETENTION,
        failedMs: 2 * DAY,
      }),
    );
    expect(first).toEqual([
      {
        level: "warn",
        event: "config.invalid_var",
        variable: "HISTORY_COMPLETED",
        value,
        fallback: "7d",
        message: expect.any(String) as unknown,
      },
    ]);
    const message = String(first[0]!.message);
    expect(message).toContain(`HISTORY_COMPLETED ${JSON.stringify(value)} ${why}`);
    expect(message).toContain("using the default 7d. Set it to a duration from 1m to 365d in wrangler.toml [vars]");
    // Once per isolate per value: the next executions do not repeat it.
    expect(warnings(() => expect(deploymentRetention({ HISTORY_COMPLETED: value }).completedMs).toBe(7 * DAY))).toEqual([]);
  });

  it("logs the same bad value once per variable, with that variable's default", () => {
    const lines = warnings(() => {
      for (let i = 0; i < 3; i++) deploymentRetention({ HISTORY_FAILED: "1w", HISTORY_CANCELLED: "1w" });
    });
    expect(lines.map((l) => [l.variable, l.fallback])).toEqual([
      ["HISTORY_FAILED", "30d"],
      ["HISTORY_CANCELLED", "30d"],
    ]);
  });

  it("logs a var changed to another bad value again, and bounds the value it logs", () => {
    const long = `${"9".repeat(300)}x`;
    const lines = warnings(() => {
      deploymentRetention({ HISTORY_CANCELLED: "5y" });
      deploymentRetention({ HISTORY_CANCELLED: long });
    });
    expect(lines.map((l) => l.value)).toEqual(["5y", `${"9".repeat(100)}…`]);
  });
});

describe("effectiveRetention", () => {
  const deployment: Retention = { completedMs: 7 * DAY, failedMs: 30 * DAY, cancelledMs: 30 * DAY };

  it("without a history member: the deployment's, each at least the dedupe window", () => {
    expect(effectiveRetention(undefined, deployment, DAY)).toEqual(deployment);
    expect(effectiveRetention({}, deployment, DAY)).toEqual(deployment);
  });

  it("the dedupe window is the floor of every status, the deployment's default included", () => {
    const short: Retention = { completedMs: MINUTE, failedMs: 2 * HOUR, cancelledMs: 10 * DAY };
    expect(effectiveRetention(undefined, short, DAY)).toEqual({ completedMs: DAY, failedMs: DAY, cancelledMs: 10 * DAY });
    // An override under the window (refused at save; say the window grew in a later version) is raised too.
    expect(effectiveRetention({ completed: "1h", failed: "2d" }, deployment, 3 * DAY)).toEqual({
      completedMs: 3 * DAY,
      failedMs: 3 * DAY,
      cancelledMs: 30 * DAY,
    });
    // A window over the longest retention still wins: the execution outlives its window.
    expect(effectiveRetention({ completed: "365d" }, deployment, 400 * DAY).completedMs).toBe(400 * DAY);
  });

  it("overrides only the statuses the workflow sets, in any duration form", () => {
    expect(effectiveRetention({ completed: "2d" }, deployment, HOUR)).toEqual({ ...deployment, completedMs: 2 * DAY });
    expect(effectiveRetention({ failed: 90 * MINUTE }, deployment, HOUR)).toEqual({ ...deployment, failedMs: 90 * MINUTE });
    expect(effectiveRetention({ cancelled: "1m" }, deployment, 1_000)).toEqual({ ...deployment, cancelledMs: MINUTE });
    expect(effectiveRetention({ completed: "1d", failed: "2d", cancelled: "3d" }, deployment, HOUR)).toEqual({
      completedMs: DAY,
      failedMs: 2 * DAY,
      cancelledMs: 3 * DAY,
    });
  });

  it("an override may be longer or shorter than the deployment's", () => {
    expect(effectiveRetention({ completed: "90d", failed: "2h" }, deployment, HOUR)).toEqual({
      completedMs: 90 * DAY,
      failedMs: 2 * HOUR,
      cancelledMs: 30 * DAY,
    });
  });

  it("holds an override that save would refuse to the bounds, and ignores one that is not a duration", () => {
    expect(effectiveRetention({ completed: "1s", failed: "400d", cancelled: Number.MAX_SAFE_INTEGER }, deployment, 0)).toEqual({
      completedMs: MIN_HISTORY_MS,
      failedMs: MAX_DURATION_MS,
      cancelledMs: MAX_DURATION_MS,
    });
    const junk = { completed: "soon", failed: -5, cancelled: 1.5 } as unknown as { completed: string };
    expect(effectiveRetention(junk, deployment, 0)).toEqual(deployment);
  });

  it("a window that is not a positive number sets no floor", () => {
    const short: Retention = { completedMs: MINUTE, failedMs: MINUTE, cancelledMs: MINUTE };
    for (const window of [0, -1, Number.NaN]) expect(effectiveRetention(undefined, short, window)).toEqual(short);
  });

  it("reads own members only (`__proto__`, `constructor` are data, not the prototype's)", () => {
    const parsed = JSON.parse(`{"__proto__":{"completed":"1m"},"constructor":"1m"}`) as { completed?: string };
    expect(effectiveRetention(parsed, deployment, 0)).toEqual(deployment);
    const inherited = Object.create({ completed: "1m", failed: "1m" }) as { completed?: string };
    expect(effectiveRetention(inherited, deployment, 0)).toEqual(deployment);
  });

  it("leaves its arguments alone", () => {
    const before = { ...deployment };
    effectiveRetention({ completed: "1d" }, deployment, 2 * DAY);
    expect(deployment).toEqual(before);
  });
});

describe("retentionOf a validated definition", () => {
  const definition = (extra: Record<string, unknown>, entry: Record<string, unknown> = {}): WorkflowDefinition => {
    const result = validateDefinition({ id: "r", vertices: [{ id: "received", type: "ENTRY_POINT", config: entry }], ...extra });
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    return result.definition;
  };

  it("the window is the entry point's, 24h when unset, in any duration form", () => {
    expect(dedupeWindowMsOf(definition({}))).toBe(DAY);
    expect(dedupeWindowMsOf(definition({}, { dedupeWindow: "90m" }))).toBe(90 * MINUTE);
    expect(dedupeWindowMsOf(definition({}, { dedupeWindow: 5_000 }))).toBe(5_000);
  });

  it("applies the definition's history over the deployment's, floored by its window", () => {
    const deployment = deploymentRetention({ HISTORY_COMPLETED: "1h", HISTORY_FAILED: "1h", HISTORY_CANCELLED: "3d" });
    expect(retentionOf(definition({ history: { completed: "2d" } }), deployment)).toEqual({
      completedMs: 2 * DAY,
      failedMs: DAY, // the deployment's 1h, under the default 24h window
      cancelledMs: 3 * DAY,
    });
    expect(retentionOf(definition({ history: { failed: "10m" } }, { dedupeWindow: "5m" }), deployment)).toEqual({
      completedMs: HOUR,
      failedMs: 10 * MINUTE,
      cancelledMs: 3 * DAY,
    });
  });
});
