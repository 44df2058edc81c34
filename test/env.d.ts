import type { D1Migration } from "cloudflare:test";
import type { D1Template } from "./d1-template";
import type { WorkflowFiles } from "./workflows/bundle.mjs";

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      /** migrations/ applied once, as statements (test/d1-template.ts): every test file's shards start from it. */
      TEST_D1_TEMPLATE: D1Template;
      /** "1" in project `shard-1` (vitest.config.ts): the test code's `env.DB` is shard 1's database. */
      TEST_DB_IS_SHARD?: string;
      /** Shard 0's database, in project `shard-1` (where `env.DB` is shard 1's). */
      TEST_SHARD_0?: D1Database;
      /** Scenario, workflow and connector files for the scenario runner (test/workflows/bundle.ts). */
      TEST_WORKFLOW_FILES: WorkflowFiles;
      /** "1": the scenario runner keeps the engine's log lines (`npm run test:workflows -- --verbose`). */
      SCENARIO_VERBOSE?: string;
    }
  }
}
export {};
