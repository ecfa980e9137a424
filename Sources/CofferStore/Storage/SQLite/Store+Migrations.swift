import GRDB

extension Store {
    /// The schema, one named migration per step. A migration never changes once released:
    /// add a new one instead. Schema is written in SQL, not derived from Swift types.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-store-and-contacts") { db in
            try db.execute(sql: """
                CREATE TABLE store_meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value BLOB NOT NULL
                ) STRICT;
                CREATE TABLE contact (
                    user_id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    email TEXT,
                    signing_key BLOB NOT NULL CHECK (length(signing_key) = 32),
                    box_key BLOB NOT NULL CHECK (length(box_key) = 32),
                    card BLOB NOT NULL,
                    card_created TEXT NOT NULL,
                    added_at REAL NOT NULL
                ) STRICT;
                CREATE INDEX contact_email ON contact (email COLLATE NOCASE);
                CREATE INDEX contact_name ON contact (name COLLATE NOCASE);
                """)
        }
        migrator.registerMigration("v2-zones-and-records") { db in
            try db.execute(sql: """
                CREATE TABLE zone (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    uid BLOB NOT NULL UNIQUE CHECK (length(uid) = 16),
                    owner_id TEXT NOT NULL REFERENCES contact (user_id),
                    name TEXT NOT NULL,
                    current_epoch INTEGER NOT NULL CHECK (current_epoch >= 1),
                    sequence INTEGER NOT NULL DEFAULT 0,
                    membership_seq INTEGER NOT NULL DEFAULT 0,
                    created_at REAL NOT NULL,
                    UNIQUE (owner_id, name)
                ) STRICT;
                CREATE TABLE zone_key (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    epoch INTEGER NOT NULL,
                    member_id TEXT NOT NULL,
                    wrapped_key BLOB NOT NULL,
                    PRIMARY KEY (zone_id, epoch, member_id)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE field_schema (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    record_type TEXT NOT NULL,
                    field TEXT NOT NULL,
                    value_type TEXT NOT NULL,
                    encrypted INTEGER NOT NULL CHECK (encrypted IN (0, 1)),
                    PRIMARY KEY (zone_id, record_type, field)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE record (
                    id INTEGER PRIMARY KEY,
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    type TEXT NOT NULL,
                    parent TEXT,
                    plain TEXT NOT NULL,
                    sealed BLOB,
                    epoch INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    membership_seq INTEGER NOT NULL,
                    creator_id TEXT NOT NULL,
                    modifier_id TEXT NOT NULL,
                    created_at REAL NOT NULL,
                    modified_at REAL NOT NULL,
                    UNIQUE (zone_id, name)
                ) STRICT;
                CREATE INDEX record_parent ON record (zone_id, parent) WHERE parent IS NOT NULL;
                """)
        }
        migrator.registerMigration("v3-shares-and-signed-commits") { db in
            try db.execute(sql: """
                CREATE TABLE share (
                    zone_id INTEGER PRIMARY KEY REFERENCES zone (id) ON DELETE CASCADE,
                    share_uid BLOB NOT NULL UNIQUE CHECK (length(share_uid) = 16),
                    title TEXT NOT NULL,
                    public_permission INTEGER NOT NULL CHECK (public_permission IN (0, 1, 2)),
                    version INTEGER NOT NULL,
                    epoch INTEGER NOT NULL,
                    key_commitment BLOB NOT NULL CHECK (length(key_commitment) = 32),
                    link_sealed_key BLOB,
                    link_secret_sealed BLOB,
                    created_at REAL NOT NULL,
                    modified_at REAL NOT NULL,
                    signature BLOB NOT NULL CHECK (length(signature) = 64)
                ) STRICT;
                CREATE TABLE share_participant (
                    zone_id INTEGER NOT NULL REFERENCES share (zone_id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL,
                    role INTEGER NOT NULL CHECK (role IN (1, 2)),
                    permission INTEGER NOT NULL CHECK (permission IN (1, 2)),
                    status INTEGER NOT NULL CHECK (status IN (0, 2)),
                    PRIMARY KEY (zone_id, user_id)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE share_acceptance (
                    zone_id INTEGER NOT NULL REFERENCES share (zone_id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL,
                    role INTEGER NOT NULL CHECK (role IN (1, 2)),
                    state INTEGER NOT NULL CHECK (state IN (1, 2)),
                    at REAL NOT NULL,
                    signature BLOB NOT NULL CHECK (length(signature) = 64),
                    link_proof BLOB,
                    PRIMARY KEY (zone_id, user_id)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE membership_log (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    content BLOB NOT NULL,
                    signature BLOB NOT NULL CHECK (length(signature) = 64),
                    PRIMARY KEY (zone_id, seq)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE zone_commit (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    author_id TEXT NOT NULL,
                    author_label TEXT,
                    membership_seq INTEGER NOT NULL,
                    epoch INTEGER NOT NULL,
                    committed_at REAL NOT NULL,
                    prev_hash BLOB NOT NULL CHECK (length(prev_hash) = 32),
                    entries BLOB NOT NULL,
                    hash BLOB NOT NULL CHECK (length(hash) = 32),
                    signature BLOB NOT NULL CHECK (length(signature) = 64),
                    PRIMARY KEY (zone_id, seq)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE zone_key_chain (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    epoch INTEGER NOT NULL,
                    sealed_key BLOB NOT NULL,
                    PRIMARY KEY (zone_id, epoch)
                ) STRICT, WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v4-change-history") { db in
            try db.execute(sql: """
                CREATE INDEX record_zone_seq ON record (zone_id, seq, name);
                CREATE TABLE record_tombstone (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    author_id TEXT NOT NULL,
                    author_label TEXT,
                    deleted_at REAL NOT NULL,
                    PRIMARY KEY (zone_id, name)
                ) STRICT, WITHOUT ROWID;
                CREATE INDEX record_tombstone_seq ON record_tombstone (zone_id, seq, name);
                ALTER TABLE zone ADD COLUMN db_seq INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE zone ADD COLUMN compacted_seq INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX zone_db_seq ON zone (db_seq);
                CREATE TABLE store_counter (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    db_seq INTEGER NOT NULL,
                    compacted_db_seq INTEGER NOT NULL
                ) STRICT;
                INSERT INTO store_counter (id, db_seq, compacted_db_seq) VALUES (1, 0, 0);
                CREATE TABLE zone_tombstone (
                    user_id TEXT NOT NULL,
                    zone_uid BLOB NOT NULL,
                    owner_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    db_seq INTEGER NOT NULL,
                    reason TEXT NOT NULL,
                    PRIMARY KEY (user_id, zone_uid)
                ) STRICT, WITHOUT ROWID;
                CREATE INDEX zone_tombstone_seq ON zone_tombstone (user_id, db_seq);
                """)
        }
        // Version 2 commits also sign the record name of each entry (NULL for version 1 commits).
        migrator.registerMigration("v5-commit-names") { db in
            try db.execute(sql: "ALTER TABLE zone_commit ADD COLUMN names BLOB")
        }
        // One signed, hash-chained log per zone (`zone_log`) replaces the commit and membership
        // tables, the share's signed row and the acceptances. Zones of earlier stores keep their
        // rows (`log_format` 0) until their owner's session verifies them and signs their first
        // entry (see `Legacy/LegacyZone.swift`); their old rows are deleted then.
        migrator.registerMigration("v6-zone-log") { db in
            try db.execute(sql: """
                CREATE TABLE zone_log (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL CHECK (seq >= 1),
                    kind INTEGER NOT NULL,
                    author_id TEXT NOT NULL,
                    body BLOB NOT NULL,
                    signature BLOB NOT NULL CHECK (length(signature) = 64),
                    hash BLOB NOT NULL CHECK (length(hash) = 32),
                    entries BLOB,
                    names BLOB,
                    PRIMARY KEY (zone_id, seq)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE share_link (
                    zone_id INTEGER PRIMARY KEY REFERENCES zone (id) ON DELETE CASCADE,
                    epoch INTEGER NOT NULL,
                    sealed_key BLOB NOT NULL,
                    sealed_secret BLOB NOT NULL
                ) STRICT;
                CREATE TABLE zone_member (
                    zone_id INTEGER NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL,
                    PRIMARY KEY (zone_id, user_id)
                ) STRICT, WITHOUT ROWID;
                CREATE INDEX zone_member_user ON zone_member (user_id);
                ALTER TABLE zone ADD COLUMN log_format INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE zone ADD COLUMN share_uid BLOB;
                CREATE INDEX zone_share_uid ON zone (share_uid) WHERE share_uid IS NOT NULL;
                """)
        }
        // Every operation reads its zone's log head. The log's rows hold each entry's version
        // hashes and names (kilobytes), so its primary key's b-tree spills to overflow pages,
        // and a seek in it read them: 5 to 10 µs an operation. This index holds the small
        // columns and answers the head, and the lists of entries' sequences, on its own. It is
        // partial (`kind` is never NULL, so it holds every entry) so that SQLite uses it only
        // for queries that say `kind IS NOT NULL`: reading entries' bodies goes through the
        // primary key, not through the index and then the table for each row.
        migrator.registerMigration("v7-log-head-index") { db in
            try db.execute(sql: "CREATE INDEX zone_log_head ON zone_log (zone_id, seq, hash, kind) WHERE kind IS NOT NULL")
        }
        // What a Coffer server keeps of the requests it served (a store no server serves leaves
        // them empty): each signed request's nonce while its date is in the window, so that none
        // is served twice; and each batch's operation id, written in the batch's own transaction,
        // so that a batch sent again is applied once.
        migrator.registerMigration("v8-server-ledger") { db in
            try db.execute(sql: """
                CREATE TABLE server_nonce (
                    user_id TEXT NOT NULL,
                    nonce BLOB NOT NULL,
                    seen_at REAL NOT NULL,
                    PRIMARY KEY (user_id, nonce)
                ) STRICT, WITHOUT ROWID;
                CREATE INDEX server_nonce_seen ON server_nonce (seen_at);
                CREATE TABLE server_operation (
                    id BLOB PRIMARY KEY NOT NULL,
                    user_id TEXT NOT NULL,
                    applied_at REAL NOT NULL
                ) STRICT, WITHOUT ROWID;
                """)
        }
        // What the store keeps of a zone its owner deleted (see `StorageTransaction.deleteZone`):
        // its uid, owner and name, its genesis and its owner's signed deletion entry, so that a
        // reader who verified the zone learns that its owner deleted it.
        migrator.registerMigration("v9-deleted-zones") { db in
            try db.execute(sql: """
                CREATE TABLE deleted_zone (
                    uid BLOB PRIMARY KEY NOT NULL CHECK (length(uid) = 16),
                    owner_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    genesis_body BLOB NOT NULL,
                    genesis_signature BLOB NOT NULL CHECK (length(genesis_signature) = 64),
                    deletion_body BLOB NOT NULL,
                    deletion_signature BLOB NOT NULL CHECK (length(deletion_signature) = 64)
                ) STRICT, WITHOUT ROWID;
                """)
        }
        // A Coffer server's stages: each user's parts of a batch too large for one request,
        // kept until the user commits them as one batch (see `RemoteAPI.StageRequest`).
        migrator.registerMigration("v10-server-stage") { db in
            try db.execute(sql: """
                CREATE TABLE server_stage (
                    user_id TEXT NOT NULL,
                    part INTEGER NOT NULL,
                    hash BLOB NOT NULL CHECK (length(hash) = 16),
                    body BLOB NOT NULL,
                    staged_at REAL NOT NULL,
                    PRIMARY KEY (user_id, part)
                ) STRICT, WITHOUT ROWID;
                CREATE INDEX server_stage_staged ON server_stage (staged_at);
                """)
        }
        // A replica's pull in progress (see `ReplicaPull`): the rows fetched so far of a zone,
        // as the server stores them, kept until the pull stores them in `record` with the log
        // entries that sign them. Empty in any other store.
        migrator.registerMigration("v11-replica-stage") { db in
            try db.execute(sql: """
                CREATE TABLE replica_stage (
                    zone_uid BLOB NOT NULL CHECK (length(zone_uid) = 16),
                    name TEXT NOT NULL,
                    type TEXT NOT NULL,
                    parent TEXT,
                    seq INTEGER NOT NULL,
                    epoch INTEGER NOT NULL,
                    membership_seq INTEGER NOT NULL,
                    creator_id TEXT NOT NULL,
                    modifier_id TEXT NOT NULL,
                    created REAL NOT NULL,
                    modified REAL NOT NULL,
                    plain BLOB NOT NULL,
                    sealed BLOB,
                    PRIMARY KEY (zone_uid, name)
                ) STRICT, WITHOUT ROWID;
                """)
        }
        // A replica's pending changes (see `PendingChanges`): offline writes, sealed under a key
        // only the user's vault derives, numbered by a counter the user's marks file keeps.
        // `state` 0: waiting for a push; 1: a conflict kept for the user; 2: refused by the
        // server. Empty in any other store.
        migrator.registerMigration("v12-replica-changes") { db in
            try db.execute(sql: """
                CREATE TABLE replica_change (
                    number INTEGER PRIMARY KEY CHECK (number >= 1),
                    zone_uid BLOB NOT NULL CHECK (length(zone_uid) = 16),
                    name TEXT NOT NULL,
                    state INTEGER NOT NULL CHECK (state IN (0, 1, 2)),
                    sealed BLOB NOT NULL,
                    note TEXT
                ) STRICT;
                CREATE INDEX replica_change_by_name ON replica_change (zone_uid, name);
                """)
        }
        // `replica_stage` as a rowid table: its rows (a sealed record each, a kilobyte or more)
        // made the b-tree of a WITHOUT ROWID table split and spill to overflow pages on every
        // insert (3 times the time and the file of a rowid table). A pull in progress keeps its rows.
        migrator.registerMigration("v13-replica-stage-rowid") { db in
            try db.execute(sql: """
                CREATE TABLE replica_stage_v13 (
                    zone_uid BLOB NOT NULL CHECK (length(zone_uid) = 16),
                    name TEXT NOT NULL,
                    type TEXT NOT NULL,
                    parent TEXT,
                    seq INTEGER NOT NULL,
                    epoch INTEGER NOT NULL,
                    membership_seq INTEGER NOT NULL,
                    creator_id TEXT NOT NULL,
                    modifier_id TEXT NOT NULL,
                    created REAL NOT NULL,
                    modified REAL NOT NULL,
                    plain BLOB NOT NULL,
                    sealed BLOB,
                    UNIQUE (zone_uid, name)
                ) STRICT;
                INSERT INTO replica_stage_v13 (zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id,
                                               created, modified, plain, sealed)
                    SELECT zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created, modified, plain, sealed
                    FROM replica_stage;
                DROP TABLE replica_stage;
                ALTER TABLE replica_stage_v13 RENAME TO replica_stage;
                """)
        }
        return migrator
    }
}
