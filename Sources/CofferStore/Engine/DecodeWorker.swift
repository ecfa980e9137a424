import CofferCrypto
import Foundation

/// What a read keeps from row to row while decoding: the zone, the last row's schema and zone
/// key (rows come in runs of one type and epoch, so most rows find theirs without hashing the
/// type or the epoch), the last row's plain field types by position (``FieldTypeCache``), and
/// the buffer envelopes are opened in. A session keeps its workers between reads
/// (``RecordReader/withDecodeWorker(zone:_:)``), one for each read running at the same time; a
/// worker is used by one read at a time.
final class DecodeWorker {
    private(set) var zone: ZoneRow
    private var last: (type: String, schema: [String: FieldSchema], count: Int, generation: Int)?
    private var lastKey: (epoch: Int64, key: SymmetricKey)?
    private var fieldTypes = FieldTypeCache()
    /// Where this worker's envelopes are opened (wiped after each record).
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

    init(zone: ZoneRow) {
        self.zone = zone
    }

    deinit {
        scratch.deallocate() // holds no plaintext: `Envelope.withOpened` wipes what it used
    }

    /// Points the worker at `zone` before a read: what it kept is dropped unless it is the zone
    /// it last read.
    func begin(zone: ZoneRow) {
        guard zone.uid != self.zone.uid || zone.rowID != self.zone.rowID || zone.id != self.zone.id else { return }
        self.zone = zone
        last = nil
        lastKey = nil
        fieldTypes = FieldTypeCache()
    }

    func decode(_ row: StoredRow, _ shared: RowContext) -> DecodeOutcome {
        let schema: [String: FieldSchema]
        // Schemas only grow (a field, once saved, keeps its type) until a field is dropped,
        // which moves the session's schema generation on: one with as many fields as the
        // context's, of its generation, is the same schema.
        if let last, last.type == row.type, last.count == shared.schemaCount, last.generation == shared.schemaGeneration {
            schema = last.schema
        } else {
            schema = shared.schema
            last = (row.type, schema, shared.schemaCount, shared.schemaGeneration)
            fieldTypes = FieldTypeCache()
        }
        var key: Result<SymmetricKey, any Error>?
        if row.hasSealed {
            if let lastKey, lastKey.epoch == row.epoch {
                key = .success(lastKey.key)
            } else {
                key = shared.key
                if case .success(let found)? = shared.key { lastKey = (row.epoch, found) } // a failure is not kept: access may come later
            }
        }
        return withUnsafeMutablePointer(to: &fieldTypes) { fieldTypes in
            RecordReader.decode(row, commit: shared.commit, author: shared.commit.authorID, creatorID: row.creatorID, modifierID: row.modifierID,
                           label: shared.commit.label, schema: schema, key: key, zone: zone, scratch: scratch, fieldTypes: fieldTypes)
        }
    }
}
