// Formatting bench results and describing the machine they ran on.
import { cpus, loadavg, totalmem } from "node:os";
import { execFileSync } from "node:child_process";

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
  const version = (cmd, args) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } })
        .trim()
        .split("\n")
        .pop();
    } catch {
      return "?";
    }
  };
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "?",
    memoryGiB: (totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    wrangler: version("npx", ["wrangler", "--version"]),
    platform: `${process.platform} ${process.arch}`,
    // Other work on the machine skews every figure: record how busy it was.
    loadAverage1m: loadavg()[0].toFixed(2),
  };
}
