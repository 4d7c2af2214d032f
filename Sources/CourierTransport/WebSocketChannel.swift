@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// What a WebSocket is opened with, besides its request.
package struct WebSocketParameters: Sendable {
    /// The subprotocols offered, in order of preference.
    package var protocols: [String] = []
    /// The largest message accepted (all its fragments); a larger one closes with 1009.
    package var maximumMessageSize = 16 << 20
    /// The most message bytes accepted in all; past it, the connection closes with 1009.
    package var maximumTotalSize: Int64?
    /// A ping is sent when nothing has arrived for this long, and the connection fails when
    /// nothing arrives for as long again; nil sends none.
    package var pingInterval: Duration?
    /// How long a close waits for the server's close frame before dropping the connection.
    package var closeTimeout: Duration = .seconds(5)
    /// How long the connection and the opening handshake may take together.
    package var openTimeout: Duration = .seconds(60)
    /// Messages held for a reader that is not reading before the socket stops being read.
    package var receiveQueueLimit = 64
    /// Offer permessage-deflate (RFC 7692).
    package var offersCompression = false
    /// Told once when a WebSocket that opened ends: how (an error, or a close handshake) and
    /// the peer's close frame, if one came. On the transport's thread: must not block.
    package var onEnd: (@Sendable (Result<Void, any Error>, WebSocketClosure?) -> Void)?

    package init() {}
}

/// A WebSocket the server accepted.
package struct WebSocketOpening: Sendable {
    /// The handshake request as sent (after interceptors; `Cookie` included).
    package var request: HTTPRequest
    /// The server's `101 Switching Protocols`.
    package var response: HTTPResponse
    /// The subprotocol the server chose, if any.
    package var subprotocol: String?

    package init(request: HTTPRequest, response: HTTPResponse, subprotocol: String?) {
        self.request = request
        self.response = response
        self.subprotocol = subprotocol
    }
}

/// How a WebSocket's close handshake ended: the code and reason of the peer's close frame
/// (the code nil when the frame had none).
package struct WebSocketClosure: Sendable, Hashable {
    package var code: UInt16?
    package var reason: String

    package init(code: UInt16?, reason: String) {
        self.code = code
        self.reason = reason
    }
}

/// A WebSocket connection on a transport: the libcurl engine's, or a stub's in tests.
/// Every method may be called from any task.
package protocol WebSocketChannel: AnyObject, Sendable {
    /// Connects and performs the opening handshake; throws when either fails.
    func open() async throws -> WebSocketOpening
    /// Sends a text or binary message (``WebSocketEvent/text(_:)`` or
    /// ``WebSocketEvent/binary(_:)``); returns when the transport has taken its bytes.
    func send(_ message: WebSocketEvent) async throws
    /// The next message (text or binary); nil once the close handshake is over; throws when
    /// the connection failed.
    func receive() async throws -> WebSocketEvent?
    /// Sends a ping and returns when its pong arrives, with the round-trip time.
    func ping() async throws -> Duration
    /// Sends a close frame and returns when the peer's arrives, or when the close timeout
    /// passes (the connection is then dropped).
    func close(code: UInt16, reason: String) async
    /// Drops the connection at once: waiting calls throw `CancellationError`.
    func cancel()
    /// The peer's close frame, once one arrived.
    var closure: WebSocketClosure? { get }
}

