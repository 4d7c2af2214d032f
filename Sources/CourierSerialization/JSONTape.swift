@_spi(CourierInternals) import CourierCore
import Foundation

/// JSON text indexed in one pass: every value is a node, in document order, and each array
/// or object knows where it ends. Decoding walks the nodes without building intermediate
/// values (see `TapeDecoder`).
///
/// The grammar is RFC 8259's, strictly: the builder accepts only what `JSONDecoder` accepts
/// as well (no trailing commas, no byte order mark, no lone surrogates, valid UTF-8) and
/// refuses the rest with ``TapeDecodingUnsupported``, so that `JSONDecoder` reports it.
final class JSONTape {
    enum Kind: UInt8 {
        case object, array, string, escapedString, integer, number, `true`, `false`, null
    }

    /// One value. Strings and numbers: their bytes (a string's without the quotes). Arrays and
    /// objects: their element (or member) count and the index of the node after their last.
    struct Node {
        var kind: Kind
        var start: UInt32
        /// Byte count of a scalar; member or element count of an object or array.
        var count: UInt32
        /// Of an array or object: the index of the node after it.
        var end: UInt32
    }

    /// The nodes, and a copy of the text they point into: plain memory, read without reference
    /// counting by every container of a decoding.
    let nodes: UnsafeBufferPointer<Node>
    let bytes: UnsafeBufferPointer<UInt8>

    /// The deepest nesting indexed; deeper documents are left to `JSONDecoder`.
    static let maximumDepth = 512

