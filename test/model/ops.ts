/**
 * The model test's operations: plain data, generated from a seed, shrunk by dropping operations.
 * An operation names what it acts on by small indices (a workspace, an order, the k-th execution
 * the model knows of), resolved against the state when it runs, so any subsequence of a run is
 * still a valid run (what shrinking needs).
 */
import { withParkOps, type ParkOp } from "./ops-comp-operator";
import { withCompOps, type CompOp } from "./ops-compensation";
import { withFlowOps, type FlowOp } from "./ops-flow";
import { withKeyOps, type KeysOp } from "./ops-keys";
import { withMapOps, type MapOp } from "./ops-map";

/** Workspaces of a run: 0 and 1 share shard 0, 2 is on shard 1. */
export const WORKSPACES = 3;
export const WORKFLOWS = ["charge", "waitOne", "waitAll"] as const;
export type WorkflowName = (typeof WORKFLOWS)[number];

/**
 * Virtual time steps: around the windows (1m), the retention and tombstone expiry (2m each), the
 * wait timeout (5m), the event buffer (2m) and history (5m).
 */
export const ADVANCES_MS = [1_000, 5_000, 30_000, 61_000, 150_000, 330_000, 3_600_000, 86_400_000, 8 * 86_400_000] as const;

export type Op =
  /** Flow control's operations (./ops-flow.ts). */
  | FlowOp
  /** The key memory's operations (./ops-keys.ts). */
  | KeysOp
  /** MAP's operations (./ops-map.ts). */
  | MapOp
  /** Compensation's operations (./ops-compensation.ts). */
  | CompOp
  /** The compensation operator's operations and the parked-step variant (./ops-comp-operator.ts). */
  | ParkOp
  /**
   * A trigger: `order` null sends no order (an absent field); `client` sends `?clientIdempotencyId=`;
   * `again` re-sends the last payload of this workspace and workflow. `follow` (a wait workflow):
   * the order is the one this workspace's last wait trigger named, so two waits (one per customer)
   * wait for the same event.
   */
  | {
      t: "trigger";
      ws: number;
      wf: WorkflowName;
      order: number | null;
      customer: number;
      client: number | null;
      again: boolean;
      follow?: boolean;
    }
  /**
   * POST /v1/events `paid` for order `match`; `id` null: deduplicated by content. `follow`: for the
   * order this workspace's last wait trigger named (the event its waits wait for), not `match`.
   */
  | { t: "event"; ws: number; match: number; id: number | null; follow?: boolean }
  | { t: "advance"; ms: number }
  /** Deliver the due messages (`all`), or the first due one. */
  | { t: "deliver"; all: boolean }
  /** Lose the first due message (the reaper re-sends its step). */
  | { t: "drop" }
  /** Deliver the first due message to a worker that dies after the step's side effect, before its settle (its lease is lost). */
  | { t: "crash" }
  /** The next charge is made by the destination, but its answer is a 500 (the retry must replay it). */
  | { t: "fault" }
  /** A cron tick: every periodic task on every shard (the history sweep among them). */
  | { t: "cron" }
  /**
   * DELETE /v1/executions/{id} of the ws's `pick`-th execution; `taker`: of an execution that took an
   * event, one that took a broadcast another execution also took first (erasure × events).
   */
  | { t: "erase"; ws: number; pick: number; taker?: boolean }
  | { t: "cancel"; ws: number; pick: number; release: boolean }
  | { t: "startOver"; ws: number; pick: number }
  | { t: "retry"; ws: number; pick: number }
  /** Past every timeout, cron and the queue until nothing is left to run: then nothing may be stuck. */
  | { t: "settle" };

/** mulberry32: a small seeded generator. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The chance that an operation acts in the workspace the last one did. */
const STAY = 0.6;

export function generate(seed: number, length: number): Op[] {
  const r = prng(seed);
  // The operands that aim operations at each other (`follow`, `taker`) come from a stream of their
  // own, so a seed's operations keep the kinds and operands they had before those were added.
  const aim = prng(seed ^ 0x5bd1e995);
  const int = (n: number) => Math.floor(r() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const ops: Op[] = [];
  const table: Array<[number, () => Op]> = [
    [
      26,
      () => ({
        t: "trigger",
        ws: int(WORKSPACES),
        wf: pick(WORKFLOWS),
        order: r() < 0.06 ? null : int(3),
        customer: int(2),
        client: r() < 0.15 ? int(2) : null,
        again: r() < 0.2,
        follow: aim() < 0.6,
      }),
    ],
    [14, () => ({ t: "event", ws: int(WORKSPACES), match: int(3), id: r() < 0.5 ? int(4) : null, follow: aim() < 0.8 })],
    [12, () => ({ t: "advance", ms: pick(ADVANCES_MS) })],
    [20, () => ({ t: "deliver", all: r() < 0.7 })],
    [2, () => ({ t: "drop" })],
    [2, () => ({ t: "crash" })],
    [2, () => ({ t: "fault" })],
    [8, () => ({ t: "cron" })],
    [5, () => ({ t: "erase", ws: int(WORKSPACES), pick: int(8), taker: aim() < 0.8 })],
    [4, () => ({ t: "cancel", ws: int(WORKSPACES), pick: int(8), release: r() < 0.5 })],
    [3, () => ({ t: "startOver", ws: int(WORKSPACES), pick: int(8) })],
    [2, () => ({ t: "retry", ws: int(WORKSPACES), pick: int(8) })],
  ];
  const total = table.reduce((s, [w]) => s + w, 0);
  let lastWs: number | null = null;
  for (let i = 0; i < length; i++) {
    let x = r() * total;
    for (const [w, make] of table) {
      x -= w;
      if (x < 0) {
        const op = make();
        // Operations stay in one workspace a while (so they meet: two waits, their event, an erasure).
        if ("ws" in op) {
          if (lastWs !== null && aim() < STAY) op.ws = lastWs;
          lastWs = op.ws;
        }
        ops.push(op);
        break;
      }
    }
  }
  ops.push({ t: "settle" });
  // Outermost: the other streams keep the operations they drew before compensation was added.
  const inner = withMapOps(seed, withFlowOps(seed, withKeyOps(seed, ops, WORKSPACES), WORKSPACES), WORKSPACES);
  const comp = withCompOps(seed, inner, WORKSPACES);
  return withParkOps(seed, comp, WORKSPACES);
}

/** One line per operation, for a failing run's report. */
export function describeOps(ops: readonly Op[]): string {
  return ops.map((op, i) => `${String(i).padStart(3)}  ${JSON.stringify(op)}`).join("\n");
}

/**
 * The smallest subsequence that still fails (greedy: drop halves, quarters, … single operations,
 * keeping each removal that still fails), within `budget` replays.
 */
export async function shrink(ops: Op[], fails: (ops: Op[]) => Promise<boolean>, budget = 120): Promise<Op[]> {
  let current = ops;
  let replays = 0;
  for (let size = Math.max(1, Math.floor(current.length / 2)); size >= 1; size = size === 1 ? 0 : Math.max(1, Math.floor(size / 2))) {
    let i = 0;
    while (i < current.length && replays < budget) {
      const candidate = [...current.slice(0, i), ...current.slice(i + size)];
      replays++;
      if (candidate.length > 0 && (await fails(candidate))) current = candidate;
      else i += size;
    }
    if (replays >= budget) break;
  }
  return current;
}
