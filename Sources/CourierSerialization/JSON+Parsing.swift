@_spi(CourierInternals) import CourierCore
import Foundation

extension JSON {
    /// Parses JSON text (RFC 8259). Throws ``JSONParsingError`` with the byte offset of the problem.
    ///
    /// Any value is accepted at the top level, surrounded by optional whitespace.
    public init(parsing data: Data) throws {
        self = try data.withUnsafeBytes { bytes in
            var parser = JSONParser(bytes: bytes)
            return try parser.parseDocument()
        }
    }

    /// Parses JSON text from a string.
    public init(parsing text: String) throws {
        try self.init(parsing: Data(text.utf8))
    }
}

/// Why JSON text could not be parsed.
public struct JSONParsingError: Error, Sendable, CustomStringConvertible {
    /// The byte offset where parsing stopped.
    public var offset: Int
    /// What was wrong there.
    public var reason: String

    /// `<reason> at byte <offset>`.
    public var description: String { "\(reason) at byte \(offset)" }
}

/// A recursive-descent parser over the raw bytes; strings without escapes are decoded in one step.
private struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    var index = 0
    var depth = 0
    static let maximumDepth = 512

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw failure("unexpected text after the value") }
        return value
    }

    func failure(_ reason: String) -> JSONParsingError {
        JSONParsingError(offset: index, reason: reason)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws -> JSON {
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    mutating func parseLiteral(_ word: StaticString, _ value: JSON) throws -> JSON {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("unexpected end of input") }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
            throw failure("invalid literal")
        }
        index += count
        return value
    }

    mutating func enter() throws {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nesting deeper than \(Self.maximumDepth)") }
    }

    mutating func parseObject() throws -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [String: JSON] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            members[key] = try parseValue()
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    mutating func parseArray() throws -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    mutating func parseString() throws -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("control character in string") }
            index += 1
        }
        var scalars = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: scalars, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unexpected end of input") }
                let escape = bytes[index]
                index += 1
                if let byte = JSONEscape.byte(for: escape) {
                    scalars.append(byte)
                    continue
                }
                switch escape {
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800..<0xDC00).contains(code) {
                        // A high surrogate must be followed by an escaped low surrogate.
                        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        {
                            index += 2
                            let low = try parseHex4()
                            if (0xDC00..<0xE000).contains(low) {
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                appendScalar(0xFFFD, to: &scalars)
                                code = low
                            }
                        } else {
                            code = 0xFFFD
                        }
                    } else if (0xDC00..<0xE000).contains(code) {
                        code = 0xFFFD
                    }
                    appendScalar(code, to: &scalars)
                default:
                    index -= 1
                    throw failure("invalid escape")
                }
            default:
                if byte < 0x20 { throw failure("control character in string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw failure("unterminated string")
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = JSONEscape.hexDigit(bytes[index]) else { throw failure("invalid \\u escape") }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    func appendScalar(_ code: UInt32, to buffer: inout [UInt8]) {
        let scalar = Unicode.Scalar(code) ?? "\u{FFFD}"
        UTF8.encode(scalar) { buffer.append($0) }
    }

    mutating func parseNumber() throws -> JSON {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw failure("unexpected end of input") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        } else {
            throw failure("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw failure("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw failure("invalid number") }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let integer = Int(text) { return .int(integer) }
        // A number beyond Double's range (`1e999`) is refused, as JSONDecoder refuses it: read
        // as infinity it could not be written back as JSON.
        guard let double = Double(text), double.isFinite else { throw failure("number out of range: \(text)") }
        return .double(double)
    }
}

/// JSON's one-character escapes (RFC 8259 section 7).
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
}
