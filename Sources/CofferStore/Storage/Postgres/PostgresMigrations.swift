import CofferCrypto
import Foundation
import PostgresNIO

/// The schema of a Coffer store on PostgreSQL, one named migration per step, applied in order and
/// recorded in `coffer_migration`. A migration never changes once released: add a new one.
///
/// The tables are the SQLite store's, in PostgreSQL's types (`bytea`, `bigint`, `double
/// precision`, `boolean`), less what only stores of the earlier SQLite format need. Every text
/// column that is compared or sorted is `COLLATE "C"`, so that names, begins-with and cursors
/// order by bytes, exactly as on SQLite.
enum PostgresMigrations {
    static let all: [(name: String, sql: [String])] = [
        ("v1-coffer-store", [
            """
            CREATE TABLE store_meta (
                key text COLLATE "C" PRIMARY KEY,
                value bytea NOT NULL
            )
            """,
            """
            CREATE TABLE contact (
                user_id text COLLATE "C" PRIMARY KEY,
                name text COLLATE "C" NOT NULL,
                email text COLLATE "C",
                signing_key bytea NOT NULL CHECK (length(signing_key) = 32),
                box_key bytea NOT NULL CHECK (length(box_key) = 32),
                card bytea NOT NULL,
                card_created text NOT NULL,
                added_at double precision NOT NULL
            )
            """,
            "CREATE INDEX contact_email ON contact (lower(email))",
            "CREATE INDEX contact_name ON contact (lower(name))",
            """
            CREATE TABLE zone (
                id bigserial PRIMARY KEY,
                uid bytea NOT NULL UNIQUE CHECK (length(uid) = 16),
                owner_id text COLLATE "C" NOT NULL REFERENCES contact (user_id),
                name text COLLATE "C" NOT NULL,
                sequence bigint NOT NULL DEFAULT 0,
                created_at double precision NOT NULL,
                db_seq bigint NOT NULL DEFAULT 0,
                UNIQUE (owner_id, name)
            )
            """,
            "CREATE INDEX zone_db_seq ON zone (db_seq)",
            """
            CREATE TABLE zone_log (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                seq bigint NOT NULL CHECK (seq >= 1),
                kind integer NOT NULL,
                author_id text COLLATE "C" NOT NULL,
                body bytea NOT NULL,
                signature bytea NOT NULL CHECK (length(signature) = 64),
                hash bytea NOT NULL CHECK (length(hash) = 32),
                entries bytea,
                names bytea,
                PRIMARY KEY (zone_id, seq)
            )
            """,
            """
            CREATE TABLE zone_key (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                epoch bigint NOT NULL,
                member_id text COLLATE "C" NOT NULL,
                wrapped_key bytea NOT NULL,
                PRIMARY KEY (zone_id, epoch, member_id)
            )
            """,
            """
            CREATE TABLE zone_key_chain (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                epoch bigint NOT NULL,
                sealed_key bytea NOT NULL,
                PRIMARY KEY (zone_id, epoch)
            )
            """,
            """
            CREATE TABLE field_schema (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                record_type text COLLATE "C" NOT NULL,
                field text COLLATE "C" NOT NULL,
                value_type text NOT NULL,
                encrypted boolean NOT NULL,
                PRIMARY KEY (zone_id, record_type, field)
            )
            """,
            """
            CREATE TABLE record (
                id bigserial PRIMARY KEY,
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                name text COLLATE "C" NOT NULL,
                type text COLLATE "C" NOT NULL,
                parent text COLLATE "C",
                plain text NOT NULL,
                sealed bytea,
                epoch bigint NOT NULL,
                seq bigint NOT NULL,
                membership_seq bigint NOT NULL,
                creator_id text COLLATE "C" NOT NULL,
                modifier_id text COLLATE "C" NOT NULL,
                created_at double precision NOT NULL,
                modified_at double precision NOT NULL,
                UNIQUE (zone_id, name)
            )
            """,
            "CREATE INDEX record_parent ON record (zone_id, parent) WHERE parent IS NOT NULL",
            "CREATE INDEX record_zone_seq ON record (zone_id, seq, name)",
            """
            CREATE TABLE record_tombstone (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                name text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                author_id text COLLATE "C" NOT NULL,
                author_label text,
                deleted_at double precision NOT NULL,
                PRIMARY KEY (zone_id, name)
            )
            """,
            "CREATE INDEX record_tombstone_seq ON record_tombstone (zone_id, seq, name)",
            """
            CREATE TABLE store_counter (
                id integer PRIMARY KEY CHECK (id = 1),
                db_seq bigint NOT NULL,
                compacted_db_seq bigint NOT NULL
            )
            """,
            "INSERT INTO store_counter (id, db_seq, compacted_db_seq) VALUES (1, 0, 0)",
            """
            CREATE TABLE zone_tombstone (
                user_id text COLLATE "C" NOT NULL,
                zone_uid bytea NOT NULL,
                owner_id text COLLATE "C" NOT NULL,
                name text COLLATE "C" NOT NULL,
                db_seq bigint NOT NULL,
                reason text NOT NULL,
                PRIMARY KEY (user_id, zone_uid)
            )
            """,
            "CREATE INDEX zone_tombstone_seq ON zone_tombstone (user_id, db_seq)",
        ]),
        // A zone's change history can be compacted: tokens before this sequence expire.
        ("v2-zone-compacted-seq", [
            "ALTER TABLE zone ADD COLUMN compacted_seq bigint NOT NULL DEFAULT 0",
        ]),
        // Sharing: a share's public link, and the lookups of a user's shared zones and of a
        // share URL's zone (they only narrow searches: every use checks the verified log).
        ("v3-sharing", [
            """
            CREATE TABLE share_link (
                zone_id bigint PRIMARY KEY REFERENCES zone (id) ON DELETE CASCADE,
                epoch bigint NOT NULL,
                sealed_key bytea NOT NULL,
                sealed_secret bytea NOT NULL
            )
            """,
            """
            CREATE TABLE zone_member (
                zone_id bigint NOT NULL REFERENCES zone (id) ON DELETE CASCADE,
                user_id text COLLATE "C" NOT NULL,
                PRIMARY KEY (zone_id, user_id)
            )
            """,
            "CREATE INDEX zone_member_user ON zone_member (user_id)",
            "ALTER TABLE zone ADD COLUMN share_uid bytea",
            "CREATE INDEX zone_share_uid ON zone (share_uid) WHERE share_uid IS NOT NULL",
        ]),
        // What a Coffer server keeps of the requests it served, shared by every instance on the
        // database: each signed request's nonce while its date is in the window (none is served
        // twice), and each batch's operation id, written in the batch's own transaction (a
        // batch sent again is applied once).
        ("v4-server-ledger", [
            """
            CREATE TABLE server_nonce (
                user_id text COLLATE "C" NOT NULL,
                nonce bytea NOT NULL,
                seen_at double precision NOT NULL,
                PRIMARY KEY (user_id, nonce)
            )
            """,
            "CREATE INDEX server_nonce_seen ON server_nonce (seen_at)",
            """
            CREATE TABLE server_operation (
                id bytea PRIMARY KEY,
                user_id text COLLATE "C" NOT NULL,
                applied_at double precision NOT NULL
            )
            """,
        ]),
        // What the store keeps of a zone its owner deleted (see `StorageTransaction.deleteZone`):
        // its uid, owner and name, its genesis and its owner's signed deletion entry, so that a
        // reader who verified the zone learns that its owner deleted it.
        ("v5-deleted-zones", [
            """
            CREATE TABLE deleted_zone (
                uid bytea PRIMARY KEY CHECK (length(uid) = 16),
                owner_id text COLLATE "C" NOT NULL,
                name text COLLATE "C" NOT NULL,
                genesis_body bytea NOT NULL,
                genesis_signature bytea NOT NULL CHECK (length(genesis_signature) = 64),
                deletion_body bytea NOT NULL,
                deletion_signature bytea NOT NULL CHECK (length(deletion_signature) = 64)
            )
            """,
        ]),
        // A Coffer server's stages: each user's parts of a batch too large for one request,
        // kept until the user commits them as one batch (see `RemoteAPI.StageRequest`).
        ("v6-server-stage", [
            """
            CREATE TABLE server_stage (
                user_id text COLLATE "C" NOT NULL,
                part integer NOT NULL,
                hash bytea NOT NULL CHECK (length(hash) = 16),
                body bytea NOT NULL,
                staged_at double precision NOT NULL,
                PRIMARY KEY (user_id, part)
            )
            """,
            "CREATE INDEX server_stage_staged ON server_stage (staged_at)",
        ]),
    ]

