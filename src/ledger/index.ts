/**
 * src/ledger: the one owner of idemflow's SQL for executions, steps, schedules and the
 * Idempotency-Key middleware's table. This file is its complete public surface: everything above
 * (HTTP, ingress, steps, benches) imports from here, and receives operations and camelCase
 * records — never a statement, never a row.
 *
 * Conventions, stated once:
 * - Every transition is ONE statement named after it, its precondition in the WHERE clause;
 *   zero rows returned means "not yours", and the operation says what that means.
 * - Parameters are numbered (`?1`, `?2`, …) and each statement documents what it binds; a
 *   fragment shared between statements binds the same numbers wherever it appears (the step
 *   fence is always ?1 execution id, ?2 vertex id, ?3 epoch). No anonymous `?`.
 * - An operation that needs several statements runs them as one labelled batch (./batch.ts):
 *   one round trip, one transaction, results read by label. Work that must share a transaction
 *   is a composite operation here (settle + fan-in + finish is `settleAndDispatch`), never
 *   statements handed out.
 * - `now` is always a parameter, so tests move a clock instead of sleeping.
 */

// Starting executions (the trigger-identity claim and the start batch), and the identity sweep.
export { startExecution } from "./executions";
export {
  WorkflowVersionChanged,
  type ExecutionStatus,
  type IdentityKind,
  type ExecutionRetention,
  type NewExecution,
  type StartMode,
  type StartOutcome,
  type StartPlan,
  type TriggerKind,
} from "./execution-types";
export { identityWalk, sweepExpiredIdentities } from "./identity-sweep";

// A worker's step transitions: the claim (+ context, inputs) and its lease, the key's persistence,
// settle-and-dispatch, and the waits (retry, in-progress re-check, park).
export { claimAndLoad, extendLease, type ClaimAndLoadOptions, type ClaimAndLoadResult, type ClaimedStep, type StepRun } from "./step-claim";
export { loadStepInputs, MAX_STEP_INPUT_BYTES, type StepInputs, type StepInputsBound } from "./step-inputs";
export { persistIdempotencyKey, type PersistedKey } from "./step-key";
export {
  settleAndDispatch,
  type DescendantPlan,
  type InlineCompletion,
  type SettleInput,
  type SettleOutcome,
  type SettleResult,
} from "./step-settle";
export { parkStep, scheduleInProgressRecheck, scheduleRetry, type RetryInput, type ScheduledRetry } from "./step-schedule";
export { IN_PROGRESS_MARK, type StepEventType } from "./step-events";
export type { Fence, StepRef, StepState } from "./step-sql";

// Every attempt of a step on record (written inside the step batches above; read with the trace).
export {
  MAX_ATTEMPT_ERROR_CHARS,
  MAX_ATTEMPT_SUMMARY_BYTES,
  MAX_ATTEMPTS_KEPT,
  type AttemptOutcome,
  type AttemptRecord,
  type AttemptResponse,
  type RetryDelayReason,
} from "./attempts";

// The chained claim a settle or start batch makes for its caller to run at once.
export { MAX_CHAIN_CANDIDATES, type ChainedClaim, type ChainOffer, type FirstStepKey } from "./chain-claim";

// The destination keys' first sends: what the retention guard reads.
export { guardOf, KEY_MAY_BE_FORGOTTEN_MARK, parseKeySends, recordKeySend, type KeyGuard, type KeySend } from "./key-sends";

// A MAP's items (docs/steps.md "MAP"): the list persisted once, an item's claim, key, heartbeat, retry and
// settle (the step's statements over the item row), the MAP's read of its items, the reaper's twins.
export {
  claimItemAndLoad,
  itemKeyFence,
  itemRowKey,
  MAX_MAP_LIST_BYTES,
  parseRowKey,
  readMapItems,
  redispatchExpiredItemLeases,
  redispatchOverdueItems,
  settleItem,
  startMapItems,
  type ItemClaimResult,
  type ItemFence,
  type ItemRef,
  type ItemRun,
  type ItemSettleOutcome,
  type ItemSettleResult,
  type ItemState,
  type MapItemsRead,
  type StartedItem,
} from "./map-items";
export type { MapPark } from "./map-sql";
// The fenced writes of a claimed work row (a MAP item, an undo step) during its run, over its row-key fence.
export { extendRowLease, persistRowKey, recordRowKeySend, scheduleRowInProgressRecheck, scheduleRowRetry } from "./work-row-writes";
export { MAP_ITEMS_PAGE, readItemsPage, type ItemCountRecord, type ItemEventRecord, type ItemRecord, type ItemsPage } from "./map-trace";
// Compensation's undo steps (docs/steps.md "Compensation").
export {
  burntKeyReason,
  claimUndoAndLoad,
  dispatchedUndos,
  settleUndo,
  undoKeyFence,
  undoRowKey,
  type UndoFence,
  type UndoRef,
  type UndoRun,
  type UndoSettleOutcome,
} from "./undo-steps";
export {
  pendingCompensationFailedNotifications,
  resolveCompensation,
  retryFailedUndo,
  type CompensationResolution,
  type ResolveResult,
  type UndoRetryResult,
} from "./compensation-operator";

