import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// A message on a WebSocket: text or binary.
public enum WebSocketMessage: Sendable, Hashable {
    /// A text message.
    case text(String)
    /// A binary message.
    case data(Data)
}

extension WebSocketMessage {
    /// The message as the transport carries it.
    package var event: WebSocketEvent {
        switch self {
        case .text(let text): .text(text)
        case .data(let data): .binary(Array(data))
        }
    }

    /// The message a transport's event stands for; nil for the control frames, which
    /// ``WebSocket/messages`` never hands out.
    package init?(_ event: WebSocketEvent?) {
        switch event {
        case .text(let text): self = .text(text)
        case .binary(let bytes): self = .data(Data(bytes))
        default: return nil
        }
    }
}

/// A WebSocket close code (RFC 6455 section 7.4): one of the registered codes, or any code
/// from 3000 to 4999 an application defines.
public struct WebSocketCloseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code's number.
    public var rawValue: UInt16

    /// The code `rawValue`.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// 1000: the purpose of the connection was fulfilled.
    public static let normalClosure = WebSocketCloseCode(rawValue: 1000)
    /// 1001: the endpoint is going away (a server shutting down, a page left).
    public static let goingAway = WebSocketCloseCode(rawValue: 1001)
    /// 1002: the endpoint received a frame the protocol forbids.
    public static let protocolError = WebSocketCloseCode(rawValue: 1002)
    /// 1003: the endpoint cannot take this kind of data (binary where it takes text only).
    public static let unsupportedData = WebSocketCloseCode(rawValue: 1003)
    /// 1005: the close frame had no code (never sent; reported when the peer sent none).
    public static let noStatusReceived = WebSocketCloseCode(rawValue: 1005)
    /// 1006: the connection ended without a close frame (never sent).
    public static let abnormalClosure = WebSocketCloseCode(rawValue: 1006)
    /// 1007: a message's data did not match its type (invalid UTF-8 in a text message).
    public static let invalidFramePayloadData = WebSocketCloseCode(rawValue: 1007)
    /// 1008: a message broke the endpoint's policy.
    public static let policyViolation = WebSocketCloseCode(rawValue: 1008)
    /// 1009: a message was too big to take.
    public static let messageTooBig = WebSocketCloseCode(rawValue: 1009)
    /// 1010: the client needed an extension the server did not agree to.
    public static let mandatoryExtensionMissing = WebSocketCloseCode(rawValue: 1010)
    /// 1011: the server met a condition that kept it from answering.
    public static let internalServerError = WebSocketCloseCode(rawValue: 1011)

    /// The number.
    public var description: String { String(rawValue) }
}

/// How a WebSocket behaves once open.
public struct WebSocketOptions: Sendable {
    /// Sends a ping when nothing has arrived for this long, and fails the WebSocket with
    /// `CourierError.timedOut` when nothing arrives for as long again (a dead peer or path is
    /// noticed). nil (the default) sends none.
    public var pingInterval: Duration?
    /// How long ``WebSocket/close(code:reason:)`` waits for the server's close frame before
    /// dropping the connection. Five seconds by default.
    public var closeTimeout: Duration
    /// The largest message taken (all its fragments): a larger one closes the WebSocket with
    /// 1009 and fails it with `CourierError.responseTooLarge`. 16 MiB by default.
    public var maximumMessageSize: Int
    /// Messages received and not yet read that Courier holds: when that many wait, it stops
    /// reading the socket (the server's sends then slow down, by TCP's flow control) until
    /// the reader has taken half of them. 64 by default.
    public var bufferedMessageLimit: Int
    /// Offers permessage-deflate (RFC 7692): when the server agrees, messages are compressed
    /// both ways with zlib. Off by default: each compressed WebSocket keeps zlib's state for
    /// both directions (up to about 300 KB), which many sockets feel more than the bytes saved
    /// on small messages. ``maximumMessageSize`` limits a message once decompressed.
    public var compression: Bool
    /// The most message bytes taken over the WebSocket's whole life (text and binary
    /// payloads, after decompression): past it, the WebSocket closes with 1009 and fails with
    /// `CourierError.responseTooLarge`, as a message over ``maximumMessageSize`` does. nil
    /// (the default): no limit. For a socket to a peer you do not trust to stop.
    public var maximumTotalSize: Int64? = nil

