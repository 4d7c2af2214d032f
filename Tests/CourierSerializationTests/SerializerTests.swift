import CourierCore
import CourierJSON
import CourierSerialization
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// Response serializers over responses made by hand (no server), multipart forms, and the
/// decoder seam of `DecodableResponseSerializer`.
struct SerializerTests {
    /// A response with `body` and `Content-Type: type`.
    static func response(
        _ body: Data, type: String? = "application/json", status: HTTPResponse.Status = .ok
    )
        -> RawResponse
    {
        var fields = HTTPFields()
        if let type { fields[.contentType] = type }
        return RawResponse(
            request: HTTPRequest(method: .get, scheme: "http", authority: "x", path: "/"),
            response: HTTPResponse(status: status, headerFields: fields), data: body)
    }

    static func response(_ text: String, type: String? = "application/json") -> RawResponse {
        response(Data(text.utf8), type: type)
    }

    /// The context of a `serializationFailed` error; nil (and an issue) for anything else.
    static func serializationFailure(
        _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
    ) -> CourierError.Context? {
        do {
            try body()
        } catch CourierError.serializationFailed(let context) {
            return context
        } catch {
            Issue.record("not a serialization failure: \(error)", sourceLocation: sourceLocation)
            return nil
        }
        Issue.record("no error", sourceLocation: sourceLocation)
        return nil
    }

    // MARK: Validation and the simple serializers

    @Test(arguments: [
        ("application/json", "application/json"), (" Application/JSON ; charset=utf-8", "application/json"),
        ("\ttext/Plain\t", "text/plain"), ("application/problem+json;q=1", "application/problem+json"),
    ])
    func theMediaTypeIsTrimmedAndLowerCased(contentType: String, expected: String) {
        let response = HTTPResponse(status: .ok, headerFields: [.contentType: contentType])
        #expect(ResponseValidation.mediaType(of: response) == expected)
    }

