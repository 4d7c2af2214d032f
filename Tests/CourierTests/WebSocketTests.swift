import Courier
import Foundation
import HTTPTypes
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
        let api = HTTPSessionManager(baseURL: URL(string: "https://example.invalid/api/"))
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

    @Test func aPingIsAnsweredWithItsRoundTripTime() async throws {
        let api = try await manager()
        let socket = try await api.webSocket("echo")
        let time = try await socket.sendPing()
        #expect(time > .zero && time < .seconds(30))
        await socket.close()
    }
}
