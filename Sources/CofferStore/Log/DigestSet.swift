import CofferCrypto

/// The version digests of one commit, for the membership test of every record read: the
/// digests in one array, as the commit stores them, and an open-addressing table of their
/// positions, at least twice as large, whose slot a digest's first word picks (a BLAKE2b output
/// is uniform). Building it hashes nothing, and it holds about 40 bytes a digest, where a
/// `Set<Digest32>` took about 80 and hashed each digest with SipHash to build and to look up.
/// A writer who chose digests that share first words would only slow lookups in their own
/// commit, each at most one pass over it.
struct DigestSet: Sendable {
    private let digests: [Digest32]
    /// 0 for an empty slot, else a position in `digests` plus one.
    private let slots: [UInt32]

    /// From a commit's entries: 32 bytes each (the caller checks the length).
    init(entries: UnsafeRawBufferPointer) {
        precondition(entries.count % 32 == 0, "entries are 32 bytes each")
        let count = entries.count / 32
        precondition(count < Int(UInt32.max), "too many entries")
        digests = [Digest32](unsafeUninitializedCapacity: count) { out, initialized in
            if count > 0 { UnsafeMutableRawBufferPointer(out).copyMemory(from: entries) }
            initialized = count
        }
        var size = 1
        while size < count * 2 { size <<= 1 }
        let mask = size - 1
        slots = digests.withUnsafeBufferPointer { digests in
            [UInt32](unsafeUninitializedCapacity: size) { table, initialized in
                table.initialize(repeating: 0)
                for (position, digest) in digests.enumerated() {
                    var slot = Int(truncatingIfNeeded: digest.a) & mask
                    while table[slot] != 0 { slot = (slot + 1) & mask }
                    table[slot] = UInt32(position + 1)
                }
                initialized = size
            }
        }
    }

    var count: Int { digests.count }

    func contains(_ digest: Digest32) -> Bool {
        slots.withUnsafeBufferPointer { table in
            digests.withUnsafeBufferPointer { digests in
                let mask = table.count - 1
                var slot = Int(truncatingIfNeeded: digest.a) & mask
                while true {
                    let position = table[slot]
                    if position == 0 { return false }
                    if digests[Int(position) - 1] == digest { return true }
                    slot = (slot + 1) & mask
                }
            }
        }
    }
}
