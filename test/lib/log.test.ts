import { afterEach, describe, expect, it, vi } from "vitest";
import { errorMessage, log } from "../../src/lib/log";

afterEach(() => vi.restoreAllMocks());

describe("log", () => {
  it("writes one JSON object per line with its level, a stable event name and the ids, on the console method of that level", () => {
    const lines = { log: [] as string[], warn: [] as string[], error: [] as string[] };
    for (const method of ["log", "warn", "error"] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines[method].push(...args.map(String)));
    }
    log.info("reaper.redispatched", { expiredLeases: 1, overdue: 0 });
    log.warn("step.fenced_out", { executionId: "e1", vertexId: "charge", epoch: 2 });
    log.error("step.crashed", { executionId: "e1", vertexId: "charge", error: "boom\nsecond line" });
    expect(lines.log).toHaveLength(1);
    expect(lines.warn).toHaveLength(1);
    expect(lines.error).toHaveLength(1);
    expect(JSON.parse(lines.log[0]!)).toEqual({ level: "info", event: "reaper.redispatched", expiredLeases: 1, overdue: 0 });
    expect(JSON.parse(lines.warn[0]!)).toEqual({
      level: "warn",
      event: "step.fenced_out",
      executionId: "e1",
      vertexId: "charge",
      epoch: 2,
    });
    // A newline inside a field stays inside the one line (escaped), so a log search never splits it.
    expect(lines.error[0]).not.toContain("\n");
    expect(JSON.parse(lines.error[0]!)).toMatchObject({ level: "error", event: "step.crashed", error: "boom\nsecond line" });
  });

  it("keeps level and event when a field tries to override them", () => {
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: unknown) => void lines.push(String(line)));
    log.warn("step.failed", { event: "forged", level: "info" });
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "warn", event: "step.failed" });
  });
});

describe("errorMessage", () => {
  it("is an Error's message, else the thrown value as text", () => {
    expect(errorMessage(new TypeError("network down"))).toBe("network down");
    expect(errorMessage("plain")).toBe("plain");
    expect(errorMessage(42)).toBe("42");
    expect(errorMessage(undefined)).toBe("undefined");
  });
});
