import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

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
            // A canary secret: tests scan stored rows, logs and responses for it.
            PAYMENTS_KEY: "sk_test_canary_4f1d9a",
            WEBHOOK_SECRET: "whsec_test_canary_77ab",
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
