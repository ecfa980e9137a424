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
        return migrator
    }
}
