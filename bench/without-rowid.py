# What `steps` WITHOUT ROWID costs in bytes and read time against a rowid table with its key index
# (issue 47 point 2, migrations/0038; docs/benchmarks.md "Rows written per execution, the second
# round"). SQLite alone, through Python's sqlite3: N executions of three steps (entry, charge, done),
# 4 KB pages, WAL, one transaction per execution; then 20,000 point reads of the charge step, 20,000
# reads of an execution's steps in order, and 5,000 single-row updates, with a 2 MB page cache.
#
#   python3 bench/without-rowid.py [N=100000] [charge output bytes=2000] [charge request bytes=600] [other outputs=200]
#
# Not a D1 measurement: the same SQLite file format, without D1's network and storage.
import os, random, secrets, shutil, sqlite3, sys, tempfile, time
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
OUT = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
REQ = int(sys.argv[3]) if len(sys.argv) > 3 else 600
OTHER = int(sys.argv[4]) if len(sys.argv) > 4 else 200
DIR = tempfile.mkdtemp()
random.seed(7)
ids = [secrets.token_hex(32) for _ in range(N)]
def run(without):
    path = f"{DIR}/{'wr' if without else 'rw'}.db"
    if os.path.exists(path): os.remove(path)
    db = sqlite3.connect(path); db.execute("PRAGMA page_size=4096"); db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"""CREATE TABLE steps (execution_id TEXT NOT NULL, vertex_id TEXT NOT NULL, state TEXT, epoch INT, output TEXT, request TEXT,
                   created_at INT, created_seq INT, PRIMARY KEY (execution_id, vertex_id)) {'WITHOUT ROWID' if without else ''}""")
    t = time.perf_counter()
    for i, e in enumerate(ids):
        db.execute("BEGIN")
        for j, v in enumerate(("received", "charge", "done")):
            out = "x" * (OUT if v == "charge" else OTHER)
            req = "r" * (REQ if v == "charge" else 0)
            db.execute("INSERT INTO steps VALUES (?,?,?,?,?,?,?,?)", (e, v, "COMPLETED", 1, out, req, i, j))
        db.execute("COMMIT")
    ins = time.perf_counter() - t
    db.close(); db = sqlite3.connect(path)
    db.execute("PRAGMA cache_size=-2000")  # 2 MB cache: most pages not cached
    sample = random.sample(ids, min(20000, N))
    t = time.perf_counter()
    for e in sample: db.execute("SELECT output FROM steps WHERE execution_id=? AND vertex_id='charge'", (e,)).fetchone()
    point = time.perf_counter() - t
    t = time.perf_counter()
    for e in sample: db.execute("SELECT vertex_id, state, output FROM steps WHERE execution_id=? ORDER BY created_at, created_seq", (e,)).fetchall()
    prefix = time.perf_counter() - t
    t = time.perf_counter()
    for e in sample[:5000]: db.execute("UPDATE steps SET state='DONE', epoch=epoch+1 WHERE execution_id=? AND vertex_id='done'", (e,)); db.commit()
    upd = time.perf_counter() - t
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(path)
    print(f"{'WITHOUT ROWID' if without else 'rowid + key index'}: insert {ins/N/3*1e6:.1f} us/row, point {point/len(sample)*1e6:.1f} us, prefix {prefix/len(sample)*1e6:.1f} us, update {upd/min(5000, N)*1e6:.1f} us, file {size/1e6:.1f} MB")
run(False); run(True)
shutil.rmtree(DIR)
