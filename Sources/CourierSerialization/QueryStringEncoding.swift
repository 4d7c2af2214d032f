import CourierCore
import CourierJSON
import Foundation

/// The AFNetworking query-string encoding, used for URL queries and form bodies. These are
/// its defaults; ``QueryEncodingOptions`` changes them per serializer.
///
/// - Objects become `key=value` pairs, keys sorted; nested objects `key[sub]=value`; arrays
///   `key[]=value` (RFC 3986 has no rule for nesting; this is the Rails/PHP convention that
///   AFNetworking, Alamofire and httpbin's Flask all read).
/// - Booleans are `1` and `0` (AFNetworking's `NSNumber` and Alamofire's default), `null` is
///   the bare key.
/// - Keys and values are percent-encoded except the RFC 3986 unreserved characters and `?` and
///   `/`, which RFC 3986 section 3.4 allows in a query (AFNetworking's
///   `AFPercentEscapedStringFromString`).
public enum QueryStringEncoding {
    /// Encodes an object's members. Throws if `parameters` is not an object.
    public static func encode(
        _ parameters: JSON, options: QueryEncodingOptions = .init()
    ) throws(CourierError)
        -> String
    {
        let plus = options.spaces == .plusReplaced
        return try pairs(parameters, options: options).map { name, value in
            let name = escape(name, spacesAsPlus: plus)
            return value.map { "\(name)=\(escape($0, spacesAsPlus: plus))" } ?? name
        }.joined(separator: "&")
    }

    /// The flattened name-value pairs of an object, unescaped (`user[name]`, `tags[]`); nil
    /// for `null` values.
    static func pairs(
        _ parameters: JSON, options: QueryEncodingOptions = .init()
    ) throws(CourierError) -> [(
        String, String?
    )] {
        guard case .object = parameters else {
            throw .serializationFailed(
                .init(message: "Query and form parameters must be an object of named values, not \(parameters)"))
        }
        try parameters.requireFiniteNumbers()
        var pairs: [(String, String?)] = []
        collectPairs(key: nil, value: parameters, options: options, into: &pairs)
        return pairs
    }

    private static func collectPairs(
        key: String?, value: JSON, options: QueryEncodingOptions, into pairs: inout [(String, String?)]
    ) {
        switch value {
        case .object(let members):
            // Sorted by the names as written, so the order does not depend on the dictionary.
            let named = members.map { (options.keys.encode($0.key), $0.value) }.sorted { $0.0 < $1.0 }
            for (name, member) in named {
                collectPairs(key: key.map { "\($0)[\(name)]" } ?? name, value: member, options: options, into: &pairs)
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                let name =
                    switch options.arrays {
                    case .brackets: "\(key ?? "")[]"
                    case .noBrackets: key ?? ""
                    case .indexInBrackets: "\(key ?? "")[\(index)]"
                    }
                collectPairs(key: name, value: element, options: options, into: &pairs)
            }
        case .null:
            // A bare key; with an empty name there is nothing to write (and nothing a decoder
            // would read back), so nothing is.
            if let key, !key.isEmpty { pairs.append((key, nil)) }
        default:
            if let key { pairs.append((key, scalarText(value, options: options))) }
        }
    }

    private static func scalarText(_ value: JSON, options: QueryEncodingOptions) -> String {
        switch value {
        case .bool(let bool):
            switch options.booleans {
            case .numeric: return bool ? "1" : "0"
            case .literal: return bool ? "true" : "false"
            }
        case .string(let string): return string
        default: return value.description  // numbers, written as JSON writes them
        }
    }

    /// Percent-encodes everything but `A-Z a-z 0-9 - . _ ~ ? /`; with `spacesAsPlus`, a space
    /// is written `+` (as HTML forms do) instead of `%20`.
    public static func escape(_ string: String, spacesAsPlus: Bool = false) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "?"), UInt8(ascii: "/"):
                output.append(byte)
            case UInt8(ascii: " ") where spacesAsPlus:
                output.append(UInt8(ascii: "+"))
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}

