/**
 * Pin process trees to CPUs (Linux, `taskset`): BENCH_PIN=1 gives the system under measurement a
 * core of its own and puts everything else (the destination, the driver, the idle other system)
 * on the rest, so a ratio compares the two systems rather than their shares of the same cores.
 */
import { execFileSync } from "node:child_process";
import { cpus } from "node:os";
import { treeProcesses } from "./cpu.mjs";

/**
 * Every thread of every process in the trees rooted at `roots` (name → pid) onto the CPUs that
 * `cpuListOf(name)` names (taskset syntax: "0", "1-3"). One listing for all trees, so a process
 * belongs to its nearest root (the Workers are children of the driver).
 */
export function pinTrees(roots, cpuListOf) {
  const trees = treeProcesses(roots);
  if (!trees) throw new Error("BENCH_PIN needs Linux's /proc");
  for (const [name, processes] of Object.entries(trees)) {
    for (const { pid } of processes) {
      try {
        execFileSync("taskset", ["-a", "-cp", cpuListOf(name), String(pid)], { stdio: "ignore" });
      } catch {
        // A process that exited between the listing and the call.
      }
    }
  }
}

/** The tree named "system" onto CPU 0, every other tree in `roots` onto the remaining CPUs. */
export function pinSystem(roots) {
  const count = cpus().length;
  if (count < 2) throw new Error("BENCH_PIN needs at least 2 CPUs");
  const rest = count === 2 ? "1" : `1-${count - 1}`;
  pinTrees(roots, (name) => (name === "system" ? "0" : rest));
}
