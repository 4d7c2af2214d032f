import Foundation

extension JSON {
    /// The deepest nesting of arrays and objects that Courier reads: `JSON(parsing:)` and the
    /// decoding of a response (`DecodableResponseSerializer`, JSON Lines, decoded events) refuse
    /// text nested deeper, with the same ``JSONParsingError``. `JSONDecoder` has the same limit.
    public static let maximumNestingDepth = 512

    /// Parses JSON text (RFC 8259). Throws ``JSONParsingError`` with the byte offset of the problem.
    ///
    /// Any value is accepted at the top level, surrounded by optional whitespace. The text must
    /// be UTF-8, nested at most ``maximumNestingDepth`` deep, with numbers within `Double`'s
    /// range. An object that repeats a name keeps its last value; a `\u` escape of half a
    /// surrogate pair alone reads as U+FFFD.
    public init(parsing data: Data) throws {
        let tape = try JSONTape.index(data)
        self = try tape.json(at: 0)
    }

    /// Parses JSON text from a string.
    public init(parsing text: String) throws {
        try self.init(parsing: Data(text.utf8))
    }
}

/// Why JSON text could not be parsed.
public struct JSONParsingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The byte offset where parsing stopped.
    public var offset: Int
    /// What was wrong there.
    public var reason: String
    /// The reason given for text nested deeper than `JSON.maximumNestingDepth`.
    static let nestingTooDeep = "nesting deeper than \(JSON.maximumNestingDepth)"

    /// Whether the text nests deeper than `JSON.maximumNestingDepth`: the one refusal the
    /// decoding of a response does not leave to `JSONDecoder`.
    package var isNestingTooDeep: Bool { reason == Self.nestingTooDeep }

    package init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    /// `<reason> at byte <offset>`.
    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONTape {
    /// The `JSON` value of the node at `index`, and of everything inside it. Recursive, as
    /// deep as the tape (at most `JSON.maximumNestingDepth`).
    func json(at index: Int) throws(JSONParsingError) -> JSON {
        let node = nodes[index]
        switch node.kind {
        case .null: return .null
        case .true: return .bool(true)
        case .false: return .bool(false)
        case .string, .escapedString: return .string(string(at: index))
        case .integer, .number:
            if node.kind == .integer, let integer = integer(at: index, as: Int.self) { return .int(integer) }
            let text = String(
                decoding: UnsafeBufferPointer(rebasing: bytes[Int(node.start)..<Int(node.start + node.count)]),
                as: UTF8.self)
            // A number beyond Double's range (`1e999`) is refused, as JSONDecoder refuses it:
            // read as infinity it could not be written back as JSON.
            guard let double = Double(text), double.isFinite else {
                throw JSONParsingError(offset: Int(node.start + node.count), reason: "number out of range: \(text)")
            }
            return .double(double)
        case .array:
            var elements: [JSON] = []
            elements.reserveCapacity(Int(node.count))
            var position = index + 1
            for _ in 0..<node.count {
                elements.append(try json(at: position))
                position = after(position)
            }
            return .array(elements)
        case .object:
            var members: [String: JSON] = [:]
            members.reserveCapacity(Int(node.count))
            var position = index + 1
            for _ in 0..<node.count {
                // A repeated name keeps its last value (RFC 8259 section 4: what many
                // implementations do).
                members[string(at: position)] = try json(at: position + 1)
                position = after(position + 1)
            }
            return .object(members)
        }
    }
}