/// How parameters are written into a query or a form body, as Alamofire's
/// `URLEncodedFormEncoder` lets you choose. The defaults are AFNetworking's (`tags[]=a`,
/// booleans `1`/`0`, spaces `%20`, names as given, sorted). Dates follow the manager's
/// `encoder` (its `dateEncodingStrategy`), which turns `Encodable` parameters into values first.
public struct QueryEncodingOptions: Sendable {
    /// How an array's elements are named.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum ArrayEncoding: Sendable, Hashable {
        /// `tags[]=a&tags[]=b` (Rails, PHP, Flask read it).
        case brackets
        /// `tags=a&tags=b` (repeated keys, as ASIHTTPRequest and many servers expect).
        case noBrackets
        /// `tags[0]=a&tags[1]=b`.
        case indexInBrackets
    }

    /// How booleans are written.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum BoolEncoding: Sendable, Hashable {
        /// `1` and `0`.
        case numeric
        /// `true` and `false`.
        case literal
    }

    /// How a space is written.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum SpaceEncoding: Sendable, Hashable {
        /// `%20`.
        case percentEscaped
        /// `+` (HTML forms' `application/x-www-form-urlencoded`).
        case plusReplaced
    }

    /// How member names are written (nested names too; the brackets are not names).
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum KeyEncoding: Sendable {
        /// As given.
        case useDefaultKeys
        /// `userName` as `user_name`.
        case convertToSnakeCase
        /// `userName` as `user-name`.
        case convertToKebabCase
        /// `userName` as `UserName`.
        case capitalized
        /// `userName` as `username`.
        case lowercased
        /// `userName` as `USERNAME`.
        case uppercased
        /// Your own function of the name.
        case custom(@Sendable (String) -> String)

        /// `name` written this way.
        public func encode(_ name: String) -> String {
            switch self {
            case .useDefaultKeys: name
            case .convertToSnakeCase: Self.separated(name, by: "_")
            case .convertToKebabCase: Self.separated(name, by: "-")
            case .capitalized: name.prefix(1).uppercased() + name.dropFirst()
            case .lowercased: name.lowercased()
            case .uppercased: name.uppercased()
            case .custom(let transform): transform(name)
            }
        }

        /// Words split where a lower-case letter or digit meets an upper-case one, and before
        /// the last capital of a run followed by a lower-case letter (`URLValue`: `url`,
        /// `value`), joined by `separator` in lower case.
        private static func separated(_ name: String, by separator: Character) -> String {
            let characters = Array(name)
            var output = ""
            for (index, character) in characters.enumerated() {
                if character.isUppercase, index > 0 {
                    let previous = characters[index - 1]
                    let next = index + 1 < characters.count ? characters[index + 1] : nil
                    if previous.isLowercase || previous.isNumber
                        || (previous.isUppercase && next?.isLowercase == true)
                    {
                        output.append(separator)
                    }
                }
                output += character.lowercased()
            }
            return output
        }
    }

    /// How an array's elements are named. Default `.brackets`.
    public var arrays: ArrayEncoding
    /// How booleans are written. Default `.numeric`.
    public var booleans: BoolEncoding
    /// How spaces are written. Default `.percentEscaped`.
    public var spaces: SpaceEncoding
    /// How member names are written. Default `.useDefaultKeys`.
    public var keys: KeyEncoding

    /// Options; the defaults are AFNetworking's encoding.
    public init(
        arrays: ArrayEncoding = .brackets, booleans: BoolEncoding = .numeric, spaces: SpaceEncoding = .percentEscaped,
        keys: KeyEncoding = .useDefaultKeys
    ) {
        self.arrays = arrays
        self.booleans = booleans
        self.spaces = spaces
        self.keys = keys
    }
}
