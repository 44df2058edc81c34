// Formatting bench results and describing the machine they ran on.
import { readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../scripts/lib/wrangler-dev.mjs";

export function markdownTable(header, rows) {
  const line = (cells) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

export const fmt = {
  rps: (n) => n.toFixed(0),
  ms: (n) => (Number.isFinite(n) ? n.toFixed(1) : "–"),
  ratio: (n) => (Number.isFinite(n) ? n.toFixed(2) : "–"),
};

export function machine() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "?",
    memoryGiB: (totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    // The installed package's version is what `wrangler --version` prints, without starting it.
    wrangler: JSON.parse(readFileSync(join(ROOT, "node_modules", "wrangler", "package.json"), "utf8")).version,
    platform: `${process.platform} ${process.arch}`,
    // Other work on the machine skews every figure: record how busy it was.
    loadAverage1m: loadavg()[0].toFixed(2),
  };
}
