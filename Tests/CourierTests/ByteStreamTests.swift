import Courier
import Foundation
import Testing

@Suite struct ByteStreamTests {
    @Test func chunksArriveInOrderAndWhole() async throws {
        let api = try await faultManager()
        var received = Data()
        for try await chunk in api.bytes(.get, "chunked", parameters: ["n": 300_000, "chunk": 1000]) {
            received.append(chunk)
        }
        #expect(received == faultBytes(300_000))
    }

    /// Chunks share the memory the stream reuses: a chunk still held must keep its bytes while
    /// later ones arrive (several slabs' worth here, none handed back until the end).
    @Test func chunksKeptByTheConsumerStayIntact() async throws {
        let api = try await faultManager()
        let total = 3_000_000
        var chunks: [Data] = []
        for try await chunk in api.bytes(.get, "chunked", parameters: ["n": .int(total), "chunk": 65536]) {
            chunks.append(chunk)
        }
        let received = Data(chunks.joined())
        let expected = faultBytes(total)
        #expect(received.count == total)
        if received != expected {
            let offset = zip(received, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            Issue.record("the bytes differ from offset \(offset ?? received.count)")
        }
    }

    @Test func httpbinStreamLines() async throws {
        let api = try await httpbinManager()
        var text = Data()
        for try await chunk in api.bytes(.get, "stream/5") { text.append(chunk) }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 5)
        #expect(try JSON(parsing: String(lines[4]))["id"] == 4)
    }

    @Test func aBadStatusThrowsBeforeAnyChunk() async throws {
        let api = try await faultManager()
        var chunks = 0
        let error = await capturedError {
            for try await _ in api.bytes(.get, "status/503") { chunks += 1 }
        }
        guard case CourierError.unacceptableStatusCode(let context)? = error else {
            Issue.record("expected unacceptableStatusCode, got \(String(describing: error))")
            return
        }
        #expect(chunks == 0)
        #expect(context.body == Data("status 503".utf8))
    }

    @Test func breakingOutOfTheLoopCancelsTheTransfer() async throws {
        let api = try await faultManager()
        let name = "stream-break-\(UInt32.random(in: 0...UInt32.max))"
        for try await _ in api.bytes(.get, "file/\(name)", parameters: ["n": .int(200 << 20)]) { break }
        try await Task.sleep(for: .milliseconds(500))
        let first: JSON = try await api.GET("stats/\(name)")
        try await Task.sleep(for: .milliseconds(500))
        let second: JSON = try await api.GET("stats/\(name)")
        // The server stopped sending: nothing moved in the second half second.
        #expect(first["bytesSent"] == second["bytesSent"])
        #expect(first["bytesSent"].intValue! < 200 << 20)
    }

    @Test func aLostConnectionThrows() async throws {
        let api = try await faultManager()
        var received = 0
        let error = await capturedError {
            for try await chunk in api.bytes(.get, "close-mid-body", parameters: ["n": 100_000, "sent": 40_000]) {
                received += chunk.count
            }
        }
        #expect(isCourierError(error!) { if case .connectionLost = $0 { true } else { false } })
        #expect(received <= 40_000)
    }
}
