import Courier
import Foundation
import Testing

/// Content and transfer codings taken off by Courier (`BodyDecoder`), the same on every
/// libcurl: against the fault server's `/coded` route, which codes a body as asked and says
/// the hash of the body before coding (`Body-SHA256`).
@Suite struct CodingTests {
    private let anyStatus = DataResponseSerializer(acceptableStatusCodes: 100..<600)

    private func get(_ api: HTTPSessionManager, _ query: [String: JSON]) async throws -> DataResponse<Data> {
        try await api.request(.get, "coded", parameters: JSON.object(query), serializer: anyStatus)
    }

    private func decodedWhole(_ response: DataResponse<Data>) -> Bool {
        response.headerFields[HTTPField.Name("Body-SHA256")!] == SHA256.hex(response.value)
    }

    @Test(arguments: ["gzip", "deflate", "deflate-raw", "gzip, deflate"])
    func aContentCodingIsTakenOff(codings: String) async throws {
        let api = try await faultManager()
        let response = try await get(api, ["ce": .string(codings), "n": 200_000])
        #expect(response.value.count == 200_000)
        #expect(decodedWhole(response))
        // The head says how the body came.
        #expect(response.headerFields[.contentEncoding] == codings.replacingOccurrences(of: "-raw", with: ""))
    }

    @Test(arguments: ["gzip, chunked", "deflate, chunked"])
    func aTransferCodingBeforeChunkedIsTakenOff(codings: String) async throws {
        let api = try await faultManager { $0.engineCount = 1 }
        for _ in 0..<2 {
            // Twice on one engine: the connection is kept and its next response read right.
            let response = try await get(api, ["te": .string(codings), "n": 100_000, "chunk": 777])
            #expect(response.value.count == 100_000)
            #expect(decodedWhole(response))
        }
    }

    @Test func bothKindsOfCodingAreTakenOffInTurn() async throws {
        let api = try await faultManager()
        let response = try await get(api, ["ce": "gzip", "te": "gzip, chunked", "n": 50_000])
        #expect(response.value.count == 50_000)
        #expect(decodedWhole(response))
    }

    @Test func anUnknownContentCodingIsHandedOnAsItCame() async throws {
        let api = try await faultManager { $0.engineCount = 1 }
        let response = try await get(api, ["ce": "arizona", "body": "as sent"])
        #expect(String(decoding: response.value, as: UTF8.self) == "as sent")
        #expect(response.headerFields[.contentEncoding] == "arizona")
        // A coding Courier knows under one it does not: the whole body is handed on.
        let layered = try await get(api, ["ce": "gzip, arizona", "body": "layered"])
        #expect(layered.headerFields[.contentEncoding] == "gzip, arizona")
        #expect(layered.value.count > 0 && !decodedWhole(layered))
    }

    /// A transfer coding other than a final `chunked` ends where the connection does (RFC 9112
    /// section 6.3); one nobody decodes is handed on, for a request that can be read again.
    @Test func anUnknownTransferCodingIsReadToTheConnectionsEnd() async throws {
        let api = try await faultManager()
        let response = try await get(api, ["te": "arizona", "body": "until the end"])
        #expect(response.status == .ok)
        #expect(String(decoding: response.value, as: UTF8.self) == "until the end")
    }

    @Test func aBodyThatIsNotInItsCodingIsAnInvalidResponse() async throws {
        let api = try await faultManager()
        let error = await capturedError { _ = try await get(api, ["ce": "gzip", "corrupt": "1", "n": 5000]) }
        #expect(
            isCourierError(error) { if case .invalidResponse = $0 { true } else { false } },
            "\(String(describing: error))")
    }

    @Test func compressionTurnedOffLeavesContentCodingsOn() async throws {
        let api = try await faultManager { $0.acceptsCompressedResponses = false }
        let response = try await get(api, ["ce": "gzip", "te": "gzip, chunked", "n": 10_000])
        // The transfer coding is the connection's business and comes off; the content coding
        // is the body's, and stays.
        #expect(!decodedWhole(response))
        #expect(response.value.prefix(2) == Data([0x1F, 0x8B]))
    }

    /// A coded body read slowly: the decoder holds back what the stream's consumer has not
    /// room for, and every byte arrives once, in order.
    @Test func aCodedBodyReadSlowlyArrivesWholeAndInOrder() async throws {
        let api = try await faultManager()
        let total = 24 << 20
        var received = Data()
        var head: HTTPResponse?
        let (response, body) = try await api.stream(
            .get, "coded", parameters: ["ce": "gzip", "te": "chunked", "n": .int(total), "chunk": 65_536])
        head = response
        var chunks = 0
        for try await chunk in body {
            received.append(chunk)
            chunks += 1
            if chunks % 16 == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        #expect(received.count == total)
        #expect(head?.headerFields[HTTPField.Name("Body-SHA256")!] == SHA256.hex(received))
    }

    @Test func theRequestAdvertisesWhatCourierDecodes() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET("headers")
        let accepted = try #require(echo["headers"]["Accept-Encoding"].stringValue)
        #expect(accepted.hasPrefix("gzip, deflate"))
        // libcurl's own TE header stays out of the request.
        #expect(echo["headers"]["Te"] == nil)
    }
}
