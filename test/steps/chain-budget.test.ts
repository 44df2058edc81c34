/**
 * The chaining budget at its cap with a full queue batch (issue 26, finding 10): the batch's own
 * messages — their claims, heartbeats and settles — run beside the chained steps and are never
 * offered, so the budget holds their queries back (`holdForMessages`). Every query here is a real
 * statement sent to D1 through the budget's database and counted by the counting wrapper.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { WorkflowDefinition } from "../../src/definitions/schema";
import { ChainBudget, chainConfigFromEnv, QUERIES_PER_STEP, queriesPerMessage, settleQueries } from "../../src/steps/chain";
import { holdForMessages } from "../../src/steps/consumer";
import { DEFAULT_LEASE_MS } from "../../src/steps/runtime";
import { countingD1 } from "../helpers/counting-d1";

/** Send `n` real statements through `db` (one batch). */
async function send(db: D1Database, n: number): Promise<void> {
  if (n > 0) await db.batch(Array.from({ length: n }, () => db.prepare("SELECT 1")));
}

const definition = WorkflowDefinition.parse({
  id: "budget",
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: {} },
    { id: "a", type: "TRANSFORM", config: { output: { a: 1 } } },
    { id: "b", type: "TRANSFORM", config: { output: { b: 1 } } },
  ],
  edges: [
    { from: "received", to: "a" },
    { from: "a", to: "b" },
  ],
});

describe("ChainBudget at CHAIN_MAX_QUERIES' cap with a batch of ten messages", () => {
  it("holds back each message's claim, heartbeats and settle: the invocation stays at or under 1,000 queries", async () => {
    const config = chainConfigFromEnv({ CHAIN_MAX_QUERIES: "5000" })!;
    expect(config.maxQueries).toBe(900); // the cap
    const counting = countingD1(env.DB);
    const budget = new ChainBudget(config, counting.db, Date.now() + 3_600_000);
    // The queue consumer's step lease: a heartbeat every 10 s, so a 300 s call heartbeats 30 times.
    const rt = { leaseMs: DEFAULT_LEASE_MS, heartbeatEveryMs: undefined };
    const heartbeats = 300_000 / (DEFAULT_LEASE_MS / 3);
    expect(queriesPerMessage(DEFAULT_LEASE_MS / 3)).toBe(QUERIES_PER_STEP + heartbeats);
    const holds = holdForMessages(budget, 10, rt);

    // The ten claims (a claim batch of eight statements each), then every chained step the budget
    // offers, each sending all it was offered (the worst case), one after another.
    for (let m = 0; m < 10; m++) await send(budget.db, 8);
    let chained = 0;
    for (let offer = budget.offer(definition, ["b"], Date.now()); offer; offer = budget.offer(definition, ["b"], Date.now())) {
      await send(budget.db, offer.queries);
      budget.ran(offer);
      chained++;
    }
    // Then each message's own call heartbeats through the longest timeout, and it settles.
    for (let m = 0; m < 10; m++) {
      await send(budget.db, heartbeats + (QUERIES_PER_STEP - 8));
      holds[m]?.release();
    }
    console.log(`a batch of ten at the cap: ${counting.statements()} queries, ${chained} chained steps`);
    expect(chained).toBeGreaterThan(0);
    expect(counting.statements()).toBe(budget.queries());
    expect(counting.statements()).toBeLessThanOrEqual(1000);
  });
});

describe("a full batch of ten at the default CHAIN_MAX_QUERIES", () => {
  it("chains once its messages settle: each message then holds back only its settle", async () => {
    const config = chainConfigFromEnv({})!;
    expect(config.maxQueries).toBe(500); // wrangler.toml's default
    const counting = countingD1(env.DB);
    const budget = new ChainBudget(config, counting.db, Date.now() + 3_600_000);
    const holds = holdForMessages(budget, 10, { leaseMs: DEFAULT_LEASE_MS, heartbeatEveryMs: undefined });
    for (let m = 0; m < 10; m++) await send(budget.db, 8); // the ten claims
    // While every message holds a whole step and its heartbeats, nothing fits beside them.
    expect(budget.offer(definition, ["b"], Date.now())).toBeNull();
    // Each message's call returns and it settles (as src/steps/run-step.ts `settle` does).
    for (const hold of holds) hold?.shrinkTo(settleQueries(definition));
    const offer = budget.offer(definition, ["b"], Date.now());
    expect(offer).not.toBeNull();
    for (const hold of holds) {
      await send(budget.db, settleQueries(definition));
      hold?.release();
    }
    await send(budget.db, offer!.queries);
    budget.ran(offer!);
    expect(counting.statements()).toBeLessThanOrEqual(config.maxQueries);
  });
});
