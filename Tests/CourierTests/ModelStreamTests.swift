import Foundation
import Testing

@testable @_spi(CourierInternals) import Courier
@testable import CourierEngine

/// Streams the way model APIs speak, against the fault server's `/v1/chat/completions` (SSE
/// over POST), `/v1/generate` (NDJSON), `/duplex`, `/ndjson-flood` and `/send` routes.
@Suite struct ModelStreamTests {
    struct ChatRequest: Encodable, Sendable {
        struct Message: Encodable, Sendable {
            var role: String
            var content: String
        }
        var model = "courier-test"
        var messages: [Message]
        var stream = true
    }

    struct ChatDelta: Decodable, Sendable {
        struct Choice: Decodable, Sendable {
            struct Delta: Decodable, Sendable { var content: String? }
            var index: Int
            var delta: Delta
        }
        var id: String
        var choices: [Choice]
        var text: String { choices.first?.delta.content ?? "" }
    }

    struct GenerateChunk: Decodable, Sendable, Equatable {
        var model: String
        var response: String
        var done: Bool
    }

    static let sentence = "Courier streams the answer word by word as it comes"

    static func chat(_ text: String = sentence) -> ChatRequest {
        ChatRequest(messages: [.init(role: "user", content: text)])
    }

    /// A manager whose parameters go out as JSON bodies, as a model API takes them.
    static func modelAPI(
        _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) async throws
        -> HTTPSessionManager
    {
        let api = try await faultManager(configure)
        api.requestSerializer = JSONRequestSerializer()
        return api
    }

    static func release(_ name: String) async throws {
        let _: Data = try await faultManager().GET("release/\(name)", serializer: DataResponseSerializer())
    }

    /// `bytes` as the fault server's `/send` route takes them.
    static func send(_ bytes: [UInt8], type: String, close: Bool = false) -> String {
        let b64 = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "send?b64=\(b64)&type=\(type)" + (close ? "&close=1" : "")
    }

    /// The flood route's count of body bytes the kernel took, once it has stopped moving (a
    /// client that stopped reading stalls it): polled every 100 ms, 10 s at most.
    /// The lines of a flood (4 KiB each): 128 MiB, four times what the kernel's buffers may take
    /// on the way. Linux grows a loopback connection's receive buffer up to `tcp_rmem`'s
    /// maximum (32 MiB on the CI machine) while the client reads fast, and the server's send
    /// buffer holds 4 MiB more: a 32 MiB flood could all be "sent" to a client that had stopped.
    static let floodLines = 32_768

    static func bytesSentOnceStalled(_ name: String) async throws -> Int {
        var sent = -1
        for _ in 0..<100 {
            try await Task.sleep(for: .milliseconds(100))
            let now = try await RetryTests.stats(name)["bytesSent"].intValue ?? 0
            if now == sent { break }
            sent = now
        }
        return sent
    }

    // MARK: The model-API call

