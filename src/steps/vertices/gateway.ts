/** GATEWAY: one HTTP call with a stable destination key (src/steps/gateway), under a heartbeat; retried by its policy. */
import { DEFAULT_RETRY, type GatewayVertex } from "../../definitions/schema";
import { burntKeyReason, parseKeySends, persistIdempotencyKey, recordKeySend } from "../../ledger";
import { secretLookup } from "../../secrets/resolve";
import { parseSealedSecrets } from "../../secrets/store";
import { mustVerify, runGateway } from "../gateway";
import { withHeartbeat } from "../heartbeat";
import { keyForgetHorizonMs, keyMemoryBucket } from "../../keys/memory";
import { recallKeySend } from "../../keys/recall";
import { withPermit } from "../permit-gate";
import type { VertexKind } from "./kind";
import { notifyRetentionRefused } from "../../notifications";

export const gatewayKind: VertexKind<GatewayVertex> = {
  execute: (vertex, { rt, run, claimed, fence, leaseMs, context }) =>
    withHeartbeat(rt, fence, leaseMs, () =>
      // Through a limited connector: the attempt's permit first (src/steps/permit-gate.ts); waiting is not an attempt.
      withPermit(rt, run, fence, vertex, vertex.config.retry ?? DEFAULT_RETRY, () =>
        runGateway(vertex, context, {
          env: rt.env,
          secret: secretLookup({
            workspace: run.workspace,
            stored: parseSealedSecrets(run.sealedSecretsJson),
            env: rt.env as unknown as Record<string, unknown>,
          }),
          fetch: rt.fetch,
          now: rt.now,
          persistedKey: claimed.idempotencyKey,
          keySends: parseKeySends(run.keySendsJson),
          // A claimed step exists, so this is set; 0 would only make the guard refuse sooner.
          stepCreatedAt: run.stepCreatedAt ?? 0,
          reattempt: mustVerify({ attempt: claimed.attempt, startedOverFrom: run.startedOverFrom }),
          persistKey: (key, destination, guarded) => persistIdempotencyKey(rt.db, fence, key, rt.now(), destination, guarded),
          explainUnpersisted: (key) => burntKeyReason(rt.db, run.workspace, key),
          recordSend: (destination, at, guarded) => recordKeySend(rt.db, fence, at, destination, guarded),
          onRetentionRefused: () => notifyRetentionRefused(rt, fence.executionId, vertex.id),
          recallColdSend: (key, destination, hot) =>
            recallKeySend(
              {
                db: rt.db,
                bucket: keyMemoryBucket(rt.env),
                workspace: run.workspace,
                horizonMs: keyForgetHorizonMs(rt.env),
                now: rt.now,
              },
              key,
              destination,
              hot,
              run.stepCreatedAt ?? 0,
            ),
        }),
      ),
    ),
  // Only side-effecting calls meet transient failures.
  retryPolicy: (vertex) => vertex.config.retry ?? DEFAULT_RETRY,
};