    /// Options; every argument has its default.
    public init(
        pingInterval: Duration? = nil, closeTimeout: Duration = .seconds(5), maximumMessageSize: Int = 16 << 20,
        bufferedMessageLimit: Int = 64, compression: Bool = false
    ) {
        self.pingInterval = pingInterval
        self.closeTimeout = closeTimeout
        self.maximumMessageSize = maximumMessageSize
        self.bufferedMessageLimit = bufferedMessageLimit
        self.compression = compression
    }
}

/// An open WebSocket (RFC 6455), from ``HTTPSessionManager/webSocket(_:protocols:parameters:headers:options:webSocketOptions:)``.
///
/// Read messages from ``messages`` (one reader at a time), send with ``send(_:)``, and end
/// with ``close(code:reason:)``. Pings from the server are answered by Courier. A WebSocket
/// that is released without being closed is dropped (its connection closed without a close
/// handshake). It holds its manager, as a request does; invalidating the manager's session
/// ends it.
///
/// ```swift
/// let socket = try await api.webSocket("chat", protocols: ["v1"])
/// try await socket.send(.text("hello"))
/// for try await message in socket.messages {
///     if case .text(let text) = message { print(text) }
/// }
/// ```
public final class WebSocket: Sendable {
    /// The handshake request as sent (after interceptors and `adapt(_:)`): its scheme is http
    /// or https, standing for ws or wss.
    public let request: HTTPRequest
    /// The server's `101 Switching Protocols`.
    public let response: HTTPResponse
    /// The subprotocol the server chose among those offered; nil when it chose none.
    public let subprotocol: String?
    let channel: any WebSocketChannel
    /// Held while the WebSocket lives, as a request holds its manager: a session that ends
    /// ends its WebSockets.
    private let manager: HTTPSessionManager

    init(channel: any WebSocketChannel, opening: WebSocketOpening, manager: HTTPSessionManager) {
        self.channel = channel
        self.manager = manager
        request = opening.request
        response = opening.response
        subprotocol = opening.subprotocol
    }

    deinit {
        channel.cancel()
    }

    /// The messages the server sends, as they arrive. The sequence ends after the close
    /// handshake (``closeCode`` and ``closeReason`` then say what the server sent), and
    /// throws the `CourierError` that ended the WebSocket otherwise: `webSocketProtocolViolation`
    /// or `responseTooLarge` (Courier closed it with the code in `webSocketCloseCode`),
    /// `connectionLost` (1006), `timedOut` (``WebSocketOptions/pingInterval``).
    public var messages: Messages { Messages(channel: channel) }

    /// Sends a message; returns when its bytes were handed to the connection (a sender faster
    /// than the network waits here). Throws `CourierError.webSocketClosed` once the WebSocket
    /// is closing or closed, or the error that ended it.
    public func send(_ message: WebSocketMessage) async throws {
        try await channel.send(message.event)
    }

    /// Sends a ping and returns the time until its pong arrived.
    public func sendPing() async throws -> Duration {
        try await channel.ping()
    }

    /// Starts the close handshake with `code` and `reason` (at most 123 bytes of UTF-8; a
    /// longer reason is cut), and returns when the server's close frame has arrived, or when
    /// ``WebSocketOptions/closeTimeout`` has passed (the connection is then dropped).
    /// Messages that arrived before the server's close can still be read from ``messages``.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") async {
        await channel.close(code: code.rawValue, reason: reason)
    }

    /// Drops the connection at once, without a close handshake: ``messages`` and waiting
    /// calls throw `CancellationError`.
    public func cancel() {
        channel.cancel()
    }

    /// The code of the server's close frame, once one arrived (``WebSocketCloseCode/noStatusReceived``
    /// when it had none).
    public var closeCode: WebSocketCloseCode? {
        channel.closure.map { WebSocketCloseCode(rawValue: $0.code ?? 1005) }
    }

    /// The reason in the server's close frame, once one arrived.
    public var closeReason: String? { channel.closure?.reason }

    /// The messages of a WebSocket (see ``WebSocket/messages``).
    public struct Messages: AsyncSequence, Sendable {
        /// A message.
        public typealias Element = WebSocketMessage
        let channel: any WebSocketChannel

        /// An iterator over the messages.
        public func makeAsyncIterator() -> Iterator { Iterator(channel: channel) }

        /// Gives the messages one at a time.
        public struct Iterator: AsyncIteratorProtocol {
            let channel: any WebSocketChannel

            /// The next message; nil after the close handshake.
            public mutating func next() async throws -> WebSocketMessage? {
                WebSocketMessage(try await channel.receive())
            }
        }
    }
}
