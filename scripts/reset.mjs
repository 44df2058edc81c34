#!/usr/bin/env node
/**
 * `npm run reset`: wipe the local state of `npm start` (every D1 database under .wrangler/state —
 * each engine shard's and the demo's —, the queues and caches, and the demo's own .wrangler if an
 * older run created one).
 * .dev.vars (your local secrets) is kept. The next `npm start` re-applies every migration.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { ROOT, portInUse } from "./lib/wrangler-dev.mjs";

for (const port of [8787, 8788]) {
  if (await portInUse(port)) {
    process.stderr.write(`npm run reset: port ${port} is in use. Stop \`npm start\` first (Ctrl-C), then reset.\n`);
    process.exit(1);
  }
}
for (const dir of [join(ROOT, ".wrangler", "state"), join(ROOT, "demo", ".wrangler")]) {
  await rm(dir, { recursive: true, force: true });
}
process.stdout.write(
  "local state wiped (.wrangler/state: every shard's database and the demo's). .dev.vars was kept. `npm start` begins from scratch.\n",
);
