import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { buildD1Template } from "./test/d1-template.ts";
import { pureTestFiles } from "./test/pure-files.mjs";
import { loadWorkflowFiles } from "./test/workflows/bundle.mjs";

/** The test values of the Worker secrets wrangler.toml requires (never real keys). */
const TEST_SECRETS = {
  // A canary secret: tests scan stored rows, logs and responses for it.
  PAYMENTS_KEY: "sk_test_canary_4f1d9a",
  WEBHOOK_SECRET: "whsec_test_canary_77ab",
  // 32 fixed test bytes (base64) sealing workspace secrets.
  SECRETS_MASTER_KEY: "dGVzdC1vbmx5LW1hc3Rlci1rZXktMzItYnl0ZXMhISE=",
  // The local tokens (scripts/lib/local-tokens.mjs): secrets, never wrangler.toml [vars] (test/http/surface.test.ts).
  API_TOKENS: "dev-token:dev,other-token:other",
  OPERATOR_TOKENS: "operator-token",
};
// wrangler checks `[secrets] required` against process.env (or .dev.vars) once per test file;
// giving it the test values keeps it from warning 53 times about secrets the pool does bind.
for (const [name, value] of Object.entries(TEST_SECRETS)) process.env[name] ??= value;

const SECRET_GRANTS = [
  "dev:PAYMENTS_KEY,WEBHOOK_SECRET",
  "steps-attempts:PAYMENTS_KEY",
  "steps-chaining:PAYMENTS_KEY",
  "steps-claims:PAYMENTS_KEY",
  "steps-destination-key:PAYMENTS_KEY",
  "steps-gateway:PAYMENTS_KEY",
  "steps-heartbeat:PAYMENTS_KEY",
  "steps-in-progress:PAYMENTS_KEY",
  "steps-reaper:PAYMENTS_KEY",
  "steps-retention-other:PAYMENTS_KEY",
  "steps-reaper-backoff:PAYMENTS_KEY",
  "steps-reaper-bounds:PAYMENTS_KEY",
  "steps-redelivery:PAYMENTS_KEY",
  "steps-request-build:PAYMENTS_KEY",
  "steps-retry-after:PAYMENTS_KEY",
  "steps-secrets-hardening:PAYMENTS_KEY,TAG_SECRET",
];

/**
 * The suite runs on two shards (SPEC section 13). Every file runs in project `shard-0`, with
 * wrangler.toml's placement (`dev` on shard 0, `other` on shard 1). The engine's core runs again
 * in project `shard-1` — triggers, hooks, schedules, steps (claims, Gateway, chaining, cancel,
 * operator actions, the reaper, redelivery, chaos, the retention guard, DELAY, WAIT_FOR_EVENT), events in the history, the
 * Idempotency-Key middleware, the event stream, the workflows routes, erasure — with every
 * workspace placed on shard 1 (`*:1`) and the test code's own `env.DB` (what it seeds and reads)
 * aliased to shard 1's database (`TEST_DB_IS_SHARD`, test/apply-migrations.ts). The Worker's own
 * invocations (SELF.fetch, real queue deliveries) never see that alias: they get the Worker's env,
 * where `DB` is shard 0, so an engine path that ignored the placement would write where the test
 * does not look. (A test that hands its `env` to a handler directly hands the alias.)
 */
const SHARD_1_FILES = [
  ...["trigger", "hooks", "start", "identity", "schedule", "stream"].map((name) => `test/ingress/${name}.test.ts`),
  ...["claims", "gateway", "chaining", "cancel", "operator", "reaper", "redelivery", "destination-key", "e2e-queue", "chaos"].map(
    (name) => `test/steps/${name}.test.ts`,
  ),
  "test/steps/retention-guard.test.ts",
  "test/steps/delay.test.ts",
  "test/steps/wait-for-event.test.ts",
  "test/steps/wait-trace.test.ts",
  "test/steps/map.test.ts",
  "test/steps/compensation.test.ts",
  "test/steps/compensation-parked.test.ts",
  "test/steps/compensation-operator.test.ts",
  "test/steps/compensation-connector.test.ts",
  "test/steps/compensation-map.test.ts",
  "test/history/events.test.ts",
  "test/http/idempotency/middleware.test.ts",
  "test/http/execution-events.test.ts",
  "test/http/routes/workflows.test.ts",
  "test/history/erase.test.ts",
  "test/search/identity.test.ts",
  "test/search/history.test.ts",
  "test/shards/*.test.ts",
  "test/flow/*.test.ts",
];

