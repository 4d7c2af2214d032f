import Foundation

/// JSON text indexed in one pass: every value is a node, in document order, and each array
/// or object knows where it ends. It is Courier's one JSON grammar: `JSON(parsing:)` builds its
/// value from the nodes (`JSON+Parsing.swift`), and `TapeDecoder` decodes `Decodable` types
/// walking them, without building intermediate values.
///
/// The grammar is RFC 8259's, strictly: no trailing commas, no comments, no byte order mark,
/// valid UTF-8 only (section 8.1), nothing after the value, and arrays and objects nested at
/// most `JSON.maximumNestingDepth` deep. Text outside it is refused with a
/// `JSONParsingError` naming the byte. A `\u` escape of half a surrogate pair without its
/// other half is grammatical (section 8.2 leaves its meaning open): it reads as U+FFFD, and
/// the tape notes it (`hasLoneSurrogates`) for the tape decoder, which leaves such text to
/// `JSONDecoder`.
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
    /// Whether a string holds a `\u` escape of half a surrogate pair alone (read as U+FFFD).
    let hasLoneSurrogates: Bool

    /// The tape of `data`, or the reason the text is not JSON and where.
    static func index(_ data: Data) throws(JSONParsingError) -> JSONTape {
        guard data.count < Int(UInt32.max) else {
            throw JSONParsingError(offset: 0, reason: "text of 4 GiB or more")
        }
        let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: data.count)
        _ = copy.initialize(from: data)
        var builder = Builder(bytes: UnsafeBufferPointer(copy), nodes: NodeList(capacity: data.count / 8 + 4))
        do throws(Failure) {
            builder.skipWhitespace()
            try builder.value(depth: 0)
            builder.skipWhitespace()
            guard builder.index == copy.count else { throw builder.failure(.textAfterTheValue) }
        } catch {
            builder.nodes.deallocate()
            copy.deallocate()
            throw error.parsingError
        }
        return JSONTape(
            nodes: builder.nodes.buffer, bytes: UnsafeBufferPointer(copy),
            hasLoneSurrogates: builder.hasLoneSurrogates)
    }

    private init(nodes: UnsafeBufferPointer<Node>, bytes: UnsafeBufferPointer<UInt8>, hasLoneSurrogates: Bool) {
        self.nodes = nodes
        self.bytes = bytes
        self.hasLoneSurrogates = hasLoneSurrogates
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

    /// Why the builder stopped, and where: a trivial value, so that the scanning loops carry no
    /// string; it becomes a `JSONParsingError` at the end.
    struct Failure: Error {
        enum Problem: UInt8 {
            case endOfInput, unexpectedCharacter, invalidLiteral, tooDeep, expectedKey, expectedColon
            case expectedCommaOrBrace, expectedCommaOrBracket, unterminatedString, controlCharacter
            case invalidEscape, invalidUnicodeEscape, invalidUTF8, invalidNumber, textAfterTheValue
        }

        var problem: Problem
        var offset: Int

        var parsingError: JSONParsingError {
            let reason =
                switch problem {
                case .endOfInput: "unexpected end of input"
                case .unexpectedCharacter: "unexpected character"
                case .invalidLiteral: "invalid literal"
                case .tooDeep: JSONParsingError.nestingTooDeep
                case .expectedKey: "expected a key"
                case .expectedColon: "expected ':'"
                case .expectedCommaOrBrace: "expected ',' or '}'"
                case .expectedCommaOrBracket: "expected ',' or ']'"
                case .unterminatedString: "unterminated string"
                case .controlCharacter: "control character in string"
                case .invalidEscape: "invalid escape"
                case .invalidUnicodeEscape: "invalid \\u escape"
                case .invalidUTF8: "invalid UTF-8"
                case .invalidNumber: "invalid number"
                case .textAfterTheValue: "unexpected text after the value"
                }
            return JSONParsingError(offset: offset, reason: reason)
        }
    }

    private struct Builder {
        let bytes: UnsafeBufferPointer<UInt8>
        var nodes: NodeList
        var index = 0
        var hasLoneSurrogates = false

        func failure(_ problem: Failure.Problem) -> Failure {
            Failure(problem: problem, offset: index)
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(Failure) {
            guard index < bytes.count else { throw failure(.endOfInput) }
            switch bytes[index] {
            case UInt8(ascii: "{"): try container(depth: depth, isObject: true)
            case UInt8(ascii: "["): try container(depth: depth, isObject: false)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true", .true)
            case UInt8(ascii: "f"): try literal("false", .false)
            case UInt8(ascii: "n"): try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw failure(.unexpectedCharacter)
            }
        }

        mutating func literal(_ word: StaticString, _ kind: Kind) throws(Failure) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw failure(.endOfInput) }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                throw failure(.invalidLiteral)
            }
            nodes.append(Node(kind: kind, start: UInt32(index), count: UInt32(count), end: 0))
            index += count
        }

        /// An array or an object; `depth` counts the containers around it (0 at the top), so
        /// that `JSON.maximumNestingDepth` containers nest and one more does not.
        mutating func container(depth: Int, isObject: Bool) throws(Failure) {
            guard depth < JSON.maximumNestingDepth else { throw failure(.tooDeep) }
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
                            throw failure(.expectedKey)
                        }
                        try string()
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                            throw failure(.expectedColon)
                        }
                        index += 1
                        skipWhitespace()
                    }
                    try value(depth: depth + 1)
                    count += 1
                    skipWhitespace()
                    guard index < bytes.count else { throw failure(.endOfInput) }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == close {
                        index += 1
                        break
                    } else {
                        throw failure(isObject ? .expectedCommaOrBrace : .expectedCommaOrBracket)
                    }
                }
            }
            nodes[position].count = count
            nodes[position].end = UInt32(nodes.count)
        }

        /// A string: its bytes between the quotes, checked (no control characters, valid
        /// escapes, valid UTF-8); escapes are decoded later, when the string is read.
        mutating func string() throws(Failure) {
            index += 1
            let start = index
            var escaped = false
            var ascii = true
            while true {
                skipPlainASCII()
                guard index < bytes.count else { throw failure(.unterminatedString) }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { break }
                if byte < 0x20 { throw failure(.controlCharacter) }
                if byte >= 0x80 { ascii = false }
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    index += 1
                    guard index < bytes.count else { throw failure(.endOfInput) }
                    if JSONEscape.byte(for: bytes[index]) != nil {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "u") {
                        index += 1
                        try unicodeEscape()
                    } else {
                        throw failure(.invalidEscape)
                    }
                    continue
                }
                index += 1
            }
            let range = start..<index
            if !ascii, String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) == nil {
                throw Failure(problem: .invalidUTF8, offset: firstInvalidUTF8(in: range))
            }
            nodes.append(
                Node(
                    kind: escaped ? .escapedString : .string, start: UInt32(start), count: UInt32(range.count), end: 0))
            index += 1
        }

        /// The offset of the first byte of `range` that does not begin valid UTF-8 (for the
        /// error only: the check itself is `String(validating:)`).
        func firstInvalidUTF8(in range: Range<Int>) -> Int {
            var parser = Unicode.UTF8.ForwardParser()
            var iterator = UnsafeBufferPointer(rebasing: bytes[range]).makeIterator()
            var offset = range.lowerBound
            while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid(let scalar): offset += scalar.count
                case .error: return offset
                case .emptyInput: return offset
                }
            }
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
        /// `\uXXXX` low surrogate after it when there is one. Half a pair alone is noted.
        mutating func unicodeEscape() throws(Failure) {
            let code = try hex4()
            guard (0xD800..<0xE000).contains(code) else { return }
            if code < 0xDC00, index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                bytes[index + 1] == UInt8(ascii: "u"), let low = JSONEscape.hex4(bytes, at: index + 2),
                (0xDC00..<0xE000).contains(low)
            {
                index += 6
                return
            }
            hasLoneSurrogates = true
        }

        mutating func hex4() throws(Failure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw failure(.endOfInput) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = JSONEscape.hexDigit(bytes[index]) else { throw failure(.invalidUnicodeEscape) }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func number() throws(Failure) {
            let start = index
            var kind = Kind.integer
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw failure(.endOfInput) }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if JSONTape.isDigit(bytes[index]) {
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
            } else {
                throw failure(.invalidNumber)
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                kind = .number
                index += 1
                let digits = index
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
                guard index > digits else { throw failure(.invalidNumber) }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                kind = .number
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                let digits = index
                while index < bytes.count, JSONTape.isDigit(bytes[index]) { index += 1 }
                guard index > digits else { throw failure(.invalidNumber) }
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
            // `\uXXXX` (the builder checked the digits of every one), and the low half of a
            // surrogate pair after a high one; half a pair alone is U+FFFD.
            var code = hex4(at: position)
            position += 4
            if (0xD800..<0xDC00).contains(code), position + 6 <= range.upperBound,
                bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
            {
                let low = hex4(at: position + 2)
                if (0xDC00..<0xE000).contains(low) {
                    position += 6
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
            }
            UTF8.encode(Unicode.Scalar(code) ?? "\u{FFFD}") { decoded.append($0) }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    private func hex4(at position: Int) -> UInt32 {
        JSONEscape.hex4(bytes, at: position)!
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

/// JSON's escapes (RFC 8259 section 7).
enum JSONEscape {
    /// The byte `\<escape>` stands for (`n` gives a line feed); nil for `u` and for anything
    /// that is not an escape.
    static func byte(for escape: UInt8) -> UInt8? {
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): escape
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }

    /// The value of a hex digit of a `\uXXXX` escape, either case; nil for any other byte.
    static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// The four hex digits at `position` (all within `bytes`) as a number; nil when one is
    /// not a hex digit.
    static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, at position: Int) -> UInt32? {
        var value: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = hexDigit(bytes[position + offset]) else { return nil }
            value = value << 4 | digit
        }
        return value
    }
}
