/// The three-way merge of a pending change with the server's version of its record: a pure
/// function of the confirmed version the change was made from (`base`), the server's verified
/// version now (`upstream`) and the change, so that every device merges the same conflict the
/// same way.
///
/// A change conflicts only where the server's version differs from the base in a field the
/// change also sets (to another value than the change's), or where one side deleted the record.
/// Values are compared, not versions: a rewrite, a move or a re-seal (`zone rekey`) changes no
/// value, so it is no conflict. Fields the change does not set keep the server's value.
package enum PendingMerge {
    /// Why a change and the server's version cannot both stand.
    public enum Conflict: String, Sendable {
        /// Both changed a field the change sets, to different values.
        case bothChanged = "both-changed"
        /// The change creates a name the server now holds another record under.
        case createdUpstream = "created-upstream"
        /// The change updates a record the server deleted.
        case deletedUpstream = "deleted-upstream"
        /// The change deletes a record the server changed.
        case changedUpstream = "changed-upstream"
        /// A field the change sets has another type (or moved between plain and encrypted) upstream.
        case typeChanged = "type-changed"
    }

    package enum Outcome: Equatable {
        /// Save these fields over the server's version (they carry its change tag).
        case save(PendingChange.Fields)
        /// Delete the server's version (at its change tag).
        case delete
        /// The server's version already is what the change makes.
        case nothing
        case conflict(Conflict)
    }

    package static func merge(base: PendingChange.Fields?, upstream: PendingChange.Fields?, change: PendingChange) -> Outcome {
        switch change.kind {
        case .delete:
            guard let upstream else { return .nothing }
            guard let base else { return .nothing } // made and deleted offline: nothing of the change's upstream
            return sameContent(base, upstream) ? .delete : .conflict(.changedUpstream)
        case .save:
            guard let local = change.local else { return .nothing }
            guard let base else {
                guard let upstream else { return .save(local) }
                return sameContent(local, upstream) ? .nothing : .conflict(.createdUpstream)
            }
            guard let upstream else { return .conflict(.deletedUpstream) }
            guard upstream.type == base.type else { return .conflict(.typeChanged) }
            var merged = upstream
            for key in change.setKeys {
                let b = base.field(key), u = upstream.field(key), l = local.field(key)
                if same(u, b) || same(u, l) {
                    merged.values[key] = local.values[key]
                    merged.encryptedValues[key] = local.encryptedValues[key]
                    continue
                }
                if let b, let u, b.encrypted != u.encrypted || b.value.fieldType != u.value.fieldType { return .conflict(.typeChanged) }
                return .conflict(.bothChanged)
            }
            if local.parent != base.parent {
                guard upstream.parent == base.parent || upstream.parent == local.parent else { return .conflict(.bothChanged) }
                merged.parent = local.parent
            }
            return sameContent(merged, upstream) ? .nothing : .save(merged)
        }
    }

    private static func same(_ a: (value: RecordValue, encrypted: Bool)?, _ b: (value: RecordValue, encrypted: Bool)?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let a?, let b?): return a.encrypted == b.encrypted && a.value == b.value
        default: return false
        }
    }

    /// The same type, parent and fields (whatever the versions).
    static func sameContent(_ a: PendingChange.Fields, _ b: PendingChange.Fields) -> Bool {
        a.type == b.type && a.parent == b.parent && a.values == b.values && a.encryptedValues == b.encryptedValues
    }
}
