import Courier
@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// The server's end of a WebSocket on a ``StubTransport`` (see
/// ``StubTransport/stubWebSocket(_:subprotocol:handler:)``).
public final class StubWebSocketPeer: Sendable {
    /// The handshake request as the client sent it.
    public let request: RecordedRequest
    /// The subprotocol the stub chose.
    public let subprotocol: String?
    fileprivate let received: WebSocketInbox
    fileprivate let channel: StubWebSocketChannel

    fileprivate init(request: RecordedRequest, subprotocol: String?, channel: StubWebSocketChannel) {
        self.request = request
        self.subprotocol = subprotocol
        self.channel = channel
        received = WebSocketInbox(limit: .max, onDrained: {})
    }

    /// What the client sends, in order; ends when the client closes (see ``clientCloseCode``)
    /// and throws `CancellationError` when it cancels.
    public var messages: Messages { Messages(inbox: received) }

    /// Sends `message` to the client. Throws `CourierError.webSocketClosed` once either side
    /// has closed.
    public func send(_ message: WebSocketMessage) async throws {
        try channel.deliver(message)
    }

    /// Closes from the server's side with `code` and `reason`: the client's messages end, and
    /// its `closeCode` and `closeReason` are these.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") {
        channel.end(.success(()), closure: WebSocketClosure(code: code.rawValue, reason: reason))
    }

    /// Drops the connection without a close frame: the client's messages throw
    /// `CourierError.connectionLost`.
    public func drop() {
        var context = CourierError.Context(
            url: request.url, message: "The server closed the connection without a close frame")
        context.webSocketCloseCode = 1006
        channel.end(.failure(CourierError.connectionLost(context)), closure: nil)
    }

    /// The code the client closed with, once it closed.
    public var clientCloseCode: WebSocketCloseCode? {
        channel.clientClosure.map { WebSocketCloseCode(rawValue: $0.code ?? 1005) }
    }

    /// The reason the client closed with, once it closed.
    public var clientCloseReason: String? { channel.clientClosure?.reason }

    /// The messages the client sent (see ``StubWebSocketPeer/messages``).
    public struct Messages: AsyncSequence, Sendable {
        /// A message.
        public typealias Element = WebSocketMessage
        fileprivate let inbox: WebSocketInbox

        /// An iterator over the messages.
        public func makeAsyncIterator() -> Iterator { Iterator(inbox: inbox) }

        /// Gives the messages one at a time.
        public struct Iterator: AsyncIteratorProtocol {
            fileprivate let inbox: WebSocketInbox

            /// The next message; nil once the client closed.
            public mutating func next() async throws -> WebSocketMessage? {
                WebSocketMessage(try await inbox.next())
            }
        }
    }
}

/// A WebSocket on a stub: both ends in memory.
final class StubWebSocketChannel: WebSocketChannel {
    private struct State {
        var peer: StubWebSocketPeer?
        var handler: Task<Void, Never>?
        var ended = false
        var closure: WebSocketClosure?
        var clientClosure: WebSocketClosure?
    }

    let request: TransferRequest
    let parameters: WebSocketParameters
    let stub: StubTransport
    private let inbox: WebSocketInbox
    private let state = Locked(State())

    init(request: TransferRequest, parameters: WebSocketParameters, stub: StubTransport) {
        self.request = request
        self.parameters = parameters
        self.stub = stub
        inbox = WebSocketInbox(limit: .max, onDrained: {})
    }

    func open() async throws -> WebSocketOpening {
        guard let httpURL = request.url, let url = WebSocketHandshake.webSocketURL(forHTTP: httpURL) else {
            throw CourierError.invalidURL(.init(message: "'\(request.urlString)' is not a valid URL"))
        }
        let recorded = RecordedRequest(
            request: request.head, url: httpURL, body: nil, requestTimeout: request.sharedOptions.value.idleTimeout,
            resourceTimeout: request.sharedOptions.value.totalTimeout)
        guard let route = stub.webSocketRoute(for: recorded) else {
            throw CourierError.webSocketHandshakeFailed(
                .init(
                    url: url, response: HTTPResponse(status: .notFound),
                    message: "No stub answers the WebSocket \(url.absoluteString)"))
        }
        if let chosen = route.subprotocol, !parameters.protocols.contains(chosen) {
            throw CourierError.webSocketHandshakeFailed(
                .init(
                    url: url, response: HTTPResponse(status: .switchingProtocols),
                    message: "The server chose the subprotocol \(chosen), which was not offered"))
        }
        let peer = StubWebSocketPeer(request: recorded, subprotocol: route.subprotocol, channel: self)
        let handler = route.handler
        state.withLock { state in
            state.peer = peer
            state.handler = Task {
                do {
                    try await handler(peer)
                    peer.close()
                } catch {
                    peer.drop()
                }
            }
        }
        var fields = HTTPFields()
        fields[.upgrade] = "websocket"
        fields[.connection] = "Upgrade"
        if let chosen = route.subprotocol { fields[HTTPField.Name("Sec-WebSocket-Protocol")!] = chosen }
        return WebSocketOpening(
            request: request.head, response: HTTPResponse(status: .switchingProtocols, headerFields: fields),
            subprotocol: route.subprotocol)
    }

    func send(_ message: WebSocketEvent) async throws {
        let peer = try state.withLock { state throws(CourierError) in
            guard !state.ended, state.clientClosure == nil, let peer = state.peer else {
                throw closed("A message cannot be sent")
            }
            return peer
        }
        _ = peer.received.push(message)
    }

    func receive() async throws -> WebSocketEvent? {
        try await inbox.next()
    }

    func ping() async throws -> Duration {
        try state.withLock { state throws(CourierError) in
            if state.ended || state.clientClosure != nil { throw closed("A ping cannot be sent") }
        }
        return .zero
    }

    func close(code: UInt16, reason: String) async {
        let peer = state.withLock { state -> StubWebSocketPeer? in
            guard !state.ended, state.clientClosure == nil else { return nil }
            state.clientClosure = WebSocketClosure(code: code, reason: reason)
            return state.peer
        }
        guard let peer else { return }
        peer.received.finish(.success(()))
        // The stub's server answers a close with the same code.
        end(.success(()), closure: WebSocketClosure(code: code, reason: ""))
    }

    func cancel() {
        end(.failure(CancellationError()), closure: nil)
    }

    var closure: WebSocketClosure? { state.withLock { $0.closure } }

    var clientClosure: WebSocketClosure? { state.withLock { $0.clientClosure } }

    /// A message from the stub's server to the client.
    func deliver(_ message: WebSocketMessage) throws {
        try state.withLock { state throws(CourierError) in
            if state.ended || state.clientClosure != nil { throw closed("A message cannot be sent") }
        }
        _ = inbox.push(message.event)
    }

    /// Ends both sides. Once.
    func end(_ result: Result<Void, any Error>, closure: WebSocketClosure?) {
        let peer = state.withLock { state -> StubWebSocketPeer?? in
            guard !state.ended else { return .none }
            state.ended = true
            state.closure = closure
            defer { state.peer = nil }  // the peer holds the channel, not the other way round
            return .some(state.peer)
        }
        guard case .some(let peer) = peer else { return }
        inbox.finish(result)
        if case .failure(let error) = result, error is CancellationError {
            peer?.received.finish(.failure(error))
        } else {
            peer?.received.finish(.success(()))
        }
        parameters.onEnd?(result, closure)
    }

    private func closed(_ what: String) -> CourierError {
        .webSocketClosed(
            .init(
                url: WebSocketHandshake.webSocketURL(forHTTP: request.url), message: "\(what): the WebSocket is closed")
        )
    }
}