    @Test(arguments: ["", " ", "; charset=utf-8", " \t;x"])
    func anEmptyMediaTypeIsNone(contentType: String) throws {
        #expect(
            ResponseValidation.mediaType(of: HTTPResponse(status: .ok, headerFields: [.contentType: contentType]))
                == nil)
        let raw = Self.response("{}", type: contentType)
        #expect(throws: CourierError.self) { try JSONResponseSerializer().serialize(raw) }
    }

    @Test func stringDecodesLatin1FromTheContentType() throws {
        let raw = Self.response(Data([0x5A, 0x6F, 0xEB]), type: "text/plain; charset=ISO-8859-1")
        #expect(try StringResponseSerializer().serialize(raw) == "Zoë")
    }

    @Test func aMissingFileIsAnErrorWhenAppended() throws {
        var form = MultipartFormData()
        #expect(throws: CourierError.self) { try form.append(fileAt: URL(fileURLWithPath: "/no/such/file"), name: "f") }
    }

    @Test func jsonParsesTheBodyAndNamesWhereItIsNotJSON() throws {
        #expect(try JSONResponseSerializer().serialize(Self.response(#"{"a": [1, "b"]}"#)) == ["a": [1, "b"]])
        let context = Self.serializationFailure { _ = try JSONResponseSerializer().serialize(Self.response("[1,]")) }
        #expect(context?.message == "The body is not valid JSON: unexpected character at byte 3")
        #expect(
            context?.underlyingError as? JSONParsingError == JSONParsingError(offset: 3, reason: "unexpected character")
        )
    }

    // MARK: The decoder seam

    struct Account: Decodable, Equatable, Sendable {
        var userName: String
        var createdAt: Date
    }

    /// A configured `JSONDecoder` is used as it is: its strategies apply (the tape decoder,
    /// which knows only the defaults, leaves it alone).
    @Test func aConfiguredJSONDecoderIsHonoured() throws {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .secondsSince1970
        let body = #"{"user_name": "ben", "created_at": 86400}"#
        let expected = Account(userName: "ben", createdAt: Date(timeIntervalSince1970: 86400))
        #expect(
            try DecodableResponseSerializer(Account.self, decoder: decoder).serialize(Self.response(body)) == expected)
        // Set afterwards, too.
        var serializer = DecodableResponseSerializer(Account.self)
        #expect(throws: CourierError.self) { try serializer.serialize(Self.response(body)) }
        serializer.decoder = decoder
        #expect((serializer.decoder as? JSONDecoder) === decoder)
        #expect(try serializer.serialize(Self.response(body)) == expected)
    }

    /// A `DataDecoder` of one's own: lines of `name=value`, which no JSON decoder reads.
    final class FieldsDecoder: DataDecoder {
        let calls = Mutex(0)

        func decode<D: Decodable>(_ type: D.Type, from data: Data) throws -> D {
            calls.withLock { $0 += 1 }
            var object: [String: JSON] = [:]
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else { throw FieldsError(line: String(line)) }
                object[String(line[..<equals])] = .string(String(line[line.index(after: equals)...]))
            }
            return try JSON.object(object).decode(D.self)
        }
    }

    struct FieldsError: Error, CustomStringConvertible {
        var line: String
        var description: String { "no '=' in \(line)" }
    }

    struct Pair: Decodable, Equatable, Sendable {
        var a: String
        var b: String
    }

    @Test func aDataDecoderOfOnesOwnDecodesEveryBody() throws {
        let decoder = FieldsDecoder()
        let serializer = DecodableResponseSerializer(
            Pair.self, decoder: decoder, acceptableContentTypes: ["text/plain"])
        #expect(try serializer.serialize(Self.response("a=1\nb=two", type: "text/plain")) == Pair(a: "1", b: "two"))
        #expect(decoder.calls.withLock { $0 } == 1)
        // Even a body that is JSON goes to it, and its error is the serializer's.
        let context = Self.serializationFailure {
            _ = try serializer.serialize(Self.response(#"{"a": "1", "b": "2"}"#, type: "text/plain"))
        }
        #expect(decoder.calls.withLock { $0 } == 2)
        #expect(context?.message == #"Cannot decode Pair: no '=' in {"a": "1", "b": "2"}"#)
        #expect((context?.underlyingError as? DecodingFailure)?.description == #"no '=' in {"a": "1", "b": "2"}"#)
        #expect(serializer.decoder is FieldsDecoder)
    }

    @Test func aPropertyListDecoderIsADataDecoder() throws {
        struct Settings: Codable, Equatable, Sendable {
            var volume: Int
            var name: String
        }
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .xml
        let body = try encoder.encode(Settings(volume: 7, name: "x"))
        let serializer = DecodableResponseSerializer(
            Settings.self, decoder: PropertyListDecoder(), acceptableContentTypes: ["application/x-plist"])
        #expect(
            try serializer.serialize(Self.response(body, type: "application/x-plist")) == Settings(volume: 7, name: "x")
        )
    }

    /// The default decoder gives JSONDecoder's values and errors.
    @Test func theDefaultDecoderGivesJSONDecodersAnswers() throws {
        let serializer = DecodableResponseSerializer(Pair.self)
        #expect(serializer.decoder is JSONDecoder)
        #expect(try serializer.serialize(Self.response(#"{"a": "1", "b": "2", "a": "3"}"#)) == Pair(a: "1", b: "2"))
        // Text JSONDecoder reads leniently (a trailing comma), JSON(parsing:) does not: the
        // serializer gives JSONDecoder's answer.
        let lenient = #"{"a": "1", "b": "2",}"#
        #expect(throws: JSONParsingError(offset: 20, reason: "expected a key")) { try JSON(parsing: lenient) }
        #expect(try serializer.serialize(Self.response(lenient)) == Pair(a: "1", b: "2"))
        // Errors are JSONDecoder's, for text that is not JSON too.
        for body in [#"{"a": "1"}"#, #"{"a": "1", "b": 2}"#, "[1,]", #"{"a": "1", "b": "2""#, "nul"] {
            let reference = #expect(throws: DecodingError.self) {
                try JSONDecoder().decode(Pair.self, from: Data(body.utf8))
            }
            let context = Self.serializationFailure { _ = try serializer.serialize(Self.response(body)) }
            #expect(context?.message == "Cannot decode Pair: \(reference.map { "\($0)" } ?? "")", "\(body)")
            #expect((context?.underlyingError as? DecodingFailure)?.description == reference.map { "\($0)" })
        }
    }

    // MARK: One depth limit

    /// Nesting one past `JSON.maximumNestingDepth` fails the same way through `JSON(parsing:)`,
    /// the JSON serializer and the Decodable path; at the limit all three read it.
    @Test func nestingOnePastTheLimitFailsAlikeEverywhere() throws {
        let limit = JSON.maximumNestingDepth
        func nested(_ depth: Int) -> String {
            String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        }
        let expected = JSONParsingError(offset: limit, reason: "nesting deeper than \(limit)")

        #expect(throws: expected) { try JSON(parsing: nested(limit + 1)) }
        let json = Self.serializationFailure {
            _ = try JSONResponseSerializer().serialize(Self.response(nested(limit + 1)))
        }
        #expect(json?.underlyingError as? JSONParsingError == expected)
        #expect(json?.message == "The body is not valid JSON: nesting deeper than 512 at byte 512")

        for decoding in [DecodableResponseSerializer(JSON.self), DecodableResponseSerializer(decoder: JSONDecoder())] {
            let context = Self.serializationFailure { _ = try decoding.serialize(Self.response(nested(limit + 1))) }
            #expect(context?.underlyingError as? JSONParsingError == expected)
            #expect(context?.message == "Cannot decode JSON: nesting deeper than 512 at byte 512")
        }
        struct Nested: Decodable, Sendable {
            var list: [JSON]
        }
        let inObject = Self.serializationFailure {
            _ = try DecodableResponseSerializer(Nested.self).serialize(
                Self.response(#"{"list":"# + nested(limit) + "}"))
        }
        #expect(
            inObject?.underlyingError as? JSONParsingError
                == JSONParsingError(offset: 8 + limit - 1, reason: "nesting deeper than 512"))

        let atTheLimit = Self.response(nested(limit))
        #expect(try JSON(parsing: nested(limit)).arrayValue?.count == 1)
        #expect(try JSONResponseSerializer().serialize(atTheLimit) == JSON(parsing: nested(limit)))
        #expect(try DecodableResponseSerializer(JSON.self).serialize(atTheLimit) == JSON(parsing: nested(limit)))
    }
}
