import "@vitest/runner";

declare module "@vitest/runner" {
  interface TaskMeta {
    /** A scenario file's check or one scenario's run (test/workflows/scenarios.test.ts), for scripts/test-workflows.mjs. */
    scenario?:
      | { file: string; kind: "file"; problems: Array<{ pointer: string; message: string }> }
      | { file: string; kind: "scenario"; index: number; name: string; message: string | null; ms: number };
  }
}
