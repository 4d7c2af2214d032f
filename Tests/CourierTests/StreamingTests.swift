import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// The head before the body (`stream`), the Server-Sent Events parser, and event streams
/// against the fault server, which drops the connection part way.
@Suite struct StreamingTests {
    @Test func theHeadArrivesBeforeTheBody() async throws {
        let api = try await faultManager()
        // 20 bytes, one every 100 ms: the head is there long before the body ends.
        let started = ContinuousClock.now
        let (head, body) = try await api.stream(.get, "drip", parameters: ["n": 20, "delay": 100])
        let headTime = ContinuousClock.now - started
        #expect(head.status == .ok)
        #expect(head.headerFields[.contentLength] == "20")
        var received = Data()
        for try await chunk in body { received.append(chunk) }
        let bodyTime = ContinuousClock.now - started
        #expect(received == faultBytes(20))
        #expect(headTime < bodyTime)
    }

    @Test func aDataTaskShowsTheHeadBeforeTheBody() async throws {
        let api = try await faultManager()
        // A head announcing 100 bytes, then nothing: the body never comes.
        let task = api.dataTask(.get, "silent-after-headers", serializer: DataResponseSerializer())
        let head = try await task.head
        #expect(head.status == .ok)
        #expect(head.headerFields[.contentLength] == "100")
        task.cancel()
        let error = await capturedError { _ = try await task.value }
        #expect(error is CancellationError)
    }

    @Test func aDataTaskShowsTheHeadAfterTheEndToo() async throws {
        let api = try await faultManager()
        let task = api.dataTask(.get, "drip", parameters: ["n": 5, "delay": 10], serializer: DataResponseSerializer())
        #expect(try await task.value == faultBytes(5))
        #expect(try await task.head.headerFields[.contentLength] == "5")
    }

    @Test func aDataTaskThatFailedShowsTheHeadOfItsResponse() async throws {
        let api = try await faultManager()
        let task = api.dataTask(.get, "status/404", serializer: DataResponseSerializer())
        #expect(try await task.head.status == .notFound)
        let refused = api.dataTask(.get, "http://127.0.0.1:1/", serializer: DataResponseSerializer())
        let error = await capturedError { _ = try await refused.head }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
    }

    @Test func aFailedStatusThrowsFromStream() async throws {
        let api = try await faultManager()
        let error = await capturedError { _ = try await api.stream(.get, "status/404") }
        #expect(isCourierError(error) { $0.response?.status.code == 404 })
    }

    /// Between the head and the first read, backpressure holds: the server is not drained
    /// into memory.
    @Test func anUnreadBodyHoldsTheTransferAtTheStreamsBound() async throws {
        let api = try await faultManager()
        let name = "dropped-\(UUID().uuidString.prefix(8))"
        let size = 64_000_000
        do {
            let (head, _) = try await api.stream(.get, "file/\(name)", parameters: ["n": .int(size)])
            #expect(head.headerFields[.contentLength] == "\(size)")
        }
        // Unread, the body paused the transfer at the stream's bound (then dropped, it ended it).
        try await Task.sleep(for: .milliseconds(500))
        let sent = try await RetryTests.stats(name)["bytesSent"].intValue ?? 0
        #expect(sent < size / 2)
    }

    // MARK: The parser

    static func parse(_ pieces: [String]) -> [ServerSentEvent] {
        var parser = ServerSentEventParser()
        return pieces.flatMap { (try? parser.feed(Array($0.utf8))) ?? [] }
    }

