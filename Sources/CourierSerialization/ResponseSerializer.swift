import CourierCore
import CourierJSON
import Foundation

/// Validates a response and turns its body into a value. Serializers run off the session
/// actor, once per response.
public protocol ResponseSerializer<Value>: Sendable {
    /// What the serializer produces.
    associatedtype Value: Sendable

    /// Validates `response` and produces the value, or throws a `CourierError`.
    func serialize(_ response: RawResponse) throws(CourierError) -> Value
}

/// A value a serializer may produce from an empty body (204, 205, `HEAD`).
public protocol EmptyResponse {
    /// The value that stands for "no body".
    static var emptyValue: Self { get }
}

/// A type for responses that have no body worth decoding: `as: Empty.self`.
public struct Empty: Codable, Sendable, Hashable, EmptyResponse {
    /// The empty value.
    public static let emptyValue = Empty()

    /// Creates the empty value.
    public init() {}
}

extension JSON: EmptyResponse {
    /// `null`.
    public static var emptyValue: JSON { .null }
}

extension Optional: EmptyResponse {
    /// `nil`.
    public static var emptyValue: Optional { nil }
}

/// The body bytes as they are, after validating the status (and content type, if asked).
public struct DataResponseSerializer: ResponseSerializer {
    /// The checks made before returning the body.
    public var validation: ResponseValidation

    /// Creates the serializer. No content type check by default.
    public init(acceptableStatusCodes: some Sequence<Int> = 200..<300, acceptableContentTypes: Set<String>? = nil) {
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
    }

    /// Validates and returns the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> Data {
        try validation.validate(response)
        return response.data
    }
}

/// The body as text, decoded with the `charset` of `Content-Type` (UTF-8 when there is none,
/// or the `encoding` given here).
public struct StringResponseSerializer: ResponseSerializer {
    /// The checks made before decoding.
    public var validation: ResponseValidation
    /// An encoding that overrides the response's charset.
    public var encoding: String.Encoding?

    /// Creates the serializer.
    public init(
        encoding: String.Encoding? = nil, acceptableStatusCodes: some Sequence<Int> = 200..<300,
        acceptableContentTypes: Set<String>? = nil
    ) {
        self.encoding = encoding
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
    }

    /// Validates and decodes the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> String {
        try validation.validate(response)
        let charset = ResponseValidation.contentTypeParameter("charset", of: response.head.lastValue(of: .contentType))
        let encoding = self.encoding ?? charset.flatMap(Self.encoding(forCharset:)) ?? .utf8
        guard let string = String(data: response.data, encoding: encoding) else {
            throw .serializationFailed(
                response.errorContext("The body is not valid \(charset ?? "UTF-8") text"))
        }
        return string
    }

    /// The `String.Encoding` for an IANA charset name.
    static func encoding(forCharset name: String) -> String.Encoding? {
        switch name.lowercased() {
        case "utf-8", "utf8": .utf8
        case "us-ascii", "ascii": .ascii
        case "iso-8859-1", "latin1", "iso_8859-1", "l1": .isoLatin1
        case "iso-8859-2", "latin2": .isoLatin2
        case "windows-1252", "cp1252": .windowsCP1252
        case "windows-1251", "cp1251": .windowsCP1251
        case "utf-16": .utf16
        case "utf-16le": .utf16LittleEndian
        case "utf-16be": .utf16BigEndian
        case "utf-32": .utf32
        case "shift_jis", "shift-jis", "sjis": .shiftJIS
        case "euc-jp": .japaneseEUC
        default: nil
        }
    }
}

/// The body parsed as `JSON`. Accepts `application/json`, `text/json`, `text/javascript` and
/// any `+json` type by default; an empty body is `JSON.null` for 204, 205 and `HEAD`, and an
/// error otherwise.
public struct JSONResponseSerializer: ResponseSerializer {
    /// The media types JSON serializers accept by default.
    public static let defaultContentTypes: Set<String> = [
        "application/json", "text/json", "text/javascript", "*/*+json",
    ]

    /// The checks made before parsing.
    public var validation: ResponseValidation
    /// Whether to drop `null` members of objects, recursively.
    public var removesKeysWithNullValues: Bool

    /// Creates the serializer.
    public init(
        acceptableStatusCodes: some Sequence<Int> = 200..<300,
        acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultContentTypes,
        removesKeysWithNullValues: Bool = false
    ) {
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
        self.removesKeysWithNullValues = removesKeysWithNullValues
    }

    /// Validates and parses the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> JSON {
        try validation.validate(response)
        if response.data.isEmpty {
            guard EmptyBody.isAllowed(for: response) else {
                throw .serializationFailed(response.errorContext("Expected a JSON body, but the body is empty"))
            }
            return .null
        }
        do {
            let json = try JSON(parsing: response.data)
            return removesKeysWithNullValues ? json.removingNullValues() : json
        } catch {
            throw .serializationFailed(response.errorContext("The body is not valid JSON: \(error)", underlying: error))
        }
    }
}

/// The body decoded into a `Decodable` type, with a `JSONDecoder` by default or any
/// ``DataDecoder``. An empty body (204, 205, `HEAD`) is accepted when `Value` conforms to
/// ``EmptyResponse`` (``Empty``, `Optional`, `JSON`).
///
/// With a `JSONDecoder`, the values, errors and messages are that decoder's: Courier's own
/// faster decoder answers first where it gives exactly the same answer, and the body is
/// decoded again by the `JSONDecoder` for anything else. Text nested deeper than
/// `JSON.maximumNestingDepth` fails with the `JSONParsingError` that `JSON(parsing:)` throws
/// for it (in the error's `underlyingError`).
public struct DecodableResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    /// The checks made before decoding.
    public var validation: ResponseValidation
    /// The decoder; a `JSONDecoder`'s strategies apply.
    public var decoder: any DataDecoder {
        get { choice.decoder }
        set { choice = DecoderChoice(newValue) }
    }
    private var choice: DecoderChoice

    /// Creates the serializer; `decoder` is a `JSONDecoder` with the default strategies unless
    /// given (a configured `JSONDecoder`, a `PropertyListDecoder`, or a ``DataDecoder`` of yours).
    public init(
        _ type: Value.Type = Value.self, decoder: any DataDecoder = JSONDecoder(),
        acceptableStatusCodes: some Sequence<Int> = 200..<300,
        acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultContentTypes
    ) {
        choice = DecoderChoice(decoder)
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
    }

    /// The serializer with `decoder` and `validation` as they are: what a manager makes for
    /// each call that decodes, with the default checks built once.
    package init(decoder: JSONDecoder, validation: ResponseValidation) {
        choice = .json(decoder)
        self.validation = validation
    }

    /// Validates and decodes the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> Value {
        try validation.validate(response)
        if response.data.isEmpty {
            guard EmptyBody.isAllowed(for: response), let empty = Value.self as? any EmptyResponse.Type else {
                throw .serializationFailed(
                    response.errorContext("Expected a body to decode as \(Value.self), but the body is empty"))
            }
            return empty.emptyValue as! Value
        }
        do {
            return try choice.decode(Value.self, from: response.data)
        } catch {
            throw .serializationFailed(
                response.errorContext("Cannot decode \(Value.self): \(error)", underlying: decodingFailure(error)))
        }
    }
}

/// A decoding failure's description (`DecodingError` itself is not `Sendable`).
public struct DecodingFailure: Error, Sendable, CustomStringConvertible {
    /// What the decoder reported.
    public var description: String

    package init(description: String) {
        self.description = description
    }
}
