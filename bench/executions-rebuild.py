# What migrations/0044 costs on a large shard, and what `executions` WITHOUT ROWID does to its bytes
# (issue 47 point 2, docs/deploy.md "Migrations that copy a table"). SQLite alone, through Python's
# sqlite3, with the project's own migrations: a database at migrations/0043 (4 KB pages, WAL, foreign
# keys on as D1 has them) holding N finished executions with a payload of P bytes, each with its three
# steps (entry with the payload as its output, a keyed charge, done); then migrations/0044 run in one
# transaction, as `wrangler d1 migrations apply` runs it, timed; the `executions` b-tree's pages counted
# before and after (dbstat when this sqlite3 has it, else the file after VACUUM).
#
#   python3 bench/executions-rebuild.py [N=200000] [payload bytes=300]
#
# Not a D1 measurement: the same SQLite file format, without D1's network and storage.
import glob, os, secrets, shutil, sqlite3, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
PAYLOAD = int(sys.argv[2]) if len(sys.argv) > 2 else 300
HERE = os.path.dirname(os.path.abspath(__file__))
files = sorted(glob.glob(os.path.join(HERE, "..", "migrations", "*.sql")))
before, rebuild = [f for f in files if os.path.basename(f) < "0044"], [f for f in files if os.path.basename(f).startswith("0044")][0]

DIR = tempfile.mkdtemp()
path = f"{DIR}/shard.db"
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA page_size=4096")
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA foreign_keys=ON")
for f in before:
    db.executescript("BEGIN;" + open(f).read() + "\nCOMMIT;")
payload = '{"order":"' + "x" * max(PAYLOAD - 12, 0) + '"}'
db.execute("BEGIN")
for i in range(N):
    e = secrets.token_hex(16)
    db.execute(
        """INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity,
                                   status, payload, lineage_id, created_at, updated_at, finished_at, max_attempt, value_hashes)
           VALUES (?1, 'ws', 'orders', 'v1', 'received', 'webhook', 'fields', ?2, 'COMPLETED', ?3, ?2, ?4, ?4, ?4, 1, ?5)""",
        (e, secrets.token_hex(32), payload, 1_700_000_000_000 + i, f'["{secrets.token_hex(32)}"]'),
    )
    for j, v in enumerate(("received", "charge", "done")):
        db.execute(
            """INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, idempotency_key, output,
                                  next_vertices, created_at, created_seq, updated_at, finished_at)
               VALUES (?1, ?2, 'ws', 'COMPLETED', 1, 1, 0, ?3, ?4, '[]', 0, ?5, 0, 0)""",
            (e, v, f"charge-{secrets.token_urlsafe(24)}" if v == "charge" else None, payload if v == "received" else '{"ok":true}', j),
        )
    if i % 10000 == 9999:
        db.execute("COMMIT")
        db.execute("BEGIN")
db.execute("COMMIT")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def pages() -> str:
    try:
        rows = db.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name = 'executions' OR name LIKE 'sqlite_autoindex_executions%' GROUP BY name"
        ).fetchall()
        return ", ".join(f"{n} {b / N:.0f} B/execution" for n, b in rows)
    except sqlite3.OperationalError:
        db.execute("VACUUM")
        return f"file {os.path.getsize(path) / N:.0f} B/execution"


print(f"{N} executions, payload {len(payload)} B; before: {pages()}")
db.close()
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA foreign_keys=ON")
db.execute("PRAGMA cache_size=-2000")
t = time.perf_counter()
db.executescript("BEGIN;" + open(rebuild).read() + "\nCOMMIT;")
elapsed = time.perf_counter() - t
print(f"migrations/0044: {elapsed:.1f} s ({N / elapsed:,.0f} executions/s); after: {pages()}")
shutil.rmtree(DIR)