    /// The tape of `data`; nil when the builder refuses the text (see above).
    static func index(_ data: Data) -> JSONTape? {
        guard data.count < Int(UInt32.max) else { return nil }
        let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: data.count)
        _ = copy.initialize(from: data)
        var builder = Builder(bytes: UnsafeBufferPointer(copy), nodes: NodeList(capacity: data.count / 8 + 4))
        do {
            builder.skipWhitespace()
            try builder.value(depth: 0)
            builder.skipWhitespace()
            guard builder.index == copy.count else { throw TapeDecodingUnsupported() }
        } catch {
            builder.nodes.deallocate()
            copy.deallocate()
            return nil
        }
        return JSONTape(nodes: builder.nodes.buffer, bytes: UnsafeBufferPointer(copy))
    }

    private init(nodes: UnsafeBufferPointer<Node>, bytes: UnsafeBufferPointer<UInt8>) {
        self.nodes = nodes
        self.bytes = bytes
    }

    deinit {
        bytes.deallocate()
        nodes.deallocate()
    }

    /// A growing array of nodes in plain memory (the builder's output).
    private struct NodeList {
        package private(set) var base: UnsafeMutablePointer<Node>
        package private(set) var count = 0
        private var capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        var buffer: UnsafeBufferPointer<Node> { UnsafeBufferPointer(start: base, count: count) }

        mutating func append(_ node: Node) {
            if count == capacity {
                let grown = UnsafeMutablePointer<Node>.allocate(capacity: capacity * 2)
                grown.moveInitialize(from: base, count: count)
                base.deallocate()
                base = grown
                capacity *= 2
            }
            (base + count).initialize(to: node)
            count += 1
        }

        subscript(index: Int) -> Node {
            get { base[index] }
            nonmutating set { base[index] = newValue }
        }

        func deallocate() { base.deallocate() }
    }

    /// The index of the node after `index` and everything inside it.
    @inline(__always)
    func after(_ index: Int) -> Int {
        let node = nodes[index]
        return node.kind == .object || node.kind == .array ? Int(node.end) : index + 1
    }

    private struct Builder {
        let bytes: UnsafeBufferPointer<UInt8>
        var nodes: NodeList
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(TapeDecodingUnsupported) {
            guard index < bytes.count else { throw TapeDecodingUnsupported() }
            switch bytes[index] {
            case UInt8(ascii: "{"): try container(depth: depth, isObject: true)
            case UInt8(ascii: "["): try container(depth: depth, isObject: false)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true", .true)
            case UInt8(ascii: "f"): try literal("false", .false)
            case UInt8(ascii: "n"): try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw TapeDecodingUnsupported()
            }
        }

        mutating func literal(
            _ word: StaticString, _ kind: Kind
        ) throws(TapeDecodingUnsupported) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw TapeDecodingUnsupported() }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                throw TapeDecodingUnsupported()
            }
            nodes.append(Node(kind: kind, start: UInt32(index), count: UInt32(count), end: 0))
            index += count
        }

        mutating func container(
            depth: Int, isObject: Bool
        ) throws(TapeDecodingUnsupported) {
            guard depth < JSONTape.maximumDepth else { throw TapeDecodingUnsupported() }
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            let position = nodes.count
            nodes.append(Node(kind: isObject ? .object : .array, start: UInt32(index), count: 0, end: 0))
            index += 1
            skipWhitespace()
            var count: UInt32 = 0
            if index < bytes.count, bytes[index] == close {
                index += 1
            } else {
                while true {
                    skipWhitespace()
                    if isObject {
                        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                            throw TapeDecodingUnsupported()
                        }
                        try string()
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                            throw TapeDecodingUnsupported()
                        }
                        index += 1
                        skipWhitespace()
                    }
                    try value(depth: depth + 1)
                    count += 1
                    skipWhitespace()
                    guard index < bytes.count else { throw TapeDecodingUnsupported() }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == close {
                        index += 1
                        break
                    } else {
                        throw TapeDecodingUnsupported()
                    }
                }
            }
            nodes[position].count = count
            nodes[position].end = UInt32(nodes.count)
        }

        /// A string: its bytes between the quotes, checked (no control characters, valid
        /// escapes, valid UTF-8); escapes are decoded later, when the string is read.
        mutating func string() throws(TapeDecodingUnsupported) {
            index += 1
            let start = index
            var escaped = false
            var ascii = true
            while true {
                skipPlainASCII()
                guard index < bytes.count else { throw TapeDecodingUnsupported() }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { break }
                if byte < 0x20 { throw TapeDecodingUnsupported() }
                if byte >= 0x80 { ascii = false }
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    index += 1
                    guard index < bytes.count else { throw TapeDecodingUnsupported() }
                    if JSONEscape.byte(for: bytes[index]) != nil {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "u") {
                        index += 1
                        try unicodeEscape()
                    } else {
                        throw TapeDecodingUnsupported()
                    }
                    continue
                }
                index += 1
            }
            let range = start..<index
            if !ascii, String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) == nil {
                throw TapeDecodingUnsupported()
            }
            nodes.append(
                Node(
                    kind: escaped ? .escapedString : .string, start: UInt32(start), count: UInt32(range.count), end: 0))
            index += 1
        }

        /// Moves past string bytes that need no attention (printable ASCII other than `"` and
        /// `\`), eight at a time: in API responses most string bytes are such.
        mutating func skipPlainASCII() {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= bytes.count {
                let word = UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
                // A byte below 0x20, a quote, a backslash or a byte with the high bit set.
                let control = (word &- ones &* 0x20) & ~word
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special = control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | word
                if special & highs != 0 { return }
                index += 8
            }
        }

        /// The four hex digits after `\u` (index at the first), and for a high surrogate the
        /// `\uXXXX` low surrogate that must follow it.
        mutating func unicodeEscape() throws(TapeDecodingUnsupported) {
            let code = try hex4()
            if (0xDC00..<0xE000).contains(code) { throw TapeDecodingUnsupported() }
            guard (0xD800..<0xDC00).contains(code) else { return }
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw TapeDecodingUnsupported() }
            index += 2
            guard (0xDC00..<0xE000).contains(try hex4()) else { throw TapeDecodingUnsupported() }
        }

        mutating func hex4() throws(TapeDecodingUnsupported) -> UInt32 {
            guard index + 4 <= bytes.count else { throw TapeDecodingUnsupported() }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = JSONEscape.hexDigit(bytes[index]) else { throw TapeDecodingUnsupported() }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func number() throws(TapeDecodingUnsupported) {
            let start = index
            var kind = Kind.integer
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw TapeDecodingUnsupported() }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if JSONTape.isDigit(bytes[index]) {
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
            } else {
                throw TapeDecodingUnsupported()
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                kind = .number
                index += 1
                let digits = index
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
                guard index > digits else { throw TapeDecodingUnsupported() }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                kind = .number
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                let digits = index
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
                guard index > digits else { throw TapeDecodingUnsupported() }
            }
            nodes.append(Node(kind: kind, start: UInt32(start), count: UInt32(index - start), end: 0))
        }
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    // MARK: Reading scalars

    /// The text of a string node (escapes decoded; the builder checked them).
    func string(at index: Int) -> String {
        let node = nodes[index]
        let range = Int(node.start)..<Int(node.start + node.count)
        guard node.kind == .escapedString else {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(range.count)
        var position = range.lowerBound
        while position < range.upperBound {
            let byte = bytes[position]
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                position += 1
                continue
            }
            let escape = bytes[position + 1]
            position += 2
            if let byte = JSONEscape.byte(for: escape) {
                decoded.append(byte)
                continue
            }
            // `\uXXXX`, and the low half of a surrogate pair after a high one (checked).
            var code = hex4(at: position)
            position += 4
            if (0xD800..<0xDC00).contains(code) {
                let low = hex4(at: position + 2)
                position += 6
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            }
            UTF8.encode(Unicode.Scalar(code)!) { decoded.append($0) }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    private func hex4(at position: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 << 4 | JSONEscape.hexDigit(bytes[position + $1])! }
    }

    /// Whether a string node's text equals `text` (compared as bytes when it has no escapes).
    func string(at index: Int, equals text: String) -> Bool {
        let node = nodes[index]
        guard node.kind == .string else { return string(at: index) == text }
        var text = text
        return text.withUTF8 { expected in
            guard expected.count == Int(node.count) else { return false }
            return memcmp(bytes.baseAddress! + Int(node.start), expected.baseAddress!, expected.count) == 0
        }
    }

    /// An integer node's value, when it fits in `T`; nil otherwise (and for every number with
    /// a fraction or an exponent, and every negative number for an unsigned `T`).
    func integer<T: FixedWidthInteger>(at index: Int, as type: T.Type) -> T? {
        let node = nodes[index]
        guard node.kind == .integer else { return nil }
        var position = Int(node.start)
        let end = position + Int(node.count)
        let negative = bytes[position] == UInt8(ascii: "-")
        if negative {
            guard T.isSigned else { return nil }
            position += 1
        }
        var value: T = 0
        while position < end {
            let digit = T(bytes[position] - UInt8(ascii: "0"))
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) =
                negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else { return nil }
            value = next
            position += 1
        }
        return value
    }

    /// A number node's value as `Double`, when it is a normal finite number or zero written as
    /// zero (no exponent); nil otherwise (over- and underflow, and zero with an exponent, where
    /// `JSONDecoder` has its own rules).
    func double(at index: Int) -> Double? {
        let node = nodes[index]
        guard node.kind == .integer || node.kind == .number else { return nil }
        let text = UnsafeBufferPointer(rebasing: bytes[Int(node.start)..<Int(node.start + node.count)])
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { return nil }
        if value.isNormal { return value }
        guard value == 0 else { return nil }  // subnormal
        // Zero only when written as zero without an exponent: an underflow (`1e-400`) is
        // JSONDecoder's to judge, and so is `0e8`, which Foundation's parser refuses.
        for byte in text {
            if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { return nil }
            if byte >= UInt8(ascii: "1") && byte <= UInt8(ascii: "9") { return nil }
        }
        return value
    }
}

/// The fast decoder cannot vouch for the answer `JSONDecoder` would give: the caller decodes
/// again with `JSONDecoder`.
struct TapeDecodingUnsupported: Error {}