    @Test func parsingFollowsTheEventStreamRules() {
        let events = Self.parse([
            "\u{FEFF}: a comment\n",
            "data: first\ndata:  two spaces\n\n",
            "event: update\rid: 7\rdata\r\r",  // CR line ends; `data` without a colon is empty
            "retry: 1500\nretry: soon\nid: bad\0id\ndata: x\r",
            "\n\r\n",  // CR LF split across chunks, then a blank line
            "data: no blank line at the end",
        ])
        #expect(
            events == [
                ServerSentEvent(data: "first\n two spaces"),
                ServerSentEvent(event: "update", data: "", id: "7"),
                ServerSentEvent(data: "x", id: "7", retry: .milliseconds(1500)),
            ])
    }

    @Test func anEventWithoutDataIsNotDispatched() {
        let events = Self.parse(["event: ping\n\n", "id: 3\n\n", "data: after\n\n"])
        #expect(events == [ServerSentEvent(data: "after", id: "3")])
    }

    // MARK: Event streams

    @Test func anEventStreamReconnectsWithLastEventIDAfterTheServersRetryDelay() async throws {
        let api = try await faultManager()
        let name = "events-\(UUID().uuidString.prefix(8))"
        var received: [ServerSentEvent] = []
        for try await event in api.events("events/\(name)", parameters: ["retry": 400]) {
            received.append(event)
            if event.event == "done" { break }
        }
        let retry = Duration.milliseconds(400)
        #expect(
            received == [
                ServerSentEvent(event: "greeting", data: "hello", id: "1", retry: retry),
                ServerSentEvent(data: "line one\nline two", id: "2", retry: retry),
                ServerSentEvent(data: "three", id: "3", retry: retry),
                // The second connection: the retry delay was the first connection's.
                ServerSentEvent(data: "four", id: "4"),
                ServerSentEvent(event: "done", data: "bye", id: "4"),
            ])
        let stats = try await RetryTests.stats(name)
        #expect(stats["lastEventIds"] == [nil, "3"])
        let times = stats["times"].arrayValue?.compactMap(\.doubleValue) ?? []
        try #require(times.count == 2)
        // The server sends for about 120 ms, then drops; the client waits 400 ms.
        #expect(times[1] - times[0] >= 0.4)
    }

    @Test func a204EndsTheEventStream() async throws {
        let api = try await faultManager()
        var count = 0
        for try await _ in api.events("events/\(UUID().uuidString)", lastEventID: "99") { count += 1 }
        #expect(count == 0)
    }

    @Test func aResponseThatIsNotAnEventStreamFails() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            for try await _ in api.events("echo") {}
        }
        #expect(isCourierError(error) { if case .unacceptableContentType = $0 { true } else { false } })
    }

    // MARK: Hostile event streams

    @Test func aServerThatSaysRetry0AndClosesAtOnceGetsBackoffThenAnError() async throws {
        let api = try await faultManager()
        let name = "events-close-\(UUID().uuidString.prefix(8))"
        let options = EventStreamOptions(
            minimumReconnectionDelay: .milliseconds(100), maximumReconnectionDelay: .seconds(2),
            maximumReconnectionsWithoutEvents: 4)
        let error = await capturedError {
            for try await _ in api.events("events-close/\(name)", streamOptions: options) {}
        }
        #expect(
            isCourierError(error) { if case .connectionLost = $0 { true } else { false } },
            "\(String(describing: error))")
        let times = try await RetryTests.stats(name)["times"].arrayValue?.compactMap(\.doubleValue) ?? []
        // The first connection and four reconnections, each delay at least the floor and
        // doubling: 100-200 ms, 200-400, 400-800, 800-1600 (half of each is random).
        #expect(times.count == 5)
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= 0.1 }, "\(gaps)")
        let waited: Double = gaps.reduce(0, +)
        #expect(waited >= 1.5, "\(gaps)")
    }

    @Test func theDefaultsNeverReconnectSoonerThanTheFloor() async throws {
        let api = try await faultManager()
        let name = "events-floor-\(UUID().uuidString.prefix(8))"
        let stream = Task {
            for try await _ in api.events("events-close/\(name)") {}
        }
        // retry: 0 and an immediate close: wait for three connections (two reconnections). The
        // deadline only ends a hang: what is checked is that the gaps are never shorter than the
        // floor, and under ThreadSanitizer, with the whole suite running, a reconnection has
        // waited over 100 s for a thread.
        var times: [Double] = []
        let deadline = ContinuousClock.now + .seconds(300)
        let stats = try await faultManager()
        while times.count < 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
            let record: JSON = try await stats.GET("stats/\(name)")
            times = record["times"].arrayValue?.compactMap(\.doubleValue) ?? []
        }
        stream.cancel()
        _ = await stream.result
        try #require(times.count >= 3)
        // Not a tight loop: the first reconnection waits at least the 250 ms floor, the next
        // at least twice that (the backoff, half of each delay random).
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps[0] >= 0.25, "\(gaps)")
        #expect(gaps[1] >= 0.5, "\(gaps)")
    }

    @Test func aLineThatNeverEndsFailsTheStreamAtItsLimit() async throws {
        let api = try await faultManager()
        var options = EventStreamOptions()
        options.maximumLineLength = 4 << 20
        let error = await capturedError {
            for try await _ in api.events("endless", parameters: ["line": 1], streamOptions: options) {}
        }
        guard case .responseTooLarge(let context)? = error as? CourierError else {
            Issue.record("expected responseTooLarge, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("line is longer than the limit of 4194304 bytes"))
    }

    @Test func theParserRefusesALineOrAnEventPastItsLimit() throws {
        var lines = ServerSentEventParser(maximumLineLength: 8)
        #expect(try lines.feed(Array("data: 1\n\n".utf8)).map(\.data) == ["1"])
        #expect(throws: CourierError.self) { try lines.feed(Array("data: 123\n".utf8)) }
        var events = ServerSentEventParser(maximumEventSize: 10)
        #expect(try events.feed(Array("data: abcd\ndata: efgh\n\n".utf8)).map(\.data) == ["abcd\nefgh"])
        #expect(throws: CourierError.self) { try events.feed(Array("data: abcdef\ndata: ghijk\n".utf8)) }
    }
}
