# What migrations/0043 costs on a large shard: `steps_by_key` dropped and created again as a partial
# index (issue 47 point 2, docs/deploy.md "Migrations that copy a table"). SQLite alone, through
# Python's sqlite3: N executions of three steps (entry, charge with a key, done) in a WITHOUT ROWID
# `steps` with its keyed index, 4 KB pages, WAL; then the migration's statements on `steps` timed —
# ADD COLUMN, DROP INDEX, CREATE INDEX … WHERE idempotency_key IS NOT NULL AND key_first_send IS NULL.
#
#   python3 bench/key-index.py [N=300000] [charge output bytes=2000] [charge request bytes=600] [other outputs=200]
#
# Not a D1 measurement: the same SQLite file format, without D1's network and storage.
import os, secrets, shutil, sqlite3, sys, tempfile, time
N = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
OUT = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
REQ = int(sys.argv[3]) if len(sys.argv) > 3 else 600
OTHER = int(sys.argv[4]) if len(sys.argv) > 4 else 200
DIR = tempfile.mkdtemp()
path = f"{DIR}/steps.db"
db = sqlite3.connect(path, isolation_level=None); db.execute("PRAGMA page_size=4096"); db.execute("PRAGMA journal_mode=WAL")
db.execute("""CREATE TABLE steps (execution_id TEXT NOT NULL, vertex_id TEXT NOT NULL, workspace TEXT NOT NULL, state TEXT, epoch INT,
               attempt INT, idempotency_key TEXT, request TEXT, output TEXT, created_at INT, created_seq INT, key_destination TEXT,
               PRIMARY KEY (execution_id, vertex_id)) WITHOUT ROWID""")
db.execute("CREATE INDEX steps_by_key ON steps (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL")
db.execute("BEGIN")
for i in range(N):
    e = secrets.token_hex(32)
    for j, v in enumerate(("received", "charge", "done")):
        key = f"charge-{secrets.token_urlsafe(32)}" if v == "charge" else None
        db.execute("INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                   (e, v, "ws", "COMPLETED", 1, 1, key, "r" * (REQ if v == "charge" else 0), "x" * (OUT if v == "charge" else OTHER), i, j,
                    "https://api.example" if key else None))
    if i % 10000 == 9999: db.execute("COMMIT"); db.execute("BEGIN")
db.execute("COMMIT"); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()
size = os.path.getsize(path)
db = sqlite3.connect(path, isolation_level=None); db.execute("PRAGMA cache_size=-2000")
t = time.perf_counter()
db.execute("BEGIN")
db.execute("ALTER TABLE steps ADD COLUMN key_first_send INTEGER")
t1 = time.perf_counter()
db.execute("DROP INDEX steps_by_key")
t2 = time.perf_counter()
db.execute("CREATE INDEX steps_by_key ON steps (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL AND key_first_send IS NULL")
t3 = time.perf_counter()
db.execute("COMMIT")
t4 = time.perf_counter()
print(f"{N * 3:,} steps ({size / 1e6:.0f} MB): ADD COLUMN {(t1 - t) * 1e3:.0f} ms, DROP INDEX {(t2 - t1) * 1e3:.0f} ms, "
      f"CREATE INDEX {(t3 - t2):.2f} s, commit {(t4 - t3) * 1e3:.0f} ms, total {(t4 - t):.2f} s")
shutil.rmtree(DIR)