/// The messages a WebSocket received and its reader has not taken yet, safe from any thread:
/// the connection pushes, the reader takes. When ``limit`` messages wait, `push` asks the
/// connection to stop reading the socket (the kernel's buffer then fills and the server's
/// TCP window closes); once the reader has taken half of them, `onDrained` asks it to read
/// again.
package final class WebSocketInbox: Sendable {
    private struct State: Sendable {
        var messages: [WebSocketEvent] = []
        var first = 0
        var receiver: (id: UInt64, continuation: CheckedContinuation<WebSocketEvent?, any Error>)?
        var nextReceiverID: UInt64 = 0
        /// Set once: nil (a close handshake) or the error.
        var end: Result<Void, any Error>?
        var paused = false

        var count: Int { messages.count - first }

        mutating func takeFirst() -> WebSocketEvent {
            let message = messages[first]
            first += 1
            if first == messages.count {
                messages.removeAll(keepingCapacity: true)
                first = 0
            } else if first >= 64 && first * 2 >= messages.count {
                messages.removeFirst(first)
                first = 0
            }
            return message
        }
    }

    private let state = Locked(State())
    /// Messages waiting before the connection stops reading.
    package let limit: Int
    private let onDrained: @Sendable () -> Void

    /// An empty inbox; `onDrained` is called (on the reader's thread) when a paused
    /// connection may read again.
    package init(limit: Int, onDrained: @escaping @Sendable () -> Void) {
        self.limit = max(limit, 1)
        self.onDrained = onDrained
    }

    /// Hands `message` to the waiting reader or queues it. Returns whether the connection
    /// should stop reading until `onDrained`.
    package func push(_ message: WebSocketEvent) -> Bool {
        let (receiver, pause) = state.withLock { state -> (CheckedContinuation<WebSocketEvent?, any Error>?, Bool) in
            guard state.end == nil else { return (nil, false) }
            if let receiver = state.receiver {
                state.receiver = nil
                return (receiver.continuation, false)
            }
            state.messages.append(message)
            if state.count >= limit { state.paused = true }
            return (nil, state.paused)
        }
        receiver?.resume(returning: message)
        return pause
    }

    /// Ends the inbox: after the queued messages, the reader gets nil (`.success`) or the
    /// error. Later calls do nothing.
    package func finish(_ end: Result<Void, any Error>) {
        let receiver = state.withLock { state -> CheckedContinuation<WebSocketEvent?, any Error>? in
            guard state.end == nil else { return nil }
            state.end = end
            defer { state.receiver = nil }
            return state.receiver?.continuation
        }
        guard let receiver else { return }
        switch end {
        case .success: receiver.resume(returning: nil)
        case .failure(let error): receiver.resume(throwing: error)
        }
    }

    /// Whether the inbox has ended.
    package var isFinished: Bool { state.withLock { $0.end != nil } }

    /// The next message; nil after a close handshake, once the queued messages are taken.
    /// Cancelling the waiting task throws `CancellationError` (the inbox stays usable).
    package func next() async throws -> WebSocketEvent? {
        if let ready = try takeReady() { return ready.message }
        let id = state.withLock { state in
            state.nextReceiverID += 1
            return state.nextReceiverID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<WebSocketEvent?, any Error>) in
                enum Now {
                    case wait, message(WebSocketEvent), end(Result<Void, any Error>), cancelled
                }
                let now = state.withLock { state -> Now in
                    if state.count > 0 { return .message(state.takeFirst()) }
                    if let end = state.end { return .end(end) }
                    if Task.isCancelled { return .cancelled }
                    precondition(state.receiver == nil, "WebSocket messages read by two tasks at once")
                    state.receiver = (id, continuation)
                    return .wait
                }
                switch now {
                case .wait: break
                case .message(let message): continuation.resume(returning: message)
                case .end(.success): continuation.resume(returning: nil)
                case .end(.failure(let error)): continuation.resume(throwing: error)
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let receiver = state.withLock { state -> CheckedContinuation<WebSocketEvent?, any Error>? in
                guard let receiver = state.receiver, receiver.id == id else { return nil }
                state.receiver = nil
                return receiver.continuation
            }
            receiver?.resume(throwing: CancellationError())
        }
    }

    /// A queued message or the end, without waiting; nil when neither is there yet.
    private func takeReady() throws -> (message: WebSocketEvent?, Void)? {
        let (ready, resumes) = state.withLock { state -> ((WebSocketEvent?, Result<Void, any Error>?)?, Bool) in
            if state.count > 0 {
                let message = state.takeFirst()
                var resumes = false
                if state.paused && state.count <= limit / 2 {
                    state.paused = false
                    resumes = true
                }
                return ((message, nil), resumes)
            }
            if let end = state.end { return ((nil, end), false) }
            return (nil, false)
        }
        if resumes { onDrained() }
        guard let ready else { return nil }
        if let message = ready.0 { return (message, ()) }
        if case .failure(let error) = ready.1 { throw error }
        return (nil, ())
    }
}
