import Foundation

/// A `Decodable` decoder over a `JSONTape`, for `DecodableResponseSerializer`: about twice as
/// fast as `JSONDecoder` on an API's small objects (Documentation/Benchmarks.md, "Measurements
/// behind the code"), because it builds no intermediate values (keys are compared in place,
/// strings made only when asked for).
///
/// It gives `JSONDecoder`'s answer or none: whatever it cannot vouch for (`Date`, `Data`,
/// `URL`, `Decimal`, `Float`, a number with a fraction or exponent read as an integer, a
/// number out of range, `superDecoder`, text `JSONDecoder` reads leniently or refuses) makes
/// the whole decoding unusable (`TapeContext.bailed`), and the caller decodes again with
/// `JSONDecoder`. A decoding error (a missing key, a type mismatch) also goes back to
/// `JSONDecoder`, whose message the caller then gets. Only a value decoded without either is
/// returned. Errors thrown inside a decode are `DecodingError`s shaped like `JSONDecoder`'s,
/// for `init(from:)` code that catches them.
///
/// Text nested deeper than `JSON.maximumNestingDepth` is the exception: it is refused here,
/// with the `JSONParsingError` that `JSON(parsing:)` throws for it, so that one limit holds
/// for both.
package enum TapeDecoding {
    /// `type` decoded from `data` as `decoder` would decode it, or nil when `JSONDecoder`
    /// must decide (see above). Only decoders with the default strategies for keys and
    /// non-conforming floats, and without JSON5, are matched. Throws only for text nested
    /// deeper than `JSON.maximumNestingDepth`.
    package static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, like decoder: JSONDecoder
    ) throws(JSONParsingError) -> T? {
        guard case .useDefaultKeys = decoder.keyDecodingStrategy,
            case .throw = decoder.nonConformingFloatDecodingStrategy,
            !decoder.allowsJSON5, !decoder.assumesTopLevelDictionary
        else { return nil }
        let tape: JSONTape
        do throws(JSONParsingError) {
            tape = try JSONTape.index(data)
        } catch {
            if error.isNestingTooDeep { throw error }
            return nil
        }
        // JSONDecoder refuses half a surrogate pair, which the tape reads as U+FFFD.
        guard !tape.hasLoneSurrogates else { return nil }
        let userInfo = decoder.userInfo
        let context = TapeContext(tape: tape, userInfo: userInfo.isEmpty ? [:] : userInfo.mapValues { $0 as Any })
        guard let value = try? context.value(T.self, at: 0, path: .root), !context.bailed else { return nil }
        return value
    }
}

/// The tape decoder cannot vouch for the answer `JSONDecoder` would give: the caller decodes
/// again with `JSONDecoder`.
struct TapeDecodingUnsupported: Error {}

/// The state one decoding shares between its decoders and containers.
final class TapeContext {
    let tape: JSONTape
    let userInfo: [CodingUserInfoKey: Any]
    /// An answer could not be vouched for: the result, whatever it is, is not used.
    package private(set) var bailed = false
    /// Objects with many members: their keys' first occurrences, built on first lookup.
    private var keyIndexes: [Int: [String: Int]] = [:]

    init(tape: JSONTape, userInfo: [CodingUserInfoKey: Any]) {
        self.tape = tape
        self.userInfo = userInfo
    }

    /// Marks the decoding unusable; throw what this returns.
    func bail() -> TapeDecodingUnsupported {
        bailed = true
        return TapeDecodingUnsupported()
    }

    // MARK: Values

    func kindName(_ node: Int) -> String {
        switch tape.nodes[node].kind {
        case .object: "a dictionary"
        case .array: "an array"
        case .string, .escapedString: "a string"
        case .integer, .number: "number"
        case .true, .false: "bool"
        case .null: "null"
        }
    }

    /// The error for a value of the wrong kind: `valueNotFound` for null, else `typeMismatch`.
    func mismatch(_ type: Any.Type, at node: Int, path: TapePath) -> DecodingError {
        let codingPath = path.keys
        if tape.nodes[node].kind == .null {
            return .valueNotFound(
                type,
                .init(
                    codingPath: codingPath,
                    debugDescription: "Cannot get value of type \(type) -- found null value instead"))
        }
        return .typeMismatch(
            type,
            .init(
                codingPath: codingPath,
                debugDescription: "Expected to decode \(type) but found \(kindName(node)) instead."))
    }

    func bool(at node: Int, path: TapePath) throws -> Bool {
        switch tape.nodes[node].kind {
        case .true: return true
        case .false: return false
        default: throw mismatch(Bool.self, at: node, path: path)
        }
    }

