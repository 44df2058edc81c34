// Shared by scripts/validate.mjs and scripts/schema.mjs: bundle a TypeScript entry of src/ with
// esbuild, in memory, and import it. (Our imports are extensionless, so Node's type stripping
// cannot load src/ directly.)
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export async function importTs(relativeEntry) {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const result = await build({
    entryPoints: [relativeEntry],
    absWorkingDir: root,
    bundle: true,
    write: false,
    format: "esm",
    platform: "node",
    target: "node20",
    logLevel: "error",
  });
  const code = result.outputFiles[0].text;
  return import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
}
