import CourierCore
import CourierJSON
import CourierSerialization
import Foundation
import HTTPTypes
import Testing

/// Response serializers over responses made by hand (no server), and multipart forms.
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
