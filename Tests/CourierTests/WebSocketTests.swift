import CCourierSystem
import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Logging
import Testing

/// WebSockets through the manager, against Python's `websockets` (Tests/Support/
/// serve_websocket.py) on loopback: the connection is libcurl's, the handshake and framing
/// Courier's.
@Suite struct WebSocketTests {
    private func manager(
        _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) async throws -> HTTPSessionManager {
        let base = try await TestServers.webSocket()
        var configuration = HTTPSessionConfiguration.ephemeral
        configure(&configuration)
        return HTTPSessionManager(
            baseURL: URL(string: "http://\(base.host!):\(base.port!)/"), configuration: configuration)
    }

    @Test func textAndBinaryMessagesAreEchoedAndASubprotocolIsChosen() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("echo", protocols: ["v2", "v1"])
        #expect(socket.subprotocol == "v2")
        #expect(socket.response.status.code == 101)
        try await socket.send(.text("hello, ✓"))
        try await socket.send(.data(Data([0, 1, 2, 255])))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("hello, ✓"))
        #expect(try await iterator.next() == .data(Data([0, 1, 2, 255])))
        await socket.close(code: .normalClosure, reason: "bye")
        #expect(socket.closeCode == .normalClosure)
        #expect(try await iterator.next() == nil)
        await #expect(throws: CourierError.self) { try await socket.send(.text("late")) }
    }

    @Test func anAbsoluteWebSocketURLIsTakenAsIs() async throws {
        let base = try await TestServers.webSocket()
        let api = HTTPSessionManager(baseURL: URL(string: "https://example.invalid/api/"), configuration: .ephemeral)
        let socket = try await api.webSocket(base.appendingPathComponent("echo").absoluteString)
        try await socket.send(.text("absolute"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("absolute"))
        #expect(socket.request.path == "/echo")
        await socket.close()
    }

    @Test func theServersFragmentsPingAndCloseAreRead() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("fragments")
        var received: [WebSocketMessage] = []
        for try await message in socket.messages { received.append(message) }
        #expect(received == [.text("Hello, fragments")])
        #expect(socket.closeCode == WebSocketCloseCode(rawValue: 4001))
        #expect(socket.closeReason == "done")
    }

    @Test func aCloseFromTheServerEndsTheMessages() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("close")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == nil)
        #expect(socket.closeCode == WebSocketCloseCode(rawValue: 4000))
        #expect(socket.closeReason == "bye")
        let error = await #expect(throws: CourierError.self) { try await socket.send(.text("after")) }
        guard case .webSocketClosed = error else {
            Issue.record("expected webSocketClosed, got \(String(describing: error))")
            return
        }
    }

    @Test func invalidatingTheSessionEndsItsWebSockets() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("echo")
        api.invalidateAndCancel()
        let error = await #expect(throws: CourierError.self) { for try await _ in socket.messages {} }
        guard case .sessionInvalidated = error else {
            Issue.record("expected sessionInvalidated, got \(String(describing: error))")
            return
        }
        await #expect(throws: CourierError.self) { try await socket.send(.text("after")) }
    }

    /// An open racing the session's end never hangs: a start that reaches the engine after it
    /// began shutting down ends with the others (the engine ended its WebSockets before it ran
    /// the last commands, and such a socket waited forever).
    // The limit catches a hang; it is wide because under a sanitizer, beside the rest of the
    // suite, a round's handshake can take many seconds.
    @Test(.timeLimit(.minutes(10))) func anOpenRacingInvalidationEnds() async throws {
        for round in 0..<8 {
            let api = try await manager()
            let opening = Task { try await api.webSocket("echo") }
            if round % 2 == 1 { await Task.yield() }
            api.invalidateAndCancel()
            switch await opening.result {
            case .success(let socket):
                await #expect(throws: (any Error).self) { for try await _ in socket.messages {} }
            case .failure(let error):
                #expect(error is CourierError || error is CancellationError, "\(error)")
            }
        }
    }

    @Test func aPingIsAnsweredWithItsRoundTripTime() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("echo")
        let time = try await socket.sendPing()
        #expect(time > .zero && time < .seconds(30))
        await socket.close()
    }

    @Test(arguments: [false, true])
    func messagesOfTheLengthsThatChangeTheFrameHeaderAreEchoedWhole(binary: Bool) async throws {
        let api = try await manager()
        let socket = try await api.webSocket("echo")
        var iterator = socket.messages.makeAsyncIterator()
        for length in [0, 125, 126, 65_535, 65_536, Self.largestMessage] {
            let message: WebSocketMessage =
                binary
                ? .data(Data((0..<length).map { UInt8(truncatingIfNeeded: $0 % 251) }))
                : .text(String(repeating: "é", count: length / 2) + (length % 2 == 1 ? "x" : ""))
            try await socket.send(message)
            let echoed = try await iterator.next()
            #expect(echoed == message, "length \(length)")
        }
        await socket.close()
    }

    /// The largest message echoed: the default limit, 16 MiB. Under a sanitizer
    /// (`scripts/sanitize` sets `COURIER_SANITIZER`) 1 MiB: building and checking 16 MiB
    /// there holds both of Swift's pool threads for tens of seconds, and the suite's
    /// timing-sensitive tests beside it starve.
    static let largestMessage = ProcessInfo.processInfo.environment["COURIER_SANITIZER"] == nil ? 16 << 20 : 1 << 20

    /// Sockets open at once: 1,000; 200 under a sanitizer, for the same reason.
    static let manySockets = ProcessInfo.processInfo.environment["COURIER_SANITIZER"] == nil ? 1000 : 200

    @Test func aThousandSocketsOnOneSessionEachExchangeMessages() async throws {
        let count = Self.manySockets
        let api = try await manager()
        let before = (heap: Self.heapBytes(), resident: Self.residentBytes())
        let sockets = try await withThrowingTaskGroup(of: WebSocket.self) { group in
            for _ in 0..<count { group.addTask { try await api.webSocket("echo") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let opened = (heap: Self.heapBytes(), resident: Self.residentBytes())
        let exchanged = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, socket) in sockets.enumerated() {
                group.addTask {
                    var iterator = socket.messages.makeAsyncIterator()
                    for round in 0..<3 {
                        let text = "socket \(index) round \(round)"
                        try await socket.send(.text(text))
                        guard try await iterator.next() == .text(text) else { return 0 }
                    }
                    return 3
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(exchanged == 3 * count)
        print(
            "\(count) WebSockets open: \((opened.heap - before.heap) / count) bytes of heap and "
                + "\((opened.resident - before.resident) / count) bytes of resident memory each")
        await withTaskGroup(of: Void.self) { group in
            for socket in sockets { group.addTask { await socket.close() } }
        }
        #expect(sockets.allSatisfy { $0.closeCode == .normalClosure })
    }

    /// The bytes malloc has handed out and not had back.
    static func heapBytes() -> Int {
        courier_heap_bytes_in_use()
    }

    /// The process's resident memory, from /proc/self/statm.
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    @Test func monitorsAndTheLogSeeTheUpgradeAndTheClose() async throws {
        let recorder = EventMonitorTests.Recorder()
        let log = LogRecorder()
        var logger = log.logger
        logger.logLevel = .debug
        let api = try await manager { $0.eventMonitors = [recorder, LoggingMonitor(logger: logger)] }
        let socket = try await api.webSocket("echo", protocols: ["v1"])
        await socket.close(code: .goingAway, reason: "done")
        let names = await recorder.names(waitingFor: 5)
        #expect(names == ["created", "adapted", "attemptStarted", "webSocketOpened", "webSocketClosed"])
        let events = recorder.events.withLock { $0 }
        if case .webSocketOpened(_, let response, let subprotocol) = events[3].kind {
            #expect(response.status.code == 101)
            #expect(subprotocol == "v1")
        }
        guard case .webSocketClosed(_, let code, let reason, let error) = events[4].kind else {
            Issue.record("expected webSocketClosed, got \(events[4].kind)")
            return
        }
        #expect(code == 1001 && reason == "done")
        #expect(error == nil)
        let lines = await log.lines { $0.contains { $0.message.contains(" closed with ") } }.map(\.message)
        #expect(
            lines.contains { $0.hasPrefix("WebSocket ws://127.0.0.1:") && $0.hasSuffix("/echo -> 101, subprotocol v1") }
        )
        #expect(lines.contains { $0.hasSuffix(#"/echo closed with 1001 "done""#) }, "\(lines)")
    }

    @Test func aRefusedConnectionFailsTheOpenWithTheWebSocketURL() async throws {
        let api = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:1/"), configuration: .ephemeral)
        let error = await #expect(throws: CourierError.self) { try await api.webSocket("chat") }
        guard case .cannotConnect(let context) = error else {
            Issue.record("expected cannotConnect, got \(String(describing: error))")
            return
        }
        #expect(context.url?.absoluteString == "ws://127.0.0.1:1/chat")
    }

    @Test func badSubprotocolNamesAreRefusedBeforeAnythingIsSent() async throws {
        let api = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:1/"), configuration: .ephemeral)
        let error = await #expect(throws: CourierError.self) { try await api.webSocket("chat", protocols: ["a b"]) }
        guard case .invalidHeader = error else {
            Issue.record("expected invalidHeader, got \(String(describing: error))")
            return
        }
        let limit = await #expect(throws: CourierError.self) {
            try await api.webSocket("chat", webSocketOptions: WebSocketOptions(maximumMessageSize: 0))
        }
        #expect(limit?.context.message.contains("maximumMessageSize") == true)
    }

    @Test func theCommandLineSendsLinesAndPrintsMessages() async throws {
        let base = try await TestServers.webSocket()
        let url = base.appendingPathComponent("echo").absoluteString
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/bin/sh"),
            // Standard input stays open until both echoes are printed: at its end the command
            // closes, and the server answers a close at once, dropping echoes not yet sent.
            [
                "-c",
                """
                out=$(mktemp); (printf 'first\\nsecond ✓\\n'; i=0
                while [ "$(wc -l < "$out")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
                ) | "$0" "$1" > "$out"; status=$?; cat "$out"; rm -f "$out"; exit $status
                """, CLITests.courierBinary.path, url,
            ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "first\nsecond ✓\n")
        #expect(run.stderr.contains("the WebSocket closed 1000"))
    }
}

/// WebSockets on `StubTransport`: a client tested without a server.
@Suite struct StubWebSocketTests {
    private func manager(_ stub: StubTransport) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.additionalHeaders = ["X-Client": "tests"]
        return HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1/"), configuration: configuration)
    }

    @Test func aStubPlaysTheServer() async throws {
        let stub = StubTransport()
        stub.stubWebSocket("chat", subprotocol: "v1") { peer in
            try await peer.send(.text("welcome"))
            for try await message in peer.messages { try await peer.send(message) }
        }
        let api = manager(stub)
        let socket = try await api.webSocket("chat", protocols: ["v1"])
        #expect(socket.subprotocol == "v1")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("welcome"))
        try await socket.send(.data(Data([1, 2, 3])))
        #expect(try await iterator.next() == .data(Data([1, 2, 3])))
        await socket.close(code: .goingAway)
        #expect(try await iterator.next() == nil)
        #expect(socket.closeCode == .goingAway)
        let handshake = try #require(stub.requests.first)
        #expect(handshake.url.absoluteString == "https://api.example.com/v1/chat")
        #expect(handshake.request.headerFields[HTTPField.Name("X-Client")!] == "tests")
    }

    @Test func aStubCanCloseOrDropAndAMissingOneRefusesTheHandshake() async throws {
        let stub = StubTransport()
        stub.stubWebSocket("/v1/closing") { peer in peer.close(code: WebSocketCloseCode(rawValue: 4000), reason: "bye")
        }
        stub.stubWebSocket("/v1/dropping") { peer in peer.drop() }
        let api = manager(stub)
        let closing = try await api.webSocket("closing")
        for try await _ in closing.messages {}
        #expect(closing.closeCode == WebSocketCloseCode(rawValue: 4000))
        #expect(closing.closeReason == "bye")
        let dropping = try await api.webSocket("dropping")
        let error = await #expect(throws: CourierError.self) { for try await _ in dropping.messages {} }
        guard case .connectionLost(let context) = error else {
            Issue.record("expected connectionLost, got \(String(describing: error))")
            return
        }
        #expect(context.webSocketCloseCode == 1006)
        let missing = await #expect(throws: CourierError.self) { try await api.webSocket("nowhere") }
        guard case .webSocketHandshakeFailed(let context) = missing else {
            Issue.record("expected webSocketHandshakeFailed, got \(String(describing: missing))")
            return
        }
        #expect(context.response?.status == .notFound)
        #expect(context.url?.absoluteString == "wss://api.example.com/v1/nowhere")
    }
}