export default defineConfig(async () => {
  const migrations = await readD1Migrations("./migrations");
  // migrations/ applied once per run, to a template every test file starts from (test/apply-migrations.ts).
  const template = await buildD1Template("./migrations");
  const project = (name: string, include: string[], bindings: Record<string, string> = {}) => ({
    plugins: [
      cloudflareTest({
        // The Worker under D1's production limits (test/worker-entry.ts wraps src/index.ts).
        main: "./test/worker-entry.ts",
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            TEST_D1_TEMPLATE: template,
            // Scenario, workflow and connector files for the scenario runner (workerd has no filesystem).
            TEST_WORKFLOW_FILES: loadWorkflowFiles(process.cwd()),
            SCENARIO_VERBOSE: process.env.SCENARIO_VERBOSE ?? "",
            ...TEST_SECRETS,
            // Step chaining is on in wrangler.toml. The unit tests run steps through their harness (its
            // clock, destination and queue), so a route's inline run with the production runtime is off
            // here; a test opts in with `harness(…, { chain })` or `CHAIN_STEPS: "on"` in the env it
            // passes. The e2e runs the Worker as configured: chaining on.
            CHAIN_STEPS: "off",
            // wrangler.toml grants the Worker secrets to `dev` only; the step tests run in their own
            // workspaces and are granted the canary explicitly (a new test workspace that sends a
            // Worker secret must be added here: ungranted secrets are invisible, by design).
            SECRET_GRANTS: SECRET_GRANTS.join(";"),
            // The model test's size (test/model, docs/testing.md): `npm run test:model -- --runs N --seed S --ops L`.
            MODEL_RUNS: process.env.MODEL_RUNS ?? "",
            MODEL_SEED: process.env.MODEL_SEED ?? "",
            MODEL_OPS: process.env.MODEL_OPS ?? "",
            MODEL_VERBOSE: process.env.MODEL_VERBOSE ?? "",
            MODEL_KEEP_GOING: process.env.MODEL_KEEP_GOING ?? "",
            MODEL_SHRINK: process.env.MODEL_SHRINK ?? "",
            ...bindings,
          },
        },
      }),
    ],
    test: {
      name,
      setupFiles: ["./test/apply-migrations.ts"],
      // The files that reach only src/, vitest and npm packages skip that setup (test/pure-files.mjs).
      provide: { pureTestFiles: pureTestFiles(process.cwd(), include) },
      // The Worker's npm dependencies pre-bundled, one module each. Every test file loads the Worker's whole
      // module graph afresh, in its own workerd (the pool imports `main` with cloudflare:test): zod and hono
      // are 120 of its 330 modules, and loading the graph, not the tests, was most of each file's time.
      deps: { optimizer: { ssr: { enabled: true, include: ["hono", "hono/factory", "zod", "jsonata"] } } },
      include,
      testTimeout: 20_000,
    },
  });
  return {
    test: {
      // One test file per core at a time (vitest's default is one fewer than the cores: a single file at a time on
      // the 2-core machine). A file alternates between Node (vite sends every module over the pool's socket) and
      // its workerd (evaluates it): one file keeps about one core busy. docs/testing.md "What a test file costs".
      maxWorkers: "100%",
      projects: [
        project("shard-0", ["test/**/*.test.ts"]),
        project("shard-1", SHARD_1_FILES, { WORKSPACE_SHARDS: "*:1", TEST_DB_IS_SHARD: "1" }),
      ],
    },
  };
});
