-- What each step of a saved version reads (src/definitions/step-inputs.ts): per vertex, the other
-- steps' outputs its expressions can reach and whether it reads the payload, or "all" for a
-- dynamic reference. The claim (src/ledger/steps.ts `readStepInputs`) loads only those, under a
-- size bound, so no claim builds a value D1 refuses (2,000,000 bytes). NULL (versions saved
-- before this column, or under another analysis version): the claim loads every output, under
-- the same bound.
ALTER TABLE workflow_versions ADD COLUMN step_inputs TEXT CHECK (step_inputs IS NULL OR json_valid(step_inputs));