/// WebSockets against the peers that break the protocol, fail handshakes, never answer a
/// close, read slowly, and against wss (pins, client certificates) and a CONNECT proxy.
@Suite struct WebSocketPeerTests {
    private func manager(
        _ base: URL, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configure(&configuration)
        return HTTPSessionManager(baseURL: base, configuration: configuration)
    }

    /// The close code the raw server received on the connection named `id`.
    private func lastClose(_ peers: WebSocketPeers, id: String) async throws -> String {
        let raw = URL(string: "http://\(peers.raw.host!):\(peers.raw.port!)/")!
        let api = manager(raw)
        return try await api.GET(
            "hostile/last-close", parameters: ["id": .string(id), "wait": 6000], serializer: StringResponseSerializer())
    }

    @Test(arguments: [
        ("masked", 1002), ("reserved-opcode", 1002), ("rsv", 1002), ("invalid-utf8", 1007),
        ("control-too-long", 1002), ("oversized", 1009),
    ])
    func aFrameThatBreaksTheProtocolFailsWithItsCloseCode(path: String, code: Int) async throws {
        let peers = try await TestServers.webSocketPeers()
        let api = manager(peers.raw)
        let id = "\(path)-\(UUID())"
        let socket = try await api.webSocket(
            "hostile/\(path)", parameters: ["id": .string(id)],
            webSocketOptions: WebSocketOptions(maximumMessageSize: 1 << 20))
        let error = await #expect(throws: CourierError.self) { for try await _ in socket.messages {} }
        #expect(error?.context.webSocketCloseCode == UInt16(code))
        switch (code, error) {
        case (1009, .responseTooLarge?), (1002, .webSocketProtocolViolation?), (1007, .webSocketProtocolViolation?):
            break
        default:
            Issue.record("unexpected error for \(path): \(String(describing: error))")
        }
        #expect(try await lastClose(peers, id: id) == String(code))
        await #expect(throws: CourierError.self) { try await socket.send(.text("after")) }
    }

