@_spi(CourierInternals) import CourierCore
import Foundation

/// The AFNetworking query-string encoding, used for URL queries and form bodies.
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
    public static func encode(_ parameters: JSON) throws(CourierError) -> String {
        try pairs(parameters).map { name, value in
            value.map { "\(escape(name))=\(escape($0))" } ?? escape(name)
        }.joined(separator: "&")
    }

    /// The flattened name-value pairs of an object, unescaped (`user[name]`, `tags[]`); nil
    /// for `null` values.
    static func pairs(_ parameters: JSON) throws(CourierError) -> [(String, String?)] {
        guard case .object = parameters else {
            throw .serializationFailed(
                .init(message: "Query and form parameters must be an object of named values, not \(parameters)"))
        }
        try parameters.requireFiniteNumbers()
        var pairs: [(String, String?)] = []
        collectPairs(key: nil, value: parameters, into: &pairs)
        return pairs
    }

    private static func collectPairs(key: String?, value: JSON, into pairs: inout [(String, String?)]) {
        switch value {
        case .object(let members):
            for name in members.keys.sorted() {
                collectPairs(key: key.map { "\($0)[\(name)]" } ?? name, value: members[name]!, into: &pairs)
            }
        case .array(let elements):
            for element in elements { collectPairs(key: "\(key ?? "")[]", value: element, into: &pairs) }
        case .null:
            // A bare key; with an empty name there is nothing to write (and nothing a decoder
            // would read back), so nothing is.
            if let key, !key.isEmpty { pairs.append((key, nil)) }
        default:
            if let key { pairs.append((key, scalarText(value))) }
        }
    }

    private static func scalarText(_ value: JSON) -> String {
        switch value {
        case .bool(let bool): return bool ? "1" : "0"
        case .string(let string): return string
        default: return value.description  // numbers, written as JSON writes them
        }
    }

    /// Percent-encodes everything but `A-Z a-z 0-9 - . _ ~ ? /`.
    public static func escape(_ string: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "?"), UInt8(ascii: "/"):
                output.append(byte)
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
