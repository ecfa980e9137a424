/// The scan that JSON strings need, eight bytes at a time: a string's text runs until a quote,
/// and a quote, a backslash or a control character is what a reader must stop at and a writer
/// must escape. Record text (a 1 KB note) is mostly plain, so the reader and the writer skip it
/// a word at a time instead of a byte at a time.
enum JSONScan {
    /// The offset of the first 8-byte word of `p`, from `start`, holding a quote, a backslash or
    /// a control character; or of the bytes left at the end (fewer than 8), which the caller
    /// reads one by one. `nonASCII` is set when a word skipped has a byte of 0x80 or more.
    ///
    /// Each test sets the high bit of a byte exactly when the whole word holds a matching byte
    /// (`(x - 0x01…) & ~x & 0x80…` is nonzero if and only if some byte of `x` is zero).
    @inline(__always)
    static func plainWords(_ p: UnsafeBufferPointer<UInt8>, from start: Int, nonASCII: inout Bool) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        guard let base = p.baseAddress.map(UnsafeRawPointer.init) else { return start }
        var i = start
        while i + 8 <= p.count {
            let w = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5c)
            let stop = (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((w &- ones &* 0x20) & ~w)) & highs
            if stop != 0 { return i }
            if w & highs != 0 { nonASCII = true }
            i += 8
        }
        return i
    }
}
