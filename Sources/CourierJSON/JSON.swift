import Foundation

/// A JSON value: what `JSONResponseSerializer` produces and what parameters are written as.
///
/// Literals of mixed types build one directly, and subscripts read nested values without
/// optional chaining (a missing key or index reads as ``null``):
///
/// ```swift
/// let parameters: JSON = ["page": 2, "tags": ["a", "b"], "draft": false]
/// let page = response["args"]["page"].stringValue
/// ```
public enum JSON: Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits in `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object. Keys are unordered; Courier writes them sorted.
    case object([String: JSON])
}

// MARK: - Reading values

extension JSON {
    /// The value for `key` when this is an object, else ``null``. Setting on a non-object makes it one.
    public subscript(key: String) -> JSON {
        get {
            if case .object(let object) = self { return object[key] ?? .null }
            return .null
        }
        set {
            var object: [String: JSON] = [:]
            if case .object(let existing) = self { object = existing }
            object[key] = newValue
            self = .object(object)
        }
    }

    /// The element at `index` when this is an array and the index is in range, else ``null``.
    public subscript(index: Int) -> JSON {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return .null
    }

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as `Int`, when this is an integer (or a double with no fractional part).
    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// The number as `Double`, when this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The Boolean, when this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, when this is an object.
    public var objectValue: [String: JSON]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// Whether this is ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A copy with every `null` member of every object removed, recursively (array elements stay).
    public func removingNullValues() -> JSON {
        switch self {
        case .object(let object):
            var result: [String: JSON] = [:]
            result.reserveCapacity(object.count)
            for (key, value) in object where !value.isNull {
                result[key] = value.removingNullValues()
            }
            return .object(result)
        case .array(let array):
            return .array(array.map { $0.removingNullValues() })
        default:
            return self
        }
    }
}

// MARK: - Equality

extension JSON: Hashable {
    /// Numbers compare by value, so `.int(2) == .double(2.0)`.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b && Int(exactly: b) == a
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    /// Hashes consistently with ``==(_:_:)`` (integral doubles hash as integers).
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .int(let value): hasher.combine(value)
        case .double(let value):
            if let integer = Int(exactly: value) { hasher.combine(integer) } else { hasher.combine(value) }
        case .string(let value): hasher.combine(value)
        case .array(let value): hasher.combine(value)
        case .object(let value): hasher.combine(value)
        }
    }
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// `nil` is JSON `null`.
    public init(nilLiteral: ()) { self = .null }
    /// A Boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array literal.
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    /// A dictionary literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var object: [String: JSON] = [:]
        object.reserveCapacity(elements.count)
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

// MARK: - Text

extension JSON: CustomStringConvertible {
    /// Compact JSON text with sorted keys.
    public var description: String { String(decoding: serialized(), as: UTF8.self) }
}

// MARK: - Codable

extension JSON: Codable {
    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var elements: [JSON] = []
            while !array.isAtEnd { elements.append(try array.decode(JSON.self)) }
            self = .array(elements)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var members: [String: JSON] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSON.self, forKey: key) }
            self = .object(members)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int.self) {
            self = .int(value)
        } else if let value = try? single.decode(Double.self) {
            self = .double(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    /// Encodes the value as the matching JSON value.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .int(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .double(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .string(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .array(let elements):
            var array = encoder.unkeyedContainer()
            for element in elements { try array.encode(element) }
        case .object(let members):
            var object = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in members { try object.encode(value, forKey: AnyCodingKey(stringValue: key)) }
        }
    }
}

extension JSON {
    /// Converts any `Encodable` value to `JSON` (through `JSONEncoder`, so its strategies apply).
    public init(encoding value: some Encodable, encoder: JSONEncoder = JSONEncoder()) throws {
        if let json = value as? JSON {
            self = json
            return
        }
        self = try JSON(parsing: encoder.encode(value))
    }

    /// Decodes this value as `type` (through `JSONDecoder`, so its strategies apply).
    public func decode<T: Decodable>(_ type: T.Type = T.self, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: serialized())
    }
}

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}
