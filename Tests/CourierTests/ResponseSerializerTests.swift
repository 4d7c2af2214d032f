import Courier
import Foundation
import HTTPTypes
import Testing

/// Response serializers and their validation, against httpbin.
@Suite struct ResponseSerializerTests {
    struct Slideshow: Decodable, Sendable {
        struct Show: Decodable, Sendable {
            var author: String
            var slides: [Slide]
        }
        struct Slide: Decodable, Sendable {
            var title: String
        }
        var slideshow: Show
    }

    @Test func decodableDecodesTheBody() async throws {
        let api = try await httpbinManager()
        let value = try await api.GET("json", as: Slideshow.self)
        #expect(value.slideshow.author == "Yours Truly")
        #expect(value.slideshow.slides.first?.title == "Wake up to WonderWidgets!")
    }

    @Test func decodingFailureIsASerializationError() async throws {
        struct Wrong: Decodable, Sendable { var missing: Int }
        let api = try await httpbinManager()
        let error = await capturedError { _ = try await api.GET("json", as: Wrong.self) }
        guard case CourierError.serializationFailed(let context)? = error else {
            Issue.record("expected serializationFailed, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status == .ok)
        #expect(context.body?.isEmpty == false)
        #expect(context.message.contains("Wrong"))
    }

    @Test func unacceptableStatusCarriesResponseAndBody() async throws {
        let api = try await httpbinManager()
        let error = await capturedError { _ = try await api.GET("status/418") }
        guard case CourierError.unacceptableStatusCode(let context)? = error else {
            Issue.record("expected unacceptableStatusCode, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status.code == 418)
        #expect(String(decoding: context.body ?? Data(), as: UTF8.self).contains("teapot"))
        #expect(context.url?.path == "/status/418")
        #expect("\(error!)".contains("418"))
    }

    @Test func acceptableStatusCodesAreConfigurable() async throws {
        let api = try await httpbinManager()
        let data = try await api.GET("status/404", serializer: DataResponseSerializer(acceptableStatusCodes: [404]))
        #expect(data.isEmpty)
    }

    @Test func jsonRefusesOtherContentTypes() async throws {
        let api = try await httpbinManager()
        let error = await capturedError { _ = try await api.GET("html") }
        #expect(isCourierError(error!) { if case .unacceptableContentType = $0 { true } else { false } })
    }

    @Test(arguments: [
        "application/json", "text/json", "text/javascript", "application/vnd.api+json",
        "application/problem+json; charset=utf-8",
    ])
    func jsonAcceptsJSONTypes(contentType: String) async throws {
        let api = try await httpbinManager()
        // httpbin sends its own `Content-Type: application/json` first; the last one counts.
        let response = try await api.request(
            .get, "response-headers", parameters: ["Content-Type": .string(contentType)],
            serializer: JSONResponseSerializer())
        #expect(response.headerFields[values: .contentType].last == contentType)
        #expect(response.value["Content-Type"].arrayValue?.last == .string(contentType))
    }

    @Test func emptyBodiesAreNullFor204AndHEAD() async throws {
        let api = try await httpbinManager()
        let noContent: JSON = try await api.GET("status/204")
        #expect(noContent == nil)
        let head: JSON = try await api.HEAD("json")
        #expect(head == nil)
        let empty = try await api.GET("status/204", as: Empty.self)
        #expect(empty == Empty())
        let optional = try await api.GET("status/204", as: Slideshow?.self)
        #expect(optional == nil)
    }

    @Test func anEmptyBodyIsAnErrorForA200() async throws {
        let api = try await httpbinManager()
        let error = await capturedError {
            _ = try await api.GET("status/200", serializer: JSONResponseSerializer(acceptableContentTypes: nil))
        }
        #expect(isCourierError(error!) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func removesKeysWithNullValuesWhenAsked() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = JSONRequestSerializer()
        api.responseSerializer = JSONResponseSerializer(removesKeysWithNullValues: true)
        let echo: JSON = try await api.POST("post", parameters: ["a": nil, "b": 1])
        #expect(echo["json"] == ["b": 1])
        #expect(echo.objectValue?["files"] != nil)
        #expect(echo.objectValue?.keys.contains("json") == true)
    }

    @Test func stringUsesTheCharset() async throws {
        let api = try await httpbinManager()
        let text = try await api.GET("encoding/utf8", serializer: StringResponseSerializer())
        #expect(text.contains("∮ E⋅da = Q"))
    }

    @Test func dataResponseCarriesEverything() async throws {
        let api = try await httpbinManager()
        let response = try await api.request(.get, "get", parameters: ["x": 1], serializer: DataResponseSerializer())
        #expect(response.status == .ok)
        #expect(response.headerFields[.contentType] == "application/json")
        #expect(response.request.method == .get)
        #expect(response.url.query == "x=1")
        #expect(try JSON(parsing: response.value)["args"]["x"] == "1")
        #expect(response.data == response.value)
        #expect(response.metrics.httpVersion == "1.1")
        #expect(response.metrics.remoteAddress.hasPrefix("127.0.0.1:"))
        #expect(response.metrics.totalDuration >= response.metrics.firstByte)
    }
}
