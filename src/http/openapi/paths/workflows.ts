/** The OpenAPI operations of the `workflows` area: definitions, versioned, validated on save (src/http/routes/workflows.ts). */
import { area, AUTH, json, merge, op, savingPut } from "../operation";
import * as req from "../requests";
import * as res from "../responses";

export const WORKFLOW_OPERATIONS = area("workflows", [
  op("get", "/v1/workflows", "listWorkflows", {
    summary: "List the workspace's workflows, by id",
    query: req.WorkflowListQuery,
    answers: { 200: json("a page of workflows", res.WorkflowList) },
    problems: merge(AUTH, { 400: ["invalid-limit"] }),
  }),
  op("put", "/v1/workflows/{workflowId}", "saveWorkflow", {
    summary: "Save a definition (validated; 422 lists every error with its JSON Pointer)",
    ...savingPut(
      { schema: req.WorkflowDefinition, description: "the workflow definition; its `id` equals the path's" },
      { schema: res.SavedWorkflow, unchanged: "unchanged: this definition is already the latest version", created: "a new version saved" },
      ["invalid-definition", "keyless-write-refused"],
    ),
  }),
  op("get", "/v1/workflows/{workflowId}", "readWorkflow", {
    summary: "Read a workflow (latest or a version); a scheduled workflow's recent scheduled runs",
    query: req.WorkflowReadQuery,
    answers: { 200: json("the stored version", res.StoredWorkflowRead) },
    problems: merge(AUTH, { 400: ["invalid-version"], 404: ["not-found"] }),
  }),
]);