// Recovery: the reaper's sweeps and dead letters.
export {
  DEFAULT_MAX_RESEND_WAIT_MS,
  dueParkedSteps,
  recordDeadLetters,
  redispatchExpiredLeases,
  redispatchOverdue,
  type DeadLetter,
} from "./step-recovery";

// Events and the waits that take them (WAIT_FOR_EVENT).
export {
  deliverEvent,
  eraseTakenEvents,
  listOpenWaits,
  registerWait,
  sumEvents,
  type DeliveredEvent,
  type NewEvent,
  type OpenWait,
  type TakenEvent,
  type WaitRegistration,
  type WaitState,
} from "./events";

// The change stream of an execution (GET /v1/executions/{id}/events).
export { eventId, readExecutionChanges, type ChangePosition, type ExecutionChange, type ExecutionChanges } from "./execution-changes";

// Operator actions.
export {
  cancelExecution,
  retryFailedStep,
  type CancelOptions,
  type CancelResult,
  type InFlightStep,
  type OperatorRetryOptions,
  type OperatorRetryResult,
} from "./operator";

// Reads for the API: one execution, the trace (one or a set) and its size, the list, the stream's
// poll, the duplicates stopped per workflow, a workflow's scheduled runs.
export {
  readExecution,
  readExecutionStatus,
  TRACE_VALUE_MAX_BYTES,
  type ExecutionRecord,
  type ExecutionSummaryRecord,
} from "./execution-records";
export {
  readTraceRecords,
  readTraceRecordsForSet,
  TRACE_SET_QUERIES,
  TRACE_WAIT_EVENTS_MAX,
  type DuplicateTriggerRecord,
  type StepEventRecord,
  type StepRecord,
  type TraceRecords,
  type WaitEventRecord,
  type WaitRecord,
} from "./trace-reads";
export { readTraceSizes } from "./trace-sizes";
export { parseUndoRowKey, type UndoRecord } from "./undo-trace";
export { listExecutionRecords, listQuery, type ExecutionListFilter } from "./execution-list";
export { readStreamProgress, type StepProgressRecord, type StreamProgress } from "./stream-progress";
export { sumDuplicatesStopped, type WorkflowStats } from "./workflow-stats";
export { recentScheduleRuns, type ScheduleRunRecord } from "./schedule-runs";

// The search by business id (SPEC section 15): a value's or a key's executions, kept or removed.
export {
  forgetIdentityValues,
  searchExecutions,
  searchKeysQuery,
  searchQuery,
  SEARCH_KEYS_MAX,
  type KeySendRecord,
  type RemovedExecutionRecord,
  type SearchHit,
  type SearchRecords,
  type SearchTerm,
} from "./search";

// Scheduled runs (cron ticks on record).
export {
  claimScheduleRuns,
  finishScheduleRuns,
  recordTick,
  type ClaimedScheduleRun,
  type ScheduleRunOutcome,
  type ScheduleRunStatus,
} from "./schedule-runs";

// The Idempotency-Key middleware's table.
export {
  claimOrLoad,
  completeIfOwned,
  releaseIfOwned,
  sweepIdempotencyKeys,
  type ClaimInput,
  type ClaimOutcome,
  type FenceInput,
  type IdempotencyRow,
  type IdempotencyStatus,
  type StoredResponse,
} from "./idempotency-keys";

// Bounded sweeps' shared loop and report.
export { sweepInBatches, type SweepReport } from "./sweep";

// The database's storage figures (operator only: they describe every workspace).
export {
  D1_MAX_DATABASE_BYTES,
  EXECUTIONS_RECOUNT_MS,
  readStorage,
  recountDue,
  recountExecutions,
  STORAGE_HIGH_FRACTION,
  type StorageFigures,
} from "./storage";

// The hourly rollup of what was stopped (SPEC section 15): rolling closed hours, reading a series.
export {
  DAY_MS,
  HOUR_MS,
  readStatsSeries,
  rollHours,
  ROLLUP_PASSES,
  startRollupTick,
  STATS_RETENTION_MS,
  type HourRange,
  type RollupPass,
  type RollupStart,
  type SeriesQuery,
  type SeriesRecords,
  type StatsBucketRecord,
} from "./stats-rollup";

// History (SPEC section 12): the chains the sweep may remove, their removal, and tombstones.
export {
  claimSweepLease,
  erasedMeanwhile,
  executionRemoved,
  holdChains,
  markTombstoneErased,
  MAX_CHAIN_MEMBERS,
  readTombstone,
  releaseSweepLease,
  removeExecutions,
  selectChainOf,
  selectDueChains,
  sweepDeadLettersOnce,
  sweepEventsOnce,
  sweepKeySendsOnce,
  sweepTombstonesOnce,
  type DueSelection,
  type HeldChain,
  type RemovableExecution,
  type RemovalReason,
  type RemovalReport,
  type Tombstone,
} from "./history";
