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
                    creator_id TEXT NOT NULL,
                    modifier_id TEXT NOT NULL,
                    created_at REAL NOT NULL,
                    modified_at REAL NOT NULL,
                    UNIQUE (zone_id, name)
                ) STRICT;
                CREATE INDEX record_parent ON record (zone_id, parent) WHERE parent IS NOT NULL;
                """)
        }
        return migrator
    }
}
