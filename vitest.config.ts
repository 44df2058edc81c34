import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

/** The test values of the Worker secrets wrangler.toml requires (never real keys). */
const TEST_SECRETS = {
  // A canary secret: tests scan stored rows, logs and responses for it.
  PAYMENTS_KEY: "sk_test_canary_4f1d9a",
  WEBHOOK_SECRET: "whsec_test_canary_77ab",
  // 32 fixed test bytes (base64) sealing workspace secrets.
  SECRETS_MASTER_KEY: "dGVzdC1vbmx5LW1hc3Rlci1rZXktMzItYnl0ZXMhISE=",
};
// wrangler checks `[secrets] required` against process.env (or .dev.vars) once per test file;
// giving it the test values keeps it from warning 53 times about secrets the pool does bind.
for (const [name, value] of Object.entries(TEST_SECRETS)) process.env[name] ??= value;

export default defineConfig(async () => {
  const migrations = await readD1Migrations("./migrations");
  return {
    plugins: [
      cloudflareTest({
        // The Worker under D1's production limits (test/worker-entry.ts wraps src/index.ts).
        main: "./test/worker-entry.ts",
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            ...TEST_SECRETS,
            // Step chaining is on in wrangler.toml. The unit tests run steps through their harness (its
            // clock, destination and queue), so a route's inline run with the production runtime is off
            // here; a test opts in with `harness(…, { chain })` or `CHAIN_STEPS: "on"` in the env it
            // passes. The e2e runs the Worker as configured: chaining on.
            CHAIN_STEPS: "off",
            // wrangler.toml grants the Worker secrets to `dev` only; the step tests run in their own
            // workspaces and are granted the canary explicitly (a new test workspace that sends a
            // Worker secret must be added here: ungranted secrets are invisible, by design).
            SECRET_GRANTS: [
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
            ].join(";"),
          },
        },
      }),
    ],
    test: {
      setupFiles: ["./test/apply-migrations.ts"],
      include: ["test/**/*.test.ts"],
      testTimeout: 20_000,
    },
  };
});
