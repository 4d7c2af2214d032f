import Foundation
import HTTPTypes
import Testing

@testable import Courier
@testable import CourierEngine

/// Trailer fields after a chunked body (the fault server's `/chunked?trailers=1`) and after an
/// HTTP/2 response's data (hypercorn's `/trailers`), on buffered responses and at the end of
/// byte streams.
@Suite struct TrailersTests {
    static let serverTiming = HTTPField.Name("Server-Timing")!
    static let checksum = HTTPField.Name("X-Checksum")!

    @Test func aBufferedResponseHasItsTrailersApartFromItsHead() async throws {
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let response = try await api.request(
            .get, "chunked", parameters: ["n": 5000, "chunk": 700, "trailers": "1"],
            serializer: DataResponseSerializer())
        #expect(response.data.count == 5000)
        let trailers = try #require(response.trailers)
        #expect(trailers[Self.serverTiming] == "db;dur=53")
        #expect(trailers[Self.checksum] == SHA256.hex(response.data))
        // The head has what came before the body, and no trailer.
        #expect(response.headerFields[Self.serverTiming] == nil)
        #expect(response.headerFields[.transferEncoding] == "chunked")

        let plain = try await api.request(
            .get, "chunked", parameters: ["n": 5000, "chunk": 700], serializer: DataResponseSerializer())
        #expect(plain.trailers == nil)
    }

    @Test func aByteStreamHasItsTrailersAtItsEnd() async throws {
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        var iterator = api.bytes(.get, "chunked", parameters: ["n": 300_000, "chunk": 65_536, "trailers": "1"])
            .makeAsyncIterator()
        var body = Data()
        while let chunk = try await iterator.next() {
            #expect(iterator.trailers == nil)
            body.append(chunk)
        }
        #expect(body.count == 300_000)
        #expect(iterator.trailers?[Self.serverTiming] == "db;dur=53")
        #expect(iterator.trailers?[Self.checksum] == SHA256.hex(body))
    }

    /// Over HTTP/2 trailers are a HEADERS frame after the DATA; a server sends them to a request
    /// that says `TE: trailers`, which a caller adds (it is the one `TE` value HTTP/2 allows).
    /// libcurl hands them on from 7.88.1 among the versions measured; 7.76.1 drops them (a
    /// plain C program on `curl_easy_perform` sees none either), and the body is whole anyway.
    @Test func anHTTP2ResponseHasItsTrailersToo() async throws {
        let server = try await TestServers.http3()
        let api = HTTP3Tests.manager(server, version: .http2OverTLS)
        let response = try await api.request(
            .get, "trailers", parameters: ["n": 40_000], headers: ["TE": "trailers"],
            serializer: DataResponseSerializer())
        #expect(response.metrics.httpVersion == "2")
        #expect(response.data.count == 40_000)
        guard CurlRuntime.versionNumber >= 0x07_58_01 else {
            if CurlRuntime.versionNumber <= 0x07_4C_01 { #expect(response.trailers == nil) }
            return
        }
        let trailers = try #require(response.trailers)
        #expect(trailers[Self.serverTiming] == "db;dur=53")
        #expect(trailers[Self.checksum] == SHA256.hex(response.data))
        #expect(response.headerFields[Self.serverTiming] == nil)

        var iterator = api.bytes(.get, "trailers", parameters: ["n": 300_000], headers: ["TE": "trailers"])
            .makeAsyncIterator()
        var body = Data()
        while let chunk = try await iterator.next() { body.append(chunk) }
        #expect(body.count == 300_000)
        #expect(iterator.trailers?[Self.checksum] == SHA256.hex(body))

        // Not asked for, none are sent.
        let plain = try await api.request(.get, "trailers", serializer: DataResponseSerializer())
        #expect(plain.data.count == 1000 && plain.trailers == nil)
    }
}
