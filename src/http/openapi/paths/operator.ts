/** The OpenAPI operations of the `operator` area: figures that describe every workspace (an `OPERATOR_TOKENS` token). */
import { area, AUTH, json, merge, op } from "../operation";
import * as res from "../responses";

export const OPERATOR_OPERATIONS = area("operator", [
  op("get", "/v1/operator/storage", "operatorStorage", {
    summary: "The database's size, limit, executions retained and bytes per execution (operator token only)",
    operator: true,
    answers: { 200: json("the figures, with a note on reading them", res.StorageFigures) },
    problems: merge(AUTH, { 403: ["operator-token-required"] }),
  }),
]);
