/**
 * How a row becomes a camelCase record: a column map, field name → SQL expression, written once
 * per record type. `selectList` renders it once, at module load, as `expr AS "field"`, so D1
 * returns the record itself, no caller ever sees a snake_case row, and no hot path rebuilds it.
 * A map must name every field of its record (the type says so), so a field added to a record
 * without its column fails to compile.
 */
export type Columns<Record> = { readonly [Field in keyof Record]-?: string };

export function selectList<Record>(columns: Columns<Record>): string {
  return Object.entries<string>(columns)
    .map(([field, expression]) => (expression === field ? field : `${expression} AS "${field}"`))
    .join(", ");
}
