/**
 * The permit around one Gateway attempt (SPEC section 17, docs/connectors.md "Limits"): asked before
 * anything of the attempt is sent (a verify probe and its write share it), given back after the
 * call — with the shared pause of a 429/503 with `Retry-After` — and the oldest waiter it frees
 * woken (its message sent after the release committed). A refusal whose token comes within a second
 * (`shortWaitMs`) asks again after that wait; otherwise it is the `awaiting_permit` outcome:
 * the step parks, and it is not an attempt (src/steps/run-step.ts). An inline step (no connector)
 * is not limited and costs nothing here. A throw in between (a crash) keeps the permit until the
 * step's lease expires: the permit's lease is the step's. A MAP's item asks the same way (src/steps/map-item.ts):
 * `fence` is then its row's (its row key), and the permit's lease is the item's.
 */
import type { GatewayVertex, RetryPolicy } from "../definitions/schema";
import { askPermit, releasePermit } from "../ledger/connector-permits";
import { mustAsk } from "../ledger/limited-connectors";
import type { Fence } from "../ledger";
import type { RunOutcome } from "./outcome";
import { sendItemMessages, sendStepMessages } from "./dispatch";
import { retryAfterCeilingMs } from "./retry-policy";
import type { StepRuntime } from "./runtime";
import { limitedConnectorOf, MAX_SHORT_WAITS, pauseOf, permitWaitOf, permitWaitUntil, refusalText, shortWaitMs } from "../flow/permits";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function withPermit(
  rt: StepRuntime,
  /** The run's workspace, and the limited connectors its claim read (absent: ask). */
  scope: { workspace: string; limitedConnectorsJson?: string | null },
  fence: Fence,
  vertex: GatewayVertex,
  policy: RetryPolicy,
  work: () => Promise<RunOutcome>,
): Promise<RunOutcome> {
  const { workspace, limitedConnectorsJson } = scope;
  const connector = limitedConnectorOf(vertex);
  if (connector === null) return work();
  // The claim read the workspace's limited connectors (src/ledger/step-claim.ts): not among them, no ask.
  if (!mustAsk(limitedConnectorsJson, connector)) return work();
  let asked = rt.now();
  let grant = await askPermit(rt.db, workspace, connector, fence, asked);
  // The bucket's token (and those of the waiters ahead) due within a second, a slot free: wait for it
  // here rather than park (a queue delay is whole seconds) — the step stays claimed under its lease.
  for (let i = 0; i < MAX_SHORT_WAITS && grant.kind === "refused"; i++) {
    const waitMs = shortWaitMs(grant);
    if (waitMs === null) break;
    await (rt.sleep ?? sleep)(waitMs);
    asked = rt.now();
    grant = await askPermit(rt.db, workspace, connector, fence, asked);
  }
  if (grant.kind === "unlimited") return work();
  if (grant.kind === "refused") {
    const until = permitWaitUntil(grant, asked);
    return {
      kind: "awaiting_permit",
      until,
      detail: `waiting for a permit of ${connector}: ${refusalText(grant)}`,
      wait: permitWaitOf(connector, grant, until),
    };
  }
  const outcome = await work();
  const now = rt.now();
  const pause = pauseOf(outcome, now, retryAfterCeilingMs(policy));
  const woken = await releasePermit(rt.db, workspace, connector, fence, now, pause ? { pause } : {});
  // The woken waiter is a step or a MAP's item (the scope's line holds both): each its own message.
  const items = woken.flatMap((w) => (w.item === undefined ? [] : [{ executionId: w.executionId, vertexId: w.vertexId, item: w.item }]));
  if (items.length > 0) await sendItemMessages(rt.queue, items, 0, "permit");
  if (items.length < woken.length)
    await sendStepMessages(
      rt.queue,
      woken.filter((w) => w.item === undefined),
      0,
      "permit",
    );
  return outcome;
}
