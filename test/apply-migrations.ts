import { applyD1Migrations, env } from "cloudflare:test";
import { limitedD1 } from "./helpers/d1-limits";

// Storage is isolated per test file; migrations are applied once per file.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);

// Every statement a test runs through `env.DB` — its own or the engine's, when a test hands `env`
// to a handler directly — is held to D1's production limits (SPEC section 11). The Worker's own
// invocations (SELF.fetch, queue, cron) are wrapped again per invocation by test/worker-entry.ts.
env.DB = limitedD1(env.DB);
