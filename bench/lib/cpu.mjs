/**
 * CPU time of a process tree (Linux, from /proc): where a bench's CPU goes per operation, so a
 * table can say which process is the ceiling. User + system time of the root and every
 * descendant (a `wrangler dev` and the workerd processes it runs), in milliseconds; null where
 * /proc cannot be read (not Linux).
 */
import { readdirSync, readFileSync } from "node:fs";

/** Linux's USER_HZ: the unit of utime and stime in /proc/<pid>/stat (100 on every mainstream kernel). */
const MS_PER_TICK = 10;

function readStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // After "pid (comm) ": state ppid … utime (14th field) stime (15th).
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return null;
  }
}

/** Every process of the trees rooted at `roots` (name → pid), with its CPU ticks: name → [{ pid, ticks }]; null off Linux. */
export function treeProcesses(roots) {
  let pids;
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return null;
  }
  const stats = new Map();
  for (const pid of pids) {
    const stat = readStat(pid);
    if (stat) stats.set(Number(pid), stat);
  }
  const rootOf = (pid) => {
    for (let p = pid, depth = 0; p > 1 && depth < 16; p = stats.get(p)?.ppid ?? 0, depth++) {
      for (const [name, root] of Object.entries(roots)) if (p === root) return name;
    }
    return null;
  };
  const trees = Object.fromEntries(Object.keys(roots).map((name) => [name, []]));
  for (const [pid, stat] of stats) {
    const name = rootOf(pid);
    if (name) trees[name].push({ pid, ticks: stat.ticks });
  }
  return trees;
}

/** CPU milliseconds so far of each tree rooted at `roots` (name → pid), or null off Linux. */
export function treeCpuMs(roots) {
  const trees = treeProcesses(roots);
  if (!trees) return null;
  return Object.fromEntries(
    Object.entries(trees).map(([name, processes]) => [name, processes.reduce((ms, p) => ms + p.ticks * MS_PER_TICK, 0)]),
  );
}