    func string(at node: Int, path: TapePath) throws -> String {
        let kind = tape.nodes[node].kind
        guard kind == .string || kind == .escapedString else { throw mismatch(String.self, at: node, path: path) }
        return tape.string(at: node)
    }

    func double(at node: Int, path: TapePath) throws -> Double {
        let kind = tape.nodes[node].kind
        guard kind == .integer || kind == .number else { throw mismatch(Double.self, at: node, path: path) }
        guard let value = tape.double(at: node) else { throw bail() }
        return value
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type, at node: Int, path: TapePath) throws -> T {
        let kind = tape.nodes[node].kind
        guard kind == .integer || kind == .number else { throw mismatch(T.self, at: node, path: path) }
        guard let value = tape.integer(at: node, as: T.self) else { throw bail() }
        return value
    }

    /// Any `Decodable`: the types `JSONDecoder` treats specially are left to it.
    func value<T: Decodable>(_ type: T.Type, at node: Int, path: TapePath) throws -> T {
        if T.self == String.self { return try string(at: node, path: path) as! T }
        if T.self == Int.self { return try integer(Int.self, at: node, path: path) as! T }
        if T.self == Double.self { return try double(at: node, path: path) as! T }
        if T.self == Bool.self { return try bool(at: node, path: path) as! T }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self
            || T.self == Float.self
        {
            throw bail()
        }
        return try T(from: TapeDecoder(context: self, node: node, path: path))
    }

    // MARK: Objects

    /// The value node of the first member of `object` named `key`, if any.
    func member(_ key: String, of object: Int) -> Int? {
        let count = Int(tape.nodes[object].count)
        if count > 16 {
            if keyIndexes[object] == nil { keyIndexes[object] = keyIndex(of: object) }
            return keyIndexes[object]?[key]
        }
        var position = object + 1
        for _ in 0..<count {
            if tape.string(at: position, equals: key) { return position + 1 }
            position = tape.after(position + 1)
        }
        return nil
    }

    private func keyIndex(of object: Int) -> [String: Int] {
        var index: [String: Int] = [:]
        var position = object + 1
        for _ in 0..<Int(tape.nodes[object].count) {
            let key = tape.string(at: position)
            if index[key] == nil { index[key] = position + 1 }
            position = tape.after(position + 1)
        }
        return index
    }

    /// The names of `object`'s members, each once, in document order.
    func memberNames(of object: Int) -> [String] {
        var names: [String] = []
        var seen = Set<String>()
        var position = object + 1
        for _ in 0..<Int(tape.nodes[object].count) {
            let key = tape.string(at: position)
            if seen.insert(key).inserted { names.append(key) }
            position = tape.after(position + 1)
        }
        return names
    }
}

/// A coding path, built into an array only when asked for (errors, `codingPath`).
indirect enum TapePath {
    case root
    case key(any CodingKey, TapePath)
    case index(Int, TapePath)

    var keys: [any CodingKey] {
        var keys: [any CodingKey] = []
        var path = self
        while true {
            switch path {
            case .root: return keys.reversed()
            case .key(let key, let parent):
                keys.append(key)
                path = parent
            case .index(let index, let parent):
                keys.append(TapeIndexKey(index))
                path = parent
            }
        }
    }
}

/// An array position in a coding path, as `JSONDecoder` names it (`Index 3`).
struct TapeIndexKey: CodingKey {
    var stringValue: String
    var intValue: Int?

    init(_ index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }

    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.init(intValue) }
}

struct TapeDecoder: Decoder {
    let context: TapeContext
    let node: Int
    let path: TapePath

    var codingPath: [any CodingKey] { path.keys }
    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard context.tape.nodes[node].kind == .object else {
            throw containerMismatch([String: Any].self, "keyed decoding container")
        }
        return KeyedDecodingContainer(TapeKeyedContainer<Key>(context: context, object: node, path: path))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard context.tape.nodes[node].kind == .array else {
            throw containerMismatch([Any].self, "unkeyed decoding container")
        }
        return TapeUnkeyedContainer(context: context, array: node, path: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        TapeSingleValueContainer(context: context, node: node, path: path)
    }

    private func containerMismatch(_ type: Any.Type, _ what: String) -> DecodingError {
        if context.tape.nodes[node].kind == .null {
            return .valueNotFound(
                type, .init(codingPath: codingPath, debugDescription: "Cannot get \(what) -- found null value instead"))
        }
        return .typeMismatch(
            type,
            .init(
                codingPath: codingPath,
                debugDescription: "Expected to decode \(type) but found \(context.kindName(node)) instead."))
    }
}

struct TapeSingleValueContainer: SingleValueDecodingContainer {
    let context: TapeContext
    let node: Int
    let path: TapePath

    var codingPath: [any CodingKey] { path.keys }

