// A Worker served from a snapshot: bundled once (`wrangler deploy --dry-run --outdir`) and run with
// `no_bundle`, so edits to the working tree during a long bench cannot reload the Worker and reset
// its isolate mid-measurement (the approach of bench/compare/run.mjs, for benches that run minutes).
import { readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { runWrangler } from "../../scripts/lib/wrangler-dev.mjs";

/**
 * Bundle the Worker of `config` (with `main` instead of its own entry, when given) into `dir` and
 * write a config that serves that bundle: `main` → the bundle, `no_bundle = true`, and
 * `migrations_dir` and the assets `directory` made absolute (the config lives in `dir`). Returns
 * the path of that config.
 */
export async function snapshotConfig({ dir, logFile, name, config, main }) {
  const source = readFileSync(config, "utf8");
  const configDir = dirname(config);
  const entry = main ?? resolve(configDir, /^main\s*=\s*"([^"]+)"/m.exec(source)[1]);
  const buildConfig = join(dir, `${name}.build.wrangler.toml`);
  writeFileSync(
    buildConfig,
    source
      .replace(/^main\s*=.*$/m, `main = ${JSON.stringify(entry)}`)
      .replace(/^migrations_dir\s*=\s*"([^"]+)"/gm, (_, d) => `migrations_dir = ${JSON.stringify(resolve(configDir, d))}`)
      .replace(/^directory\s*=\s*"([^"]+)"/m, (_, d) => `directory = ${JSON.stringify(resolve(configDir, d))}`),
  );
  const outdir = join(dir, `${name}-build`);
  await runWrangler(["deploy", "--dry-run", "--outdir", outdir, "-c", buildConfig], { logFile });
  const bundle = join(outdir, basename(entry).replace(/\.ts$/, ".js"));
  const devConfig = join(dir, `${name}.wrangler.toml`);
  writeFileSync(
    devConfig,
    readFileSync(buildConfig, "utf8").replace(/^main\s*=.*$/m, `main = ${JSON.stringify(bundle)}\nno_bundle = true`),
  );
  return devConfig;
}
