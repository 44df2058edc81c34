/**
 * A D1 batch whose statements carry labels, so an operation reads its results by name — never by
 * position (`results[1]`, `slice(2, -1)`), which breaks silently when a statement is added.
 *
 * One batch is one round trip and one transaction. The ledger's operations build one, add their
 * statements under labels, run it and map the labelled rows to camelCase results; nothing outside
 * src/ledger sees a statement or a row.
 */

export class LabelledBatch<Label extends string> {
  readonly #db: D1Database;
  readonly #entries: Array<{ label: Label; statement: D1PreparedStatement }> = [];

  constructor(db: D1Database) {
    this.#db = db;
  }

  add(label: Label, statement: D1PreparedStatement): this {
    this.#entries.push({ label, statement });
    return this;
  }

  get size(): number {
    return this.#entries.length;
  }

  /** Runs the batch (one round trip); an empty batch sends nothing. */
  async run(): Promise<BatchResults<Label>> {
    if (this.#entries.length === 0) return new BatchResults([], []);
    const results = await this.#db.batch(this.#entries.map((e) => e.statement));
    return new BatchResults(
      this.#entries.map((e) => e.label),
      results,
    );
  }
}

/** What a run of a labelled batch returned, read by label. */
export class BatchResults<Label extends string> {
  readonly #labels: Label[];
  readonly #results: D1Result[];

  constructor(labels: Label[], results: D1Result[]) {
    this.#labels = labels;
    this.#results = results;
  }

  #of(label: Label): D1Result[] {
    return this.#results.filter((_, i) => this.#labels[i] === label);
  }

  /** The rows every statement under `label` returned, in batch order. */
  rows<Row>(label: Label): Row[] {
    return this.#of(label).flatMap((r) => (r.results ?? []) as Row[]);
  }

  /** The first row under `label`, or null. */
  first<Row>(label: Label): Row | null {
    return this.rows<Row>(label)[0] ?? null;
  }

  /** Rows changed by the statements under `label`. */
  changes(label: Label): number {
    return this.#of(label).reduce((n, r) => n + (r.meta.changes ?? 0), 0);
  }
}
