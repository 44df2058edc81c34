-- Reuse after failure (SPEC section 3, docs/ingress.md "Reuse after failure"): an entry point with
-- `reusePolicy: "after-failure"` lets a trigger whose identity names a FAILED execution start a
-- new one, in the same claim statement (src/ledger/executions.ts `claimIdentity`).
--
-- execution_identities.previous_execution_id: the FAILED execution the identity named before a
--   claim took it over for reuse (the claim's ON CONFLICT sets it from the row it replaces); the
--   start batch links the new execution to it.
-- executions.previous_execution_id: the FAILED execution this one follows (its trigger's identity
--   passed on); executions.superseded_by: the execution that took this one's identity — from then
--   on this one is neither retried nor started over.
ALTER TABLE execution_identities ADD COLUMN previous_execution_id TEXT;
ALTER TABLE executions ADD COLUMN previous_execution_id TEXT REFERENCES executions(id);
ALTER TABLE executions ADD COLUMN superseded_by TEXT REFERENCES executions(id);
