/** What the connector tests share. */
import { unique } from "../steps/helpers";

/** entry → charge through `connector` (POST /charges, keyed on the order id); `step` overrides the charge's config. */
export function charging(connector: string, step: Record<string, unknown> = {}, id = unique("wf")) {
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          connector,
          operation: "charge",
          method: "POST",
          path: "/charges",
          keyFields: { order: "= payload.order.id" },
          body: "= { 'order': payload.order.id }",
          ...step,
        },
      },
    ],
    edges: [{ from: "received", to: "charge" }],
  };
}
