import CourierSerialization
import Foundation
import HTTPTypes

/// How an event stream (``HTTPSessionManager/events(_:parameters:headers:options:lastEventID:streamOptions:)``)
/// reconnects, and how much of one line or event it holds.
///
/// After a connection that delivered an event, the stream reconnects after the server's
/// `retry:` delay, else ``reconnectionDelay``, but never sooner than
/// ``minimumReconnectionDelay``. Each reconnection in a row that delivers no event (the server
/// closed at once, refused the connection, timed out) doubles the delay, up to
/// ``maximumReconnectionDelay``, with jitter (a random part of the delay, so that many clients
/// do not come back at the same instant); after ``maximumReconnectionsWithoutEvents`` of them,
/// the stream fails with the last error (or `connectionLost` when the server kept closing
/// cleanly).
public struct EventStreamOptions: Sendable, Hashable {
    /// The delay before reconnecting when the server set none with `retry:`. Default 3 s.
    public var reconnectionDelay: Duration
    /// The shortest delay before a reconnection, whatever `retry:` says (a `retry: 0` from a
    /// server that closes at once would otherwise be a tight loop). Default 250 ms.
    public var minimumReconnectionDelay: Duration
    /// The longest the delay grows to while reconnections deliver nothing. Default 30 s.
    public var maximumReconnectionDelay: Duration
    /// How many reconnections in a row may deliver no event before the stream fails.
    /// Default 10.
    public var maximumReconnectionsWithoutEvents: Int
    /// The longest line accepted (bytes, without its line end); a longer one fails the
    /// stream with `responseTooLarge`. Default 1 MiB.
    public var maximumLineLength: Int
    /// The largest event accepted (bytes of data, type and ID); a larger one fails the
    /// stream with `responseTooLarge`. Default 8 MiB.
    public var maximumEventSize: Int
    /// Which streams reconnect when their connection ends or drops. Default
    /// ``Reconnection-swift.enum/idempotentMethods``: a `GET` does, a `POST` does not.
    public var reconnection: Reconnection

    /// Which event streams reconnect.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum Reconnection: Sendable, Hashable {
        /// Streams whose method is idempotent (RFC 9110 section 9.2.2: `GET`, `HEAD`,
        /// `OPTIONS`, `TRACE`, `PUT`, `DELETE`) reconnect; others, such as a model API's
        /// `POST`, are sent once and end with the connection.
        case idempotentMethods
        /// Every stream reconnects, whatever its method (for a `POST` the server treats as
        /// safe to send again), except one whose body is an `AsyncSequence`, which can be sent
        /// once.
        case always
        /// No stream reconnects: the first connection's end is the stream's end.
        case never
    }

    /// Options; every value has its documented default unless given.
    public init(
        reconnectionDelay: Duration = .seconds(3), minimumReconnectionDelay: Duration = .milliseconds(250),
        maximumReconnectionDelay: Duration = .seconds(30), maximumReconnectionsWithoutEvents: Int = 10,
        maximumLineLength: Int = ServerSentEventParser.defaultMaximumLineLength,
        maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize,
        reconnection: Reconnection = .idempotentMethods
    ) {
        self.reconnectionDelay = reconnectionDelay
        self.minimumReconnectionDelay = minimumReconnectionDelay
        self.maximumReconnectionDelay = maximumReconnectionDelay
        self.maximumReconnectionsWithoutEvents = maximumReconnectionsWithoutEvents
        self.maximumLineLength = maximumLineLength
        self.maximumEventSize = maximumEventSize
        self.reconnection = reconnection
    }

    /// Whether a stream sent with `method` reconnects.
    func reconnects(_ method: HTTPRequest.Method) -> Bool {
        switch reconnection {
        case .always: true
        case .never: false
        case .idempotentMethods: [.get, .head, .options, .trace, .put, .delete].contains(method)
        }
    }

    /// The delay before reconnection number `attempt` in a row without events (0 after a
    /// connection that delivered one), given the server's `retry:`: the base delay doubled for
    /// each empty reconnection, capped, with half of it random once it grows.
    func delay(afterEmptyReconnections attempt: Int, serverRetry: Duration?) -> Duration {
        let base = max(minimumReconnectionDelay, serverRetry ?? reconnectionDelay)
        guard attempt > 0 else { return base }
        let cap = max(base, maximumReconnectionDelay)
        var grown = base
        for _ in 0..<min(attempt, 32) where grown < cap { grown = grown * 2 }
        let delay = min(grown, cap)
        return delay / 2 + (delay / 2) * Double.random(in: 0...1)
    }
}