    /// A key for `pg_advisory_xact_lock`: processes that open one database at once set it up one
    /// at a time ("coffer" in ASCII).
    static let lockKey: Int64 = 0x636f_6666_6572

    /// Applies the migrations the database lacks, in one transaction under the advisory lock,
    /// and returns the store's id (made on first use).
    static func migrate(_ connector: PostgresConnector) async throws -> [UInt8] {
        try await connector.transaction { tx in
            try await tx.query("SELECT pg_advisory_xact_lock(\(lockKey))")
            try await tx.query("CREATE TABLE IF NOT EXISTS coffer_migration (name text COLLATE \"C\" PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            var applied = Set<String>()
            for row in try await tx.query("SELECT name FROM coffer_migration") { applied.insert(try row.decode(String.self)) }
            let known = Set(all.map(\.name))
            if let unknown = applied.subtracting(known).sorted().first {
                throw StoreError(.internalError, "the PostgreSQL database has Coffer migration '\(Names.printable(unknown))', which this version does not know: it was set up by a newer Coffer")
            }
            for migration in all where !applied.contains(migration.name) {
                for statement in migration.sql { try await tx.query(PostgresQuery(unsafeSQL: statement)) }
                try await tx.query("INSERT INTO coffer_migration (name) VALUES (\(migration.name))")
            }
            if let row = try await tx.query("SELECT value FROM store_meta WHERE key = 'store_id'").first {
                let id = [UInt8](try row.decode(Data.self))
                guard id.count == 16 else { throw StoreError(.integrityFailure, "the store's id in PostgreSQL is damaged: the store was changed") }
                return id
            }
            let id = SecureRandom.bytes(count: 16)
            try await tx.query("INSERT INTO store_meta (key, value) VALUES ('store_id', \(Data(id)))")
            return id
        }
    }
}
