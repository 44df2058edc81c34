/**
 * The workflow shape the benches and the e2e stories build again and again: an ENTRY_POINT that
 * deduplicates on `order.id`, one Gateway step, and optionally a TRANSFORM after it. One builder
 * instead of a copy per bench and story (bench/steps.mjs, bench/shards.mjs, scripts/e2e.mjs,
 * scripts/lib/browser-stories.mjs; new benches such as bench/map.mjs and bench/flow.mjs too).
 *
 *   orderWorkflow({ id, gateway: demoCharge(demoUrl) })                       // entry → charge
 *   orderWorkflow({ id, gateway: demoCharge(demoUrl), then: { id: "done", output: { … } } })
 *   orderWorkflow({ id, gatewayId: "label", gateway: { method: "POST", url, … } })
 */

/** `{ id, vertices, edges }`: received → `gatewayId` (default "charge") → `then.id` when `then` is given. */
export function orderWorkflow({ id, gatewayId = "charge", gateway, then }) {
  const vertices = [
    { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
    { id: gatewayId, type: "GATEWAY", config: gateway },
  ];
  const edges = [{ from: "received", to: gatewayId }];
  if (then) {
    vertices.push({ id: then.id, type: "TRANSFORM", config: { output: then.output } });
    edges.push({ from: gatewayId, to: then.id });
  }
  return { id, vertices, edges };
}

/**
 * The charge the benches send to the demo payments API at `demoUrl`: POST /payments/charges with a key
 * made by `$idempotencyKey('charge', order id)`, the Worker secret PAYMENTS_KEY, the order and its
 * amount. `more` adds to (or replaces) members of the step's config (`timeoutMs`, `retry`, …).
 */
export function demoCharge(demoUrl, more = {}) {
  return {
    method: "POST",
    url: `${demoUrl}/payments/charges`,
    headers: {
      "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)",
      Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}",
      "Content-Type": "application/json",
    },
    body: "= { 'order': payload.order.id, 'amount': payload.order.total }",
    ...more,
  };
}
