/** The scenario runner's files (./bundle.mjs): the `TEST_WORKFLOW_FILES` binding. */
export type WorkflowFiles = {
  /** The scenario files to run, as text (one that cannot be read or parsed is reported by the runner, with its file). */
  scenarios: Array<{ file: string; text: string }>;
  workflows: Array<{ file: string; text: string }>;
  connectors: Array<{ file: string; text: string }>;
};

export function loadWorkflowFiles(root: string, selection?: string): WorkflowFiles;