    /// A chat completion as OpenAI-style APIs stream it: POST with a JSON body, SSE back
    /// (comments, `event:` types, data over two lines), decoded deltas, ending at `[DONE]`.
    /// The first delta is out while the server still holds the rest.
    @Test func aChatCompletionStreamsDecodedDeltasUntilDone() async throws {
        let api = try await Self.modelAPI()
        let name = "chat-\(UUID().uuidString.prefix(8))"
        let deltas = api.events(.post, "v1/chat/completions?hold=\(name)", parameters: Self.chat())
            .decoding(ChatDelta.self, until: "[DONE]")
        var iterator = deltas.makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first?.text == "Courier ")
        try await Self.release(name)
        var text = first?.text ?? ""
        while let delta = try await iterator.next() { text += delta.text }
        #expect(text == Self.sentence.split(separator: " ").map { $0 + " " }.joined())
    }

    /// The sentinel ends the transfer at once, while the iterator is still held: a server that
    /// keeps the response open after `[DONE]` does not keep the connection.
    @Test func theSentinelLetsTheConnectionGo() async throws {
        let api = try await Self.modelAPI()
        var deltas = api.events(.post, "v1/chat/completions?linger=1", parameters: Self.chat("one two"))
            .decoding(ChatDelta.self, until: "[DONE]").makeAsyncIterator()
        #expect(try await deltas.next()?.text == "one ")
        #expect(try await deltas.next()?.text == "two ")
        #expect(try await deltas.next() == nil)
        let group = try EngineGroupTests.group(api)
        let deadline = ContinuousClock.now + .seconds(10)
        while group.engines.contains(where: { $0.load > 0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(group.engines.allSatisfy { $0.load == 0 })
        #expect(try await deltas.next() == nil)
    }

    /// The raw events keep what the server sent: the `event:` type and the data's two lines.
    @Test func theEventsOfAPostKeepTheirTypesAndLines() async throws {
        let api = try await Self.modelAPI()
        var events: [ServerSentEvent] = []
        for try await event in api.events(.post, "v1/chat/completions", parameters: Self.chat("one two")) {
            events.append(event)
        }
        #expect(events.map(\.event) == ["message", "delta", "message"])
        #expect(events[1].data.contains("\n \"choices\""))
        #expect(events.last?.data == "[DONE]")
    }

    /// A body given as is (JSON bytes) and NDJSON back, decoded line by line; the first line
    /// is out while the server holds the rest.
    @Test func anNDJSONAnswerIsDecodedLineByLine() async throws {
        let api = try await faultManager()
        let name = "generate-\(UUID().uuidString.prefix(8))"
        let body = try JSONSerialization.data(withJSONObject: ["model": "m", "prompt": "three little words"])
        let (head, stream) = try await api.stream(
            .post, "v1/generate?hold=\(name)", body: .data(body, contentType: "application/json"))
        #expect(head.headerFields[.contentType] == "application/x-ndjson")
        var chunks = stream.jsonLines(as: GenerateChunk.self).makeAsyncIterator()
        #expect(try await chunks.next() == GenerateChunk(model: "m", response: "three ", done: false))
        try await Self.release(name)
        var rest: [GenerateChunk] = []
        while let chunk = try await chunks.next() { rest.append(chunk) }
        #expect(rest.map(\.response) == ["little ", "words ", ""])
        #expect(rest.last?.done == true)
    }

    /// `bytes` with `Encodable` parameters goes through the request serializer too.
    @Test func bytesTakeEncodableParametersThroughTheSerializer() async throws {
        struct Prompt: Encodable, Sendable {
            var model = "m"
            var prompt = "a b"
        }
        let api = try await Self.modelAPI()
        var responses: [String] = []
        for try await chunk in api.bytes(.post, "v1/generate", parameters: Prompt()).jsonLines(as: GenerateChunk.self) {
            responses.append(chunk.response)
        }
        #expect(responses == ["a ", "b ", ""])
    }

    // MARK: Full duplex

    /// The server echoes each piece of the body as it reads it: the client reads the echo of
    /// one line before it sends the next.
    @Test func theResponseIsReadWhileTheBodyIsStillBeingSent() async throws {
        let api = try await faultManager()
        let (outgoing, writer) = AsyncStream.makeStream(of: Data.self)
        writer.yield(Data("ping 0\n".utf8))
        let (head, incoming) = try await api.stream(.post, "duplex", body: .stream(outgoing))
        #expect(head.status.code == 200)
        var lines = incoming.lines.makeAsyncIterator()
        for round in 0..<5 {
            #expect(try await lines.next() == "ping \(round)")
            if round < 4 { writer.yield(Data("ping \(round + 1)\n".utf8)) }
        }
        writer.finish()
        #expect(try await lines.next() == nil)
    }

    // MARK: Backpressure

    /// A consumer holding one element stalls the server (its sends stop being taken well
    /// before the body's end), then catches up, every line intact and in order.
    @Test func aConsumerThatHoldsAnElementStallsTheServer() async throws {
        struct Line: Decodable, Sendable {
            var i: Int
            var pad: String
        }
        let api = try await faultManager()
        let name = "flood-\(UUID().uuidString.prefix(8))"
        let total = Self.floodLines * 4096
        var lines = api.bytes(.get, "ndjson-flood/\(name)?lines=\(Self.floodLines)").jsonLines(as: Line.self)
            .makeAsyncIterator()
        #expect(try await lines.next()?.i == 0)
        let sent = try await Self.bytesSentOnceStalled(name)
        #expect(sent > 0 && sent < total / 2, "the server sent \(sent) of \(total) bytes")
        var next = 1
        while let line = try await lines.next() {
            guard line.i == next, line.pad.utf8.count == 4096 - "{\"i\": \(next), \"pad\": \"\"}\n".utf8.count else {
                Issue.record("line \(next) came as \(line.i) with \(line.pad.utf8.count) pad bytes")
                break
            }
            next += 1
        }
        #expect(next == Self.floodLines)
        #expect(try await RetryTests.stats(name)["bytesSent"].intValue == total)
    }

    /// The same for an event stream: events are parsed as the loop asks for them, so one held
    /// event stalls the server; nothing piles up in between.
    @Test func anEventConsumerThatHoldsAnEventStallsTheServer() async throws {
        struct Line: Decodable, Sendable { var i: Int }
        let api = try await faultManager()
        let name = "flood-sse-\(UUID().uuidString.prefix(8))"
        let total = Self.floodLines * 4096
        var events = api.events(
            .get, "ndjson-flood/\(name)?sse=1&lines=\(Self.floodLines)",
            streamOptions: EventStreamOptions(reconnection: .never)
        ).decoding(Line.self).makeAsyncIterator()
        #expect(try await events.next()?.i == 0)
        let sent = try await Self.bytesSentOnceStalled(name)
        #expect(sent > 0 && sent < total / 2, "the server sent \(sent) of \(total) bytes")
        var next = 1
        while let event = try await events.next() {
            guard event.i == next else {
                Issue.record("event \(next) came as \(event.i)")
                break
            }
            next += 1
        }
        #expect(next == Self.floodLines)
    }

    // MARK: Hostile servers

    /// A line that never ends fails with `responseTooLarge` at the limit, memory bounded.
    @Test func aLineThatNeverEndsFailsAtItsLimit() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            for try await _ in api.bytes(.get, "endless?type=application/x-ndjson&fill=x")
                .jsonLines(as: GenerateChunk.self, maximumLength: 64 << 10)
            {}
        }
        #expect(isCourierError(error) { if case .responseTooLarge = $0 { true } else { false } })
        let lines = await capturedError {
            for try await _ in api.bytes(.get, "endless?type=text/plain&fill=x").lines {}
        }
        #expect(isCourierError(lines) { if case .responseTooLarge = $0 { true } else { false } })
    }

    /// A line that is not UTF-8 fails the line sequence, after the lines before it, with an
    /// error that names it; nothing is replaced.
    @Test func invalidUTF8FailsTheLineThatHoldsIt() async throws {
        let api = try await faultManager()
        var seen: [String] = []
        let error = await capturedError {
            for try await line in api.bytes(
                .get, Self.send(Array("ok\n".utf8) + [0xFF, 0xFE, 0x0A], type: "text/plain")
            )
            .lines {
                seen.append(line)
            }
        }
        #expect(seen == ["ok"])
        guard case .serializationFailed(let context)? = error as? CourierError else {
            Issue.record("expected serializationFailed, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("Line 2"))
    }

    /// A server that drops the connection inside an event (no end of body), or ends the body
    /// cleanly inside one: the deltas before it, then `connectionLost`, and no second POST.
    @Test(arguments: [false, true])
    func aServerThatStopsInsideAnEventEndsTheStreamWithAnError(clean: Bool) async throws {
        let api = try await Self.modelAPI()
        var texts: [String] = []
        let error = await capturedError {
            let path = "v1/chat/completions?cut=2" + (clean ? "&clean=1" : "")
            for try await delta in api.events(.post, path, parameters: Self.chat()).decoding(ChatDelta.self) {
                texts.append(delta.text)
            }
        }
        #expect(texts == ["Courier ", "streams "])
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
    }

    /// A stream that ends cleanly before its sentinel is an answer cut short.
    @Test func aStreamThatEndsBeforeItsSentinelIsAnError() async throws {
        let api = try await faultManager()
        let events = api.events(
            .get, Self.send(Array("data: {\"n\": 1}\n\n".utf8), type: "text/event-stream"),
            streamOptions: EventStreamOptions(reconnection: .never))
        struct N: Decodable, Sendable { var n: Int }
        var values: [Int] = []
        let error = await capturedError {
            for try await value in events.decoding(N.self, until: "[DONE]") { values.append(value.n) }
        }
        #expect(values == [1])
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
    }

    /// A POST's event stream is sent once; with `.always`, it reconnects like a GET.
    @Test func aPostReconnectsOnlyWhenTheCallerSaysItMay() async throws {
        let api = try await faultManager()
        let once = "post-once-\(UUID().uuidString.prefix(8))"
        var count = 0
        for try await _ in api.events(.post, "events-close/\(once)", parameters: ["q": 1]) { count += 1 }
        #expect(count == 0)
        #expect(try await RetryTests.stats(once)["requests"] == 1)

        let again = "post-again-\(UUID().uuidString.prefix(8))"
        let options = EventStreamOptions(
            minimumReconnectionDelay: .milliseconds(10), maximumReconnectionDelay: .milliseconds(20),
            maximumReconnectionsWithoutEvents: 2, reconnection: .always)
        let error = await capturedError {
            for try await _ in api.events(.post, "events-close/\(again)", parameters: ["q": 1], streamOptions: options)
            {}
        }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
        #expect(try await RetryTests.stats(again)["requests"] == 3)
        #expect(try await RetryTests.stats(again)["methods"] == ["POST", "POST", "POST"])
    }

    /// A 4xx with a JSON error body: the stream throws before any event, with the status and
    /// the body in the error, as a model API's "rate limited" or "bad request" is read.
    @Test func anErrorStatusIsSurfacedWithItsJSONBody() async throws {
        let api = try await Self.modelAPI()
        let error = await capturedError {
            for try await _ in api.events(.post, "v1/chat/completions?status=429", parameters: Self.chat()) {}
        }
        guard case .unacceptableStatusCode(let context)? = error as? CourierError else {
            Issue.record("expected unacceptableStatusCode, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status.code == 429)
        let body = try JSON(parsing: try #require(context.body))
        #expect(body["error"]["message"] == "answered 429 as asked")

        let bad = await capturedError {
            _ = try await api.stream(.post, "v1/chat/completions", parameters: ["model": 1])
        }
        #expect(isCourierError(bad) { $0.context.response?.status.code == 400 && $0.context.body != nil })
    }

    /// Stopping the iteration of typed elements ends the transfer: the engine lets it go and
    /// the server stops being read.
    @Test func stoppingTheConsumerClosesTheConnection() async throws {
        struct Line: Decodable, Sendable { var i: Int }
        let api = try await faultManager()
        let name = "flood-stop-\(UUID().uuidString.prefix(8))"
        let path = "ndjson-flood/\(name)?lines=\(Self.floodLines)"
        for try await line in api.bytes(.get, path).jsonLines(as: Line.self) where line.i == 3 {
            break
        }
        let group = try EngineGroupTests.group(api)
        let deadline = ContinuousClock.now + .seconds(10)
        while group.engines.contains(where: { $0.load > 0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(group.engines.allSatisfy { $0.load == 0 })
        let sent = try await RetryTests.stats(name)["bytesSent"].intValue ?? 0
        #expect(sent < Self.floodLines * 4096)
    }

    /// Cancelling the task that reads a model's answer (a "stop" button) ends it with
    /// `CancellationError` and closes the connection while the server is still answering.
    @Test func cancellingTheReadingTaskStopsTheAnswer() async throws {
        let api = try await Self.modelAPI()
        let name = "chat-cancel-\(UUID().uuidString.prefix(8))"
        let first = AsyncStream.makeStream(of: String.self)
        let reader = Task {
            for try await delta in api.events(.post, "v1/chat/completions?hold=\(name)", parameters: Self.chat())
                .decoding(ChatDelta.self, until: "[DONE]")
            {
                first.continuation.yield(delta.text)
            }
        }
        var deltas = first.stream.makeAsyncIterator()
        #expect(await deltas.next() == "Courier ")
        reader.cancel()
        await #expect(throws: CancellationError.self) { try await reader.value }
        let group = try EngineGroupTests.group(api)
        let deadline = ContinuousClock.now + .seconds(10)
        while group.engines.contains(where: { $0.load > 0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(group.engines.allSatisfy { $0.load == 0 })
        try await Self.release(name)
    }

    // MARK: JSON text sequences and the splitter

    @Test func aJSONTextSequenceIsDecodedRecordByRecord() async throws {
        struct N: Decodable, Sendable { var n: Int }
        let api = try await faultManager()
        let records = Array("\u{1E}{\"n\": 1}\n\u{1E}{\"n\": 2}\n\u{1E}\n".utf8)
        var values: [Int] = []
        for try await value in api.bytes(.get, Self.send(records, type: "application/json-seq"))
            .jsonTextSequence(as: N.self)
        {
            values.append(value.n)
        }
        #expect(values == [1, 2])
        let error = await capturedError {
            for try await _ in api.bytes(.get, Self.send(Array("{\"n\": 1}\n".utf8), type: "application/json-seq"))
                .jsonTextSequence(as: N.self)
            {}
        }
        #expect(isCourierError(error) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func theSplitterJoinsRecordsAcrossChunksAndHoldsItsLimit() throws {
        var splitter = RecordSplitter(maximumLength: 4)
        #expect(try splitter.feed(Data("ab".utf8)) == [])
        #expect(try splitter.feed(Data("cd\r".utf8)) == [])
        #expect(try splitter.feed(Data("\nxy\n\n".utf8)) == [Data("abcd".utf8), Data("xy".utf8), Data()])
        #expect(try splitter.feed(Data("tail".utf8)) == [])
        #expect(splitter.finish() == Data("tail".utf8))
        #expect(splitter.finish() == nil)
        #expect(throws: CourierError.self) { try splitter.feed(Data("12345".utf8)) }
        var fresh = RecordSplitter(maximumLength: 4)
        #expect(throws: CourierError.self) { try fresh.feed(Data("123456\n".utf8)) }
    }
}
