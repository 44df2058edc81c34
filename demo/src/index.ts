/** The demo destinations Worker (demo/wrangler.toml). */
import { createDemoApp } from "./app";
import type { DemoEnv } from "./env";

const app = createDemoApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<DemoEnv>;
