/** The engine's log lines (src/lib/log.ts: one JSON object per line), captured for a test to assert on. */
import { beforeEach, vi } from "vitest";

/** Captures every log line of each test (any level) into the returned array, emptied before each test. */
export function captureLogLines(): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  beforeEach(() => {
    lines.length = 0;
    for (const level of ["log", "warn", "error"] as const) {
      vi.spyOn(console, level).mockImplementation((line: unknown) => void lines.push(JSON.parse(String(line)) as Record<string, unknown>));
    }
  });
  return lines;
}