    func decodeNil() -> Bool { context.tape.nodes[node].kind == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try context.bool(at: node, path: path) }
    func decode(_ type: String.Type) throws -> String { try context.string(at: node, path: path) }
    func decode(_ type: Double.Type) throws -> Double { try context.double(at: node, path: path) }
    func decode(_ type: Float.Type) throws -> Float { throw context.bail() }
    func decode(_ type: Int.Type) throws -> Int { try context.integer(type, at: node, path: path) }
    func decode(_ type: Int8.Type) throws -> Int8 { try context.integer(type, at: node, path: path) }
    func decode(_ type: Int16.Type) throws -> Int16 { try context.integer(type, at: node, path: path) }
    func decode(_ type: Int32.Type) throws -> Int32 { try context.integer(type, at: node, path: path) }
    func decode(_ type: Int64.Type) throws -> Int64 { try context.integer(type, at: node, path: path) }
    func decode(_ type: UInt.Type) throws -> UInt { try context.integer(type, at: node, path: path) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try context.integer(type, at: node, path: path) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try context.integer(type, at: node, path: path) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try context.integer(type, at: node, path: path) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try context.integer(type, at: node, path: path) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try context.value(type, at: node, path: path) }
}

struct TapeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let context: TapeContext
    let object: Int
    let path: TapePath

    var codingPath: [any CodingKey] { path.keys }

    var allKeys: [Key] { context.memberNames(of: object).compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { context.member(key.stringValue, of: object) != nil }

    /// The value node of `key`, or `keyNotFound`.
    private func value(_ key: Key) throws -> Int {
        guard let node = context.member(key.stringValue, of: object) else {
            throw DecodingError.keyNotFound(
                key,
                .init(
                    codingPath: path.keys,
                    debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return node
    }

    func decodeNil(forKey key: Key) throws -> Bool { context.tape.nodes[try value(key)].kind == .null }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try context.bool(at: try value(key), path: .key(key, path))
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try context.string(at: try value(key), path: .key(key, path))
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try context.double(at: try value(key), path: .key(key, path))
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw context.bail() }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type, _ key: Key) throws -> T {
        try context.integer(type, at: try value(key), path: .key(key, path))
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try context.value(type, at: try value(key), path: .key(key, path))
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let node = context.member(key.stringValue, of: object), context.tape.nodes[node].kind != .null else {
            return nil
        }
        return try context.value(type, at: node, path: .key(key, path))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try TapeDecoder(context: context, node: try value(key), path: .key(key, path)).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TapeDecoder(context: context, node: try value(key), path: .key(key, path)).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw context.bail() }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw context.bail() }
}

struct TapeUnkeyedContainer: UnkeyedDecodingContainer {
    let context: TapeContext
    let path: TapePath
    let count: Int?
    package private(set) var currentIndex = 0
    /// The node of the element at `currentIndex`.
    private var next: Int

    init(context: TapeContext, array: Int, path: TapePath) {
        self.context = context
        self.path = path
        count = Int(context.tape.nodes[array].count)
        next = array + 1
    }

    var codingPath: [any CodingKey] { path.keys }
    var isAtEnd: Bool { currentIndex >= count! }

    /// The current element's node, or `valueNotFound` at the end.
    private func current(_ type: Any.Type) throws -> Int {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                .init(
                    codingPath: TapePath.index(currentIndex, path).keys,
                    debugDescription: "Unkeyed container is at end."))
        }
        return next
    }

    private mutating func advance() {
        next = context.tape.after(next)
        currentIndex += 1
    }

    private var elementPath: TapePath { .index(currentIndex, path) }

    mutating func decodeNil() throws -> Bool {
        guard context.tape.nodes[try current(Any?.self)].kind == .null else { return false }
        advance()
        return true
    }

    /// Reads the current element with `read`, and moves past it only when that succeeded (as
    /// `JSONDecoder`'s container does). `type` names what was expected, at the end.
    private mutating func next<T>(_ type: Any.Type, _ read: (Int, TapePath) throws -> T) throws -> T {
        let value = try read(try current(type), elementPath)
        advance()
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, context.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, context.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type, context.double) }

    mutating func decode(_ type: Float.Type) throws -> Float { throw context.bail() }

    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    private mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try next(type) { [context] in try context.integer(type, at: $0, path: $1) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next(type) { [context] in try context.value(type, at: $0, path: $1) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try next([String: Any].self) { [context] in
            try TapeDecoder(context: context, node: $0, path: $1).container(keyedBy: type)
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next([Any].self) { [context] in
            try TapeDecoder(context: context, node: $0, path: $1).unkeyedContainer()
        }
    }

    mutating func superDecoder() throws -> any Decoder { throw context.bail() }
}
