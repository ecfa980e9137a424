#!/usr/bin/env python3
"""Times the sqlite3 shell inserting the benchmark's rows, to check that coffer-bench's
plaintext baseline is honest. Same table, index, WAL, synchronous=NORMAL and batches of 400 as
RecordsBench's Baseline; rows of the same shape (20-40 character title, int, date, 1 KB body, int).

Usage: python3 Sources/coffer-bench/sqlite3-baseline.py [RECORDS]   (needs the sqlite3 shell)
Prints records per second for the insert, as measured around the sqlite3 process.
"""
import os, random, subprocess, sys, tempfile, time

records = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
rng = random.Random(0xC0FFEE)
words = ["alpha", "bravo", "coffee", "delta", "echo", "fern", "grain", "harbor", "iris", "juniper", "kettle", "lumen"]
distinct = records // 100
with tempfile.TemporaryDirectory() as folder:
    script = os.path.join(folder, "insert.sql")
    with open(script, "w") as out:
        out.write("PRAGMA journal_mode=WAL;\nPRAGMA synchronous=NORMAL;\n")
        out.write("CREATE TABLE note (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, title TEXT NOT NULL, count INTEGER NOT NULL,"
                  " date REAL NOT NULL, body TEXT NOT NULL, n INTEGER NOT NULL);\nCREATE INDEX note_count ON note (count, name);\n")
        for start in range(0, records, 400):
            out.write("BEGIN;\n")
            for i in range(start, min(start + 400, records)):
                title = " ".join(rng.choice(words) for _ in range(8))[: 20 + rng.randrange(21)]
                body = (" ".join(rng.choice(words) for _ in range(200)))[:1024]
                out.write(f"INSERT INTO note (name, title, count, date, body, n) VALUES ('note-{i}', '{title}', {i % distinct}, "
                          f"{1700000000 + i}.0, '{body}', {rng.randrange(1000000)});\n")
            out.write("COMMIT;\n")
    db = os.path.join(folder, "shell.sqlite")
    began = time.perf_counter()
    with open(script) as sql:
        subprocess.run(["sqlite3", db], stdin=sql, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - began
    print(f"sqlite3 shell: {records} rows in {seconds:.2f} s = {records / seconds:.0f} records/s")
