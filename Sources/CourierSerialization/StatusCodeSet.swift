import CourierCore

/// A set of HTTP status codes (0 through 1023). One range of codes, as `200..<300`, is held in
/// the value itself and costs nothing to build; any other set is a bitmap in a box of its own.
///
/// The value is small on purpose: a serializer holds one, and every async frame a request
/// passes through with its serializer holds a copy. (It was the 128-byte bitmap itself, which
/// made a response serializer 136 bytes and every request's task allocate more stack.)
public struct StatusCodeSet: Sendable, Hashable, Sequence, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// The codes `lower..<upper` while `bitmap` is nil (none when they are equal).
    private var lower: UInt16 = 0
    private var upper: UInt16 = 0
    /// Any set that is not one range; written only while no other value shares it.
    private var bitmap: Bitmap?

    /// Sixteen 64-bit words, one bit per code; one allocation.
    private final class Bitmap: @unchecked Sendable {
        private var words:
            (
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
            ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        /// A bitmap of the words `word(index)` gives.
        init(_ word: (Int) -> UInt64) {
            withUnsafeMutableBytes(of: &words) { bytes in
                for index in 0..<16 { bytes.storeBytes(of: word(index), toByteOffset: index * 8, as: UInt64.self) }
            }
        }

        func word(_ index: Int) -> UInt64 {
            withUnsafeBytes(of: words) { $0.load(fromByteOffset: index * 8, as: UInt64.self) }
        }

        func insert(_ code: Int) {
            withUnsafeMutableBytes(of: &words) { bytes in
                let offset = (code >> 6) * 8
                let word = bytes.load(fromByteOffset: offset, as: UInt64.self) | (1 << UInt64(code & 63))
                bytes.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
            }
        }
    }

    /// The codes in `codes` that lie in 0...1023.
    public init<Codes: Sequence<Int>>(_ codes: Codes) {
        // A type comparison, not `as?`: a dynamic cast costs more than the rest of the init.
        if Codes.self == Range<Int>.self {
            setRange(unsafeBitCast(codes, to: Range<Int>.self))
        } else if let range = codes as? ClosedRange<Int> {
            setRange(range.lowerBound..<(range.upperBound == .max ? range.upperBound : range.upperBound + 1))
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
        guard let bitmap else { return code >= Int(lower) && code < Int(upper) }
        return bitmap.word(code >> 6) & (1 << UInt64(code & 63)) != 0
    }

    /// Adds `code` (ignored outside 0...1023).
    public mutating func insert(_ code: Int) {
        guard code >= 0, code < 1024 else { return }
        if bitmap == nil {
            // Still one range when the code is in it, next to it, or the first.
            if lower == upper {
                (lower, upper) = (UInt16(code), UInt16(code + 1))
                return
            }
            if code >= Int(lower) - 1 && code <= Int(upper) {
                (lower, upper) = (Swift.min(lower, UInt16(code)), Swift.max(upper, UInt16(code + 1)))
                return
            }
            bitmap = Bitmap(word(at:))
        } else if !isKnownUniquelyReferenced(&bitmap) {
            bitmap = Bitmap(bitmap!.word)
        }
        bitmap!.insert(code)
    }

    /// The set of `range`, clipped to 0..<1024; called on an empty set.
    private mutating func setRange(_ range: Range<Int>) {
        let clampedLower = Swift.max(0, Swift.min(1024, range.lowerBound))
        let clampedUpper = Swift.min(1024, Swift.max(clampedLower, range.upperBound))
        (lower, upper) = (UInt16(clampedLower), UInt16(clampedUpper))
    }

    /// The 64 bits of codes `64 * index ..< 64 * (index + 1)`.
    private func word(at index: Int) -> UInt64 {
        if let bitmap { return bitmap.word(index) }
        let first = Swift.max(Int(lower), 64 * index)
        let end = Swift.min(Int(upper), 64 * (index + 1))
        guard first < end else { return 0 }
        let count = end - first
        let bits: UInt64 = count == 64 ? .max : (1 << UInt64(count)) - 1
        return bits << UInt64(first - 64 * index)
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
        if lhs.bitmap == nil, rhs.bitmap == nil {
            let bothEmpty = lhs.lower == lhs.upper && rhs.lower == rhs.upper
            return bothEmpty || (lhs.lower == rhs.lower && lhs.upper == rhs.upper)
        }
        return (0..<16).allSatisfy { lhs.word(at: $0) == rhs.word(at: $0) }
    }

    /// Hashes the codes (as the bitmap they make, whichever way the set holds them).
    public func hash(into hasher: inout Hasher) {
        for index in 0..<16 { hasher.combine(word(at: index)) }
    }
}