    @Test func aWrongAcceptOrARefusalFailsTheHandshakeWithTheResponse() async throws {
        let peers = try await TestServers.webSocketPeers()
        let wrong = await #expect(throws: CourierError.self) {
            try await manager(peers.raw).webSocket("hostile/bad-accept")
        }
        guard case .webSocketHandshakeFailed(let context) = wrong else {
            Issue.record("expected webSocketHandshakeFailed, got \(String(describing: wrong))")
            return
        }
        #expect(context.message.contains("Sec-WebSocket-Accept"))
        let refused = await #expect(throws: CourierError.self) {
            try await manager(peers.ws).webSocket("status/401")
        }
        guard case .webSocketHandshakeFailed(let refusal) = refused else {
            Issue.record("expected webSocketHandshakeFailed, got \(String(describing: refused))")
            return
        }
        #expect(refusal.response?.status.code == 401)
        #expect(refusal.body.map { String(decoding: $0, as: UTF8.self) }?.hasPrefix("refused 401") == true)
    }

    @Test func theHandshakeCarriesTheSessionsHeadersAndCookiesAndKeepsTheServersCookie() async throws {
        let peers = try await TestServers.webSocketPeers()
        let api = manager(peers.ws) { $0.additionalHeaders = ["X-Session": "one"] }
        let url = URL(string: "http://\(peers.ws.host!):\(peers.ws.port!)/")!
        #expect(await api.cookies.set(setCookieHeader: "before=1; Path=/", for: url))
        let socket = try await api.webSocket("headers", headers: ["X-Call": "two"])
        var iterator = socket.messages.makeAsyncIterator()
        guard case .text(let text) = try await iterator.next() else {
            Issue.record("expected the headers as text")
            return
        }
        let headers = try JSON(parsing: Data(text.utf8))
        #expect(headers["x-session"] == "one")
        #expect(headers["x-call"] == "two")
        #expect(headers["cookie"] == "before=1")
        #expect(headers["sec-websocket-version"] == "13")
        await socket.close()
        let cookies = await api.cookies.cookies(for: url)
        #expect(cookies.contains { $0.name == "ws" && $0.value == "from-handshake" })
    }

    @Test(arguments: [false, true])
    func messagesFragmentedByTheServerAreAssembled(binary: Bool) async throws {
        let api = manager(try await TestServers.webSocket())
        let sizes = [0, 125, 126, 65_535, 65_536, 1 << 20]
        let socket = try await api.webSocket(
            "sizes",
            parameters: [
                "n": .string(sizes.map(String.init).joined(separator: ",")), "kind": binary ? "binary" : "text",
                "fragment": 1000,
            ])
        var received: [WebSocketMessage] = []
        for try await message in socket.messages { received.append(message) }
        let expected: [WebSocketMessage] = sizes.map { size in
            binary
                ? .data(Data((0..<size).map { UInt8($0 % 251) })) : .text(String(repeating: "x", count: size))
        }
        #expect(received == expected)
        #expect(socket.closeCode == .normalClosure)
        #expect(socket.closeReason == "sizes done")
    }

    @Test func theServersPingIsAnsweredAndADroppedConnectionIsLost() async throws {
        let api = manager(try await TestServers.webSocket())
        let pinging = try await api.webSocket("server-ping")
        var iterator = pinging.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("pong received"))
        await pinging.close()
        let dropping = try await api.webSocket("drop")
        try await dropping.send(.text("first"))
        let error = await #expect(throws: CourierError.self) { for try await _ in dropping.messages {} }
        guard case .connectionLost(let context) = error else {
            Issue.record("expected connectionLost, got \(String(describing: error))")
            return
        }
        #expect(context.webSocketCloseCode == 1006)
    }

    @Test func aCloseTheServerNeverAnswersEndsAtTheCloseTimeout() async throws {
        let peers = try await TestServers.webSocketPeers()
        let api = manager(peers.raw)
        let id = "no-reply-\(UUID())"
        let socket = try await api.webSocket(
            "no-close-reply", parameters: ["id": .string(id)],
            webSocketOptions: WebSocketOptions(closeTimeout: .milliseconds(500)))
        try await socket.send(.text("echo me"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("echo me"))
        await socket.close(code: WebSocketCloseCode(rawValue: 4321), reason: "leaving")
        #expect(socket.closeCode == nil)
        #expect(try await iterator.next() == nil)
        #expect(try await lastClose(peers, id: id) == "4321")
    }

    @Test func messagesAreCompressedBothWaysWhenTheServerAgrees() async throws {
        let peers = try await TestServers.webSocketPeers()
        let api = manager(peers.deflate)
        let socket = try await api.webSocket("echo", webSocketOptions: WebSocketOptions(compression: true))
        let agreed = socket.response.headerFields[HTTPField.Name("Sec-WebSocket-Extensions")!] ?? ""
        #expect(agreed.hasPrefix("permessage-deflate"))
        var iterator = socket.messages.makeAsyncIterator()
        let repetitive = String(repeating: "compress me, ", count: 100_000)
        var generator = SystemRandomNumberGenerator()
        let random = Data((0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        for message: WebSocketMessage in [.text("hello"), .text(repetitive), .data(random), .text(""), .text("hello")] {
            try await socket.send(message)
            #expect(try await iterator.next() == message)
        }
        await socket.close()
        #expect(socket.closeCode == .normalClosure)
        // Without the option nothing is offered, and the same server sends plain frames.
        let plain = try await api.webSocket("echo")
        #expect(plain.response.headerFields[HTTPField.Name("Sec-WebSocket-Extensions")!] == nil)
        try await plain.send(.text("plain"))
        var plainMessages = plain.messages.makeAsyncIterator()
        #expect(try await plainMessages.next() == .text("plain"))
        await plain.close()
    }

    @Test func aCompressedMessageOverTheLimitOnceInflatedIsTooBig() async throws {
        let peers = try await TestServers.webSocketPeers()
        let socket = try await manager(peers.deflate).webSocket(
            "sizes", parameters: ["n": "4194304"],
            webSocketOptions: WebSocketOptions(maximumMessageSize: 1 << 20, compression: true))
        let error = await #expect(throws: CourierError.self) { for try await _ in socket.messages {} }
        guard case .responseTooLarge(let context) = error else {
            Issue.record("expected responseTooLarge, got \(String(describing: error))")
            return
        }
        #expect(context.webSocketCloseCode == 1009)
    }

    @Test func messagesPastTheTotalLimitFailTheWebSocketAfterTheOnesWithinIt() async throws {
        let api = manager(try await TestServers.webSocket())
        var options = WebSocketOptions()
        options.maximumTotalSize = 250_000
        // Three messages of 100,000 bytes: the first two are within 250,000 bytes, the third
        // is not.
        let socket = try await api.webSocket(
            "sizes", parameters: ["n": "100000,100000,100000", "kind": "binary"], webSocketOptions: options)
        var received = 0
        let error = await #expect(throws: CourierError.self) {
            for try await message in socket.messages {
                if case .data(let data) = message { received += data.count }
            }
        }
        #expect(received == 200_000)
        guard case .responseTooLarge(let context) = error else {
            Issue.record("expected responseTooLarge, got \(String(describing: error))")
            return
        }
        #expect(context.webSocketCloseCode == 1009)
        #expect(context.message.contains("250000 bytes in all"))

        // Without the limit, the same messages all arrive.
        let unlimited = try await api.webSocket("sizes", parameters: ["n": "100000,100000,100000", "kind": "binary"])
        var count = 0
        for try await _ in unlimited.messages { count += 1 }
        #expect(count == 3)
    }

    @Test func thePingIntervalKeepsALiveConnectionAndFailsADeadOne() async throws {
        let peers = try await TestServers.webSocketPeers()
        // A second: a pong that a loaded machine (a sanitizer's suite) delays by a few hundred
        // milliseconds must not count as a dead peer.
        let options = WebSocketOptions(pingInterval: .seconds(1))
        // The echo server answers the pings: the socket stays open while idle.
        let alive = try await manager(peers.ws).webSocket("echo", webSocketOptions: options)
        try await Task.sleep(for: .seconds(3))
        try await alive.send(.text("still here"))
        var iterator = alive.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("still here"))
        await alive.close()
        // The silent one answers nothing.
        let dead = try await manager(peers.raw).webSocket("silent", webSocketOptions: options)
        let error = await #expect(throws: CourierError.self) { for try await _ in dead.messages {} }
        guard case .timedOut(let context) = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("not even the answer to a ping"), "\(context.message)")
    }

    @Test func aReaderThatFallsBehindHoldsTheServerBack() async throws {
        let base = try await TestServers.webSocket()
        let api = manager(base)
        let id = UUID().uuidString
        let socket = try await api.webSocket("slow-reader", parameters: ["id": .string(id)])
        var iterator = socket.messages.makeAsyncIterator()
        _ = try await iterator.next()
        // The server has 2000 messages of 64 KiB (125 MiB) to send, and nobody reads for a
        // while: Courier holds 64 of them and stops reading, the kernel's buffers fill, and
        // the server's sends wait.
        try await Task.sleep(for: .seconds(2))
        let status = manager(URL(string: "http://\(base.host!):\(base.port!)/")!)
        let sent = try await Int(
            status.GET("slow-reader/sent", parameters: ["id": .string(id)], serializer: StringResponseSerializer()))
        #expect((1..<1000).contains(sent ?? 0), "the server sent \(String(describing: sent)) of 2000")
        var count = 1
        var last: WebSocketMessage?
        while let message = try await iterator.next() {
            if case .data(let data) = message {
                #expect(data.count == 65_536)
                count += 1
            }
            last = message
        }
        #expect(count == 2000)
        #expect(last == .text("done"))
    }

    @Test func wssTrustsTheSessionsCAAndChecksPins() async throws {
        let peers = try await TestServers.webSocketPeers()
        let trusted = manager(peers.wss) { $0.tls.certificateAuthorityFile = peers.tls.ca1 }
        let socket = try await trusted.webSocket("echo")
        try await socket.send(.text("over TLS"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("over TLS"))
        await socket.close()
        #expect(socket.closeCode == .normalClosure)

        let untrusted = manager(peers.wss) { $0.tls.certificateAuthorityFile = peers.tls.ca2 }
        let refused = await #expect(throws: CourierError.self) { try await untrusted.webSocket("echo") }
        guard case .tls = refused else {
            Issue.record("expected tls, got \(String(describing: refused))")
            return
        }
        let pinned = manager(peers.wss) {
            $0.tls.certificateAuthorityFile = peers.tls.ca1
            $0.tls.pinnedPublicKeys["localhost"] = [peers.tls.pin("valid")]
        }
        await (try pinned.webSocket("echo")).close()
        let wrongPin = manager(peers.wss) {
            $0.tls.certificateAuthorityFile = peers.tls.ca1
            $0.tls.pinnedPublicKeys["localhost"] = [peers.tls.pin("rotated")]
        }
        let mismatch = await #expect(throws: CourierError.self) { try await wrongPin.webSocket("echo") }
        guard case .tls(let context) = mismatch else {
            Issue.record("expected tls, got \(String(describing: mismatch))")
            return
        }
        #expect(context.message.contains("pins"))
    }

    @Test func wssWithAClientCertificate() async throws {
        let peers = try await TestServers.webSocketPeers()
        let client = peers.tls.client
        let identified = manager(peers.wssClientCertificates) {
            $0.tls.certificateAuthorityFile = peers.tls.ca1
            $0.tls.clientIdentity = .pem(
                certificate: URL(fileURLWithPath: client.cert), key: URL(fileURLWithPath: client.key))
        }
        let socket = try await identified.webSocket("echo")
        try await socket.send(.data(Data([7, 7])))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .data(Data([7, 7])))
        await socket.close()
        let anonymous = manager(peers.wssClientCertificates) { $0.tls.certificateAuthorityFile = peers.tls.ca1 }
        await #expect(throws: CourierError.self) { try await anonymous.webSocket("echo") }
    }

    // One at a time: each counts the proxy's tunnels.
    @Test(.serialized, arguments: [false, true])
    func throughAConnectProxy(secure: Bool) async throws {
        let peers = try await TestServers.webSocketPeers()
        let countAPI = manager(peers.proxy)
        let tunnels = { try await Int(countAPI.GET("tunnels", serializer: StringResponseSerializer())) ?? -1 }
        let before = try await tunnels()
        let target = secure ? peers.wss : peers.ws
        let api = manager(target) {
            $0.proxy = peers.proxy
            $0.tls.certificateAuthorityFile = peers.tls.ca1
        }
        let refused = await #expect(throws: CourierError.self) { try await api.webSocket("echo") }
        #expect(refused?.context.message.contains("407") == true, "\(String(describing: refused))")
        var space = try #require(ProtectionSpace(url: peers.proxy))
        space.isProxy = true
        api.credentials.set(Credential(user: "courier", password: "proxy-secret"), for: space)
        let socket = try await api.webSocket("echo")
        try await socket.send(.text("tunnelled"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("tunnelled"))
        await socket.close()
        #expect(try await tunnels() == before + 1)
    }
}
