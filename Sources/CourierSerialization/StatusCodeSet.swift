import CourierCore

/// A set of HTTP status codes (0 through 1023), stored as a bitmap so that building one from
/// `200..<300` for every request costs nothing worth measuring.
public struct StatusCodeSet: Sendable, Hashable, Sequence, ExpressibleByArrayLiteral, CustomStringConvertible {
    private var words:
        (
            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
        ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// The codes in `codes` that lie in 0...1023.
    public init<Codes: Sequence<Int>>(_ codes: Codes) {
        // A type comparison, not `as?`: a dynamic cast costs more than the rest of the init.
        if Codes.self == Range<Int>.self {
            insert(unsafeBitCast(codes, to: Range<Int>.self))
        } else if let range = codes as? ClosedRange<Int> {
            insert(range.lowerBound..<(range.upperBound == .max ? range.upperBound : range.upperBound + 1))
        } else {
            for code in codes { insert(code) }
        }
    }

    /// The codes listed.
    public init(arrayLiteral codes: Int...) {
        for code in codes { insert(code) }
    }

    /// The successful codes, `200..<300`.
    public static let success = StatusCodeSet(200..<300)

    /// Whether `code` is in the set.
    public func contains(_ code: Int) -> Bool {
        guard code >= 0, code < 1024 else { return false }
        return withUnsafeBytes(of: words) { $0.load(fromByteOffset: (code >> 6) * 8, as: UInt64.self) }
            & (1 << UInt64(code & 63)) != 0
    }

    /// Adds `code` (ignored outside 0...1023).
    public mutating func insert(_ code: Int) {
        guard code >= 0, code < 1024 else { return }
        withUnsafeMutableBytes(of: &words) { bytes in
            let offset = (code >> 6) * 8
            let word = bytes.load(fromByteOffset: offset, as: UInt64.self) | (1 << UInt64(code & 63))
            bytes.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
        }
    }

    /// Sets the bits of `range` (clipped to 0..<1024) a word at a time.
    private mutating func insert(_ range: Range<Int>) {
        let lower = Swift.max(0, range.lowerBound)
        let upper = Swift.min(1024, Swift.max(lower, range.upperBound))
        guard lower < upper else { return }
        withUnsafeMutableBytes(of: &words) { bytes in
            var code = lower
            while code < upper {
                let offset = (code >> 6) * 8
                let first = code & 63
                let count = Swift.min(64 - first, upper - code)
                let bits: UInt64 = count == 64 ? .max : ((1 << UInt64(count)) - 1) << UInt64(first)
                bytes.storeBytes(
                    of: bytes.load(fromByteOffset: offset, as: UInt64.self) | bits, toByteOffset: offset,
                    as: UInt64.self)
                code += count
            }
        }
    }

    /// The codes in ascending order.
    public func makeIterator() -> some IteratorProtocol<Int> {
        (0..<1024).lazy.filter { self.contains($0) }.makeIterator()
    }

    /// `200..<300` style ranges, comma-separated.
    public var description: String {
        var parts: [String] = []
        var start: Int?
        for code in 0...1024 {
            let present = code < 1024 && contains(code)
            if present, start == nil { start = code }
            if !present, let first = start {
                parts.append(code - first == 1 ? "\(first)" : "\(first)..<\(code)")
                start = nil
            }
        }
        return parts.joined(separator: ", ")
    }

    /// Equal when they hold the same codes.
    public static func == (lhs: StatusCodeSet, rhs: StatusCodeSet) -> Bool {
        withUnsafeBytes(of: lhs.words) { a in withUnsafeBytes(of: rhs.words) { b in a.elementsEqual(b) } }
    }

    /// Hashes the bitmap.
    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: words) { hasher.combine(bytes: $0) }
    }
}
