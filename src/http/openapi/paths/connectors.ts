/**
 * The OpenAPI operations of the `connectors` area: reusable destinations with their key rule,
 * resolved into a workflow when it is saved (src/http/routes/connectors.ts).
 */
import { area, AUTH, DELETED, json, listing, merge, op, savingPut } from "../operation";
import * as req from "../requests";
import * as res from "../responses";

export const CONNECTOR_OPERATIONS = area("connectors", [
  op("put", "/v1/connectors/{name}", "putConnector", {
    summary: "Save a connector: a reusable destination whose key a step through it cannot drop or override",
    ...savingPut(
      { schema: req.ConnectorDefinition, description: "the connector (docs/connectors.md)" },
      { schema: res.SavedConnector, unchanged: "this document was already the saved version", created: "a new version" },
      ["connector-invalid"],
    ),
  }),
  listing("/v1/connectors", "listConnectors", "The workspace's connectors (their latest versions)", "the connectors", res.ConnectorList),
  op("get", "/v1/connectors/{name}", "getConnector", {
    summary: "A connector: its latest version, or `?version=`",
    query: req.WorkflowReadQuery,
    answers: { 200: json("the connector", res.StoredConnectorRead) },
    problems: merge(AUTH, { 400: ["invalid-version"], 404: ["not-found"] }),
  }),
  op("delete", "/v1/connectors/{name}", "deleteConnector", {
    summary: "Delete a connector (saved workflow versions keep their resolved steps)",
    answers: DELETED,
    problems: merge(AUTH, { 404: ["not-found"] }),
  }),
]);
