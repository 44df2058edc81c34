/**
 * The vertex types without a module of their own to wire: TRANSFORM (an expression, no side
 * effect), DELAY (src/steps/delay.ts), WAIT_FOR_EVENT (src/steps/wait-for-event.ts) and
 * ENTRY_POINT (written COMPLETED by ingress: a message for it can only be a stray). None is retried:
 * the same inputs give the same answer.
 */
import type { DelayVertex, EntryPointVertex, TransformVertex, WaitForEventVertex } from "../../definitions/schema";
import { runDelay } from "../delay";
import { runTransform } from "../transform";
import { runWaitForEvent } from "../wait-for-event";
import { NEVER_RETRIED, type VertexKind } from "./kind";

export const transformKind: VertexKind<TransformVertex> = {
  execute: (vertex, { context }) => runTransform(vertex, context),
  retryPolicy: NEVER_RETRIED,
};

export const delayKind: VertexKind<DelayVertex> = {
  execute: (vertex, { rt, run, context }) =>
    runDelay(vertex, context, { wakeAt: run.wakeAt, stepCreatedAt: run.stepCreatedAt, now: rt.now() }),
  retryPolicy: NEVER_RETRIED,
};

export const waitForEventKind: VertexKind<WaitForEventVertex> = {
  execute: (vertex, { rt, run, claimed, fence, context }) =>
    runWaitForEvent(vertex, context, { db: rt.db, fence, workspace: run.workspace, retryBase: claimed.retryBase, now: rt.now() }),
  retryPolicy: NEVER_RETRIED,
};

export const entryPointKind: VertexKind<EntryPointVertex> = {
  // Its output is the payload.
  execute: async (_vertex, { context }) => ({ kind: "completed", output: context.payload }),
  retryPolicy: NEVER_RETRIED,
};
