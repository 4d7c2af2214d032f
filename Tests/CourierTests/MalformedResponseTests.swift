import Courier
import Foundation
import Testing

/// Responses that are not valid HTTP/1.1 fail as `CourierError.invalidResponse`, with a message
/// that says what was wrong (fault server routes `/framing-*`).
@Suite struct MalformedResponseTests {
    /// The error of a GET of `path`, which must be `.invalidResponse`; nil (and an issue) if not.
    private func invalidResponse(
        _ api: HTTPSessionManager, _ path: String, parameters: JSON? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> CourierError.Context? {
        let error = await capturedError(sourceLocation: sourceLocation) {
            _ = try await api.GET(path, parameters: parameters, serializer: DataResponseSerializer())
        }
        guard case CourierError.invalidResponse(let context)? = error else {
            Issue.record(
                "\(path) \(parameters.map { "\($0)" } ?? ""): expected invalidResponse, got \(String(describing: error))",
                sourceLocation: sourceLocation)
            return nil
        }
        return context
    }

    @Test func twoDifferentContentLengthsAreAFramingError() async throws {
        let api = try await faultManager()
        let context = await invalidResponse(api, "framing-two-lengths")
        // Courier's words, or (from libcurl 8.17, which refuses the head before Courier reads
        // it) libcurl's: either names the field.
        #expect(context?.message.contains("Content-Length") == true, "\(context?.message ?? "")")
        #expect(context?.url?.path == "/framing-two-lengths")
    }

    @Test func aContentLengthThatIsNotANumberIsAFramingError() async throws {
        // libcurl refuses `abc` and `-1` itself; it read `1 2` as 1, `5, 6` as 5, and a number
        // beyond 64 bits as "unknown, read to the end" (or, with a size limit, as too large).
        for limit in [Int64(1 << 20), nil] {
            let api = try await faultManager { $0.maximumResponseSize = limit }
            for value in ["abc", "-1", "1 2", "5, 6", "99999999999999999999"] {
                let context = await invalidResponse(api, "framing-bad-length", parameters: ["value": .string(value)])
                #expect(context?.message.contains("Content-Length") == true, "\(value): \(context?.message ?? "")")
            }
        }
    }

    @Test func theSameContentLengthRepeatedIsOneLengthAndTheConnectionStays() async throws {
        let api = try await faultManager()
        for (index, form) in ["repeat", "list"].enumerated() {
            let response = try await api.request(
                .get, "framing-same-length", parameters: ["form": .string(form)], serializer: DataResponseSerializer())
            #expect(response.value == faultBytes(5), "\(form)")
            // A different size each time: a response served from the cache has no connection.
            let next = try await api.request(
                .get, "bytes", parameters: ["n": .int(3 + index)], serializer: DataResponseSerializer())
            #expect(next.value == faultBytes(3 + index))
            #expect(next.metrics.reusedConnection, "\(form): a well-framed response keeps its connection")
        }
    }

    @Test func aStatusLineThatIsNotHTTPIsInvalidResponse() async throws {
        let api = try await faultManager()
        for line in ["HTTP/1.1 OK", "FOO 200 OK", "HTTP/1.1 abc OK", "HTTP/1.1 2000 OK"] {
            let context = await invalidResponse(api, "framing-status-line", parameters: ["line": .string(line)])
            #expect(
                context?.message.hasPrefix("The server's status line is not HTTP: ") == true,
                "\(line): \(context?.message ?? "")")
            #expect(context?.response == nil)
        }
    }

    @Test func anHTTP09ReplyWithoutStatusLineIsInvalidResponse() async throws {
        let api = try await faultManager()
        let context = await invalidResponse(api, "framing-http09")
        #expect(context?.message.hasPrefix("The server's status line is not HTTP: ") == true)
    }

    @Test func malformedChunkSizesAreInvalidResponseWithTheHead() async throws {
        let api = try await faultManager()
        for size in ["-5", "fffffffffffffffffff"] {
            let context = await invalidResponse(api, "framing-chunk-size", parameters: ["size": .string(size)])
            // Courier's class and words, with libcurl's (which differ between versions) after them.
            #expect(context?.message.hasPrefix("Malformed chunked encoding: ") == true, "\(size)")
            #expect(context?.response?.status == .ok, "\(size): the head was fine")
            #expect(context?.response?.headerFields[.transferEncoding] == "chunked")
        }
    }

    @Test func aResponseHeadOverTheLimitIsInvalidResponse() async throws {
        let api = try await faultManager()
        let context = await invalidResponse(api, "framing-big-head", parameters: ["kb": 300])
        #expect(context?.message == "The response head is larger than 262144 bytes")
        // Just under the limit: many header lines are fine.
        let response = try await api.request(
            .get, "framing-big-head", parameters: ["kb": 250], serializer: DataResponseSerializer())
        #expect(response.value == faultBytes(5))
        #expect(response.response.headerFields.count > 2500)
    }

    @Test func aHeaderLineOverLibcurlsLimitIsInvalidResponse() async throws {
        let api = try await faultManager()
        let context = await invalidResponse(api, "framing-long-header", parameters: ["kb": 200])
        #expect(context?.message == "A line of the response head is longer than libcurl's limit of 102400 bytes")
    }

    @Test func transferEncodingWinsOverContentLengthAndTheConnectionIsNotReused() async throws {
        // The claimed length is far over the size limit and the real body far under it.
        let api = try await faultManager { $0.maximumResponseSize = 1000 }
        for (index, order) in ["chunked-first", "length-first"].enumerated() {
            let response = try await api.request(
                .get, "framing-chunked-with-length",
                parameters: ["n": 10, "claimed": 100_000, "order": .string(order)],
                serializer: DataResponseSerializer())
            #expect(response.value == faultBytes(10), "\(order)")
            // A different size each time: a response served from the cache has no connection.
            let next = try await api.request(
                .get, "bytes", parameters: ["n": .int(3 + index)], serializer: DataResponseSerializer())
            #expect(next.value == faultBytes(3 + index))
            #expect(!next.metrics.reusedConnection, "\(order): the connection was used again")
        }
    }

    @Test func aConnectionResetIsStillConnectionLost() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET("framing-reset", serializer: DataResponseSerializer())
        }
        guard case CourierError.connectionLost(let context)? = error else {
            Issue.record("expected connectionLost, got \(String(describing: error))")
            return
        }
        #expect(context.curlCode == 56)
        #expect(context.response?.status == .ok)
    }
}
