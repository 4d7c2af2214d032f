import Foundation
import Testing

@testable import Courier
@_spi(CourierInternals) @testable import CourierCore
@testable import CourierEngine
@testable import CourierPipeline
@testable import CourierSerialization
@testable import CourierStorage
@testable import CourierTransport

/// Memory stays bounded when one side is slower: the request body stream is read only as fast
/// as it is sent, and a byte stream's transfer pauses while its consumer is behind.
@Suite struct BackpressureTests {
    @Test func aStreamBodyIsReadOnlyAsFastAsItIsSent() async throws {
        let api = try await faultManager()
        let chunk = 256 << 10
        let produced = Counter()
        let stream = AsyncStream<Data>(unfolding: {
            await produced.add(chunk) <= 16 << 20 ? Data(repeating: 7, count: chunk) : nil
        })
        let body = UploadBody.stream(stream)
        guard case .content(.stream(let bridge)) = body.source else {
            Issue.record("not a stream body")
            return
        }
        let task = api.uploadTask(.post, "echo", body: body)
        task.setMaximumBytesPerSecond(8 << 20)  // two seconds: the producer is faster
        let echo = try await task.value
        #expect(echo["bodyLength"] == .int(16 << 20))
        // Never more than the bridge's capacity plus the chunk that crossed it.
        #expect(bridge.largestBuffered <= (1 << 20) + chunk)
    }

    @Test func aSlowConsumerPausesTheTransfer() async throws {
        let api = try await faultManager()
        let name = "slow-consumer-\(UInt32.random(in: 0...UInt32.max))"
        let total = 48 << 20
        let stream = api.bytes(.get, "file/\(name)", parameters: ["n": .int(total)])
        var received = 0
        var iterator = stream.makeAsyncIterator()
        // Read 4 MiB slowly, then look at what the server managed to send meanwhile.
        while received < 4 << 20, let chunk = try await iterator.next() {
            received += chunk.count
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(300))
        let stats: JSON = try await api.GET("stats/\(name)")
        let sent = try #require(stats["bytesSent"].intValue)
        // Without backpressure all 48 MiB would be gone at once. With it, the server is ahead
        // of the consumer only by our buffer, libcurl's, and the kernel's socket buffers.
        #expect(sent - received < 20 << 20, "sent \(sent), received \(received)")
        #expect(iterator.storage.sink.largestBuffered <= StreamSink.capacity + (256 << 10))
        // Reading on to the end gets every byte, in order (checked at each chunk's edges).
        let (offset, matches) = try await readPatternToEnd(&iterator, from: received)
        #expect(offset == total)
        #expect(matches)
    }
}
